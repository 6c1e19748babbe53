"""Fault ``redis-restart`` (conformance/transport/_stream_restart.py) on Ratchet's Redis Streams
connector, on a private redis-server this test starts and stops on a free port (the project's
Redis is never killed here): one example of profile ``deep`` whose directed walk kills the server -9
with an entry of a dead consumer, one in a live consumer's hand and one undelivered, starts it again
on its data directory and lets the consumers carry on. A server with AOF and ``appendfsync always``
(``scripts/services``' configuration) loses nothing; one without persistence loses the streams,
and the suite says which rule that breaks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import Verdict
from conformance._suites import BackendUnderTest
from conformance.backends import TRANSPORT_BACKENDS
from conformance.crash import LocalRedis
from tests._restarts import one_restart_example

pytestmark = [pytest.mark.service("redis")]  # for the redis-server binary; the shared one is untouched


@pytest.fixture(params=[True, False], ids=["durable", "no-persistence"])
def own_redis(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalRedis]:
    server = LocalRedis(durable=request.param).start()
    monkeypatch.setenv("RATCHET_REDIS_URL", server.url)
    try:
        yield server
    finally:
        server.stop()


def test_a_redis_restart_with_entries_pending(own_redis: LocalRedis, tmp_path: Path) -> None:
    spec = TRANSPORT_BACKENDS["redis"]
    factories: dict[str, str | Callable[..., Any]] = {**spec.factories, "stream_control": lambda: own_redis}
    backend = BackendUnderTest("redis", "transport", factories, "redis")
    report, result = one_restart_example(backend, tmp_path)
    if own_redis.durable:
        assert result.stats.faults["redis-restart"] == 1, report.details()
        assert result.verdict is Verdict.PASS, report.details()
        assert {"pending-survived-redis-restart", "pending-settled-after-redis-restart"} <= set(
            result.stats.reached
        ), report.details()
        assert "redelivery-after-kill-absorbed" in result.stats.reached, report.details()
    else:  # found in the first example, then shrunk: the restart in every replay
        assert result.stats.faults["redis-restart"] >= 1, report.details()
        assert result.verdict is Verdict.VIOLATION, report.details()
        assert result.failure is not None and result.failure.rule_id == "S-STREAM-01", report.details()
