"""Reproductions of the nasaga findings on its Redis Streams connector, N-48 onward
(docs/nasaga-findings.md), through the transport suite on a private redis-server this module starts
and stops (the project's Redis is never killed here). Needs PostgreSQL and the host (``make nasaga-host``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance import Verdict
from conformance._suites import BackendUnderTest
from conformance.backends import TRANSPORT_BACKENDS
from conformance.crash import LocalRedis
from tests._restarts import one_restart_example

pytestmark = [pytest.mark.service("postgres", "redis"), pytest.mark.nasaga_schemas]  # redis: the binary


def test_n48_nasagas_consumer_fails_one_round_after_a_redis_restart_then_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nasaga's Redis Streams consumer over the same restart (conformance/transport/_nasaga_restart.py):
    its first ``poll_once`` after the restart fails as a whole (nadis's connection is broken, the
    entries stay pending), the next reconnects, claims the pending entry and reads the undelivered
    one, each unit once (docs/nasaga-findings.md N-48: not a divergence). Needs the host
    (``make nasaga-host``)."""
    server = LocalRedis(durable=True).start()
    monkeypatch.setenv("RATCHET_REDIS_URL", server.url)
    try:
        spec = TRANSPORT_BACKENDS["nasaga-redis-stream"]
        factories: dict[str, str | Callable[..., Any]] = {**spec.factories, "stream_control": lambda: server}
        backend = BackendUnderTest("nasaga-redis-stream", "transport", factories, "redis")
        report, result = one_restart_example(backend, tmp_path)
    finally:
        server.stop()
    assert result.verdict is Verdict.PASS, report.details()
    assert result.stats.faults["redis-restart"] == 1, report.details()
    assert {"pending-survived-redis-restart", "pending-settled-after-redis-restart"} <= set(
        result.stats.reached
    ), report.details()
    assert result.stats.details["transport:failed_polls_after_redis_restart"] == "1", report.details()
