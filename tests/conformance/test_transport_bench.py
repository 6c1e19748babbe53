"""The bench's transport section gives every figure (connector and floor, same run); no timing asserted."""

from __future__ import annotations

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
