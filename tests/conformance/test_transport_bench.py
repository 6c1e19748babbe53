"""The bench's transport section gives every figure (connector and floor, same run); no timing asserted."""

from __future__ import annotations

import pytest

from bench import BenchOptions, render, run_bench


def test_the_transport_section_measures_each_connector_beside_its_floor() -> None:
    options = BenchOptions(
        backends=("fakeredis",), suites=("transport",), runs=1, rate_seconds=0.2, quick=True
    )
    report = run_bench(options)
    assert not report.errors, report.errors
    assert [(r.backend, r.connector) for r in report.transport_rates] == [
        ("fakeredis", "redis-streams"),
        ("grpc", "grpc-mtls"),
    ]
    for rate in report.transport_rates:
        assert rate.messages_per_second.median > 0 and rate.floor_per_second.median > 0
    assert "8. Transports" in render(report)


@pytest.mark.service("redis", "postgres")  # and the host (make nasaga-host)
def test_nasagas_stream_connector_is_measured_beside_the_raw_floor() -> None:
    options = BenchOptions(
        backends=("nasaga-redis-stream",), suites=("transport",), runs=1, rate_seconds=0.2, quick=True
    )
    report = run_bench(options)
    assert not report.errors, report.errors
    (nasaga,) = [r for r in report.transport_rates if r.backend == "nasaga-redis-stream"]
    assert nasaga.floor == "XADD+XREADGROUP+XACK"
    assert nasaga.messages_per_second.median > 0 and nasaga.floor_per_second.median > 0
    # Ratchet's connector is not measured under nasaga's name
    assert [r.connector for r in report.transport_rates if r.backend == "nasaga-redis-stream"] == [
        "nasaga SagaRedisStreamPublisher+CommandConsumer"
    ]
