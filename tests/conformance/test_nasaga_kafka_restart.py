"""The broker restart under nasaga's Kafka consumer (``conformance/transport/_nasaga_kafka_restart.py``),
once, on a private broker this test starts and stops (the project's broker is never restarted
here): one example of profile ``deep``, whose directed walk kills the broker -9 while a unit is
held in the host, starts it again on its data directory and checks that committed offsets and
dead letters survived and the unit finished once. Needs the Kafka jars (``scripts/services up
kafka`` fetched them), PostgreSQL and the host (``make nasaga-host``)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import Verdict
from conformance._suites import BackendUnderTest
from conformance.backends import TRANSPORT_BACKENDS
from conformance.services import Settings, down, up
from tests._restarts import one_restart_example

pytestmark = [pytest.mark.service("postgres"), pytest.mark.nasaga_schemas]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def private_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A broker of this test's own: its services directory and ports, the endpoint pointed at it."""
    port, controller = _free_port(), _free_port()
    env = {
        "RATCHET_SERVICES_DIR": str(tmp_path / "svc"),
        "RATCHET_KAFKA_PORT": str(port),
        "RATCHET_KAFKA_CONTROLLER_PORT": str(controller),
        "RATCHET_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env(dict(os.environ))
    up(["kafka"], settings)
    try:
        yield env["RATCHET_KAFKA_BOOTSTRAP"]
    finally:
        down(["kafka"], settings)


def test_broker_restart_mid_unit_is_survived(private_broker: str, tmp_path: Path) -> None:
    spec = TRANSPORT_BACKENDS["nasaga-kafka"]
    backend = BackendUnderTest("nasaga-kafka", "transport", dict(spec.factories), "kafka")
    report, result = one_restart_example(backend, tmp_path, seed=20261201)
    assert result.verdict is Verdict.PASS, report.details()
    assert result.stats.faults["broker-restart"] == 1, report.details()
    assert "offsets-survived-broker-restart" in result.stats.reached, report.details()
