"""An outage is an environment error, never a verdict; a call that never returns is one too
(conformance/_outage.py). Every server here is a private redis-server on a free port: the project's
services are never killed or frozen."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import attrs
import pytest

from conformance import Report, SuiteResult, Verdict, run_conformance
from conformance._cleanup import Namespaces
from conformance._opened import Opened
from conformance._runner import RunOptions, run_matrix
from conformance._suites import FAMILIES, load_suites, suite_named
from conformance.crash import LocalRedis
from impls.api import InMemoryMembership, MembershipDirectory
from impls.memory._store import MemoryMessageStore
from model.commit import MessageStoreError

SEED = 20_261_130


@pytest.fixture
def own_redis(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalRedis]:
    server = LocalRedis(durable=True).start()
    monkeypatch.setenv("RATCHET_REDIS_URL", server.url)
    try:
        yield server
    finally:
        server.stop()


def run_named_redis(tmp_path: Path, suite: str = "commit", *, direct: bool = False) -> tuple[Report, float]:
    """The named redis backend on the private server; ``direct``: not through the fault proxy."""
    load_suites()
    backend = FAMILIES["commit"].backends()["redis"]
    if direct:
        # A factory without the ``endpoint`` keyword opts out of the wire (conformance.wire), so
        # the frozen server meets the store's own connections and only the watchdog can end a call.
        store = backend.factory("store")

        async def unproxied(namespace: str, membership: MembershipDirectory) -> object:
            return await store(namespace, membership)

        backend = attrs.evolve(backend, factories={**backend.factories, "store": unproxied})
    options = RunOptions(seed=SEED, examples=400, failure_dir=tmp_path / "failures", database_dir=None)
    started = time.perf_counter()
    report = run_matrix([(backend, suite_named(suite))], options)
    return report, time.perf_counter() - started


@pytest.mark.service("redis")  # for the redis-server binary; the shared server is not touched
def test_a_server_killed_by_hand_mid_run_is_exit_2_without_a_failure_file(
    own_redis: LocalRedis, tmp_path: Path
) -> None:
    threading.Timer(2.0, own_redis.kill).start()
    report, _ = run_named_redis(tmp_path)
    (result,) = report.results
    assert result.verdict is Verdict.ERROR, report.details()
    assert report.exit_code == 2
    assert result.error is not None and result.error.startswith("redis (RATCHET_REDIS_URL="), result.error
    assert "\n" not in result.error and "Traceback" not in result.error
    assert not (tmp_path / "failures").exists() or not any((tmp_path / "failures").iterdir())


@pytest.mark.timing
@pytest.mark.service("redis")
def test_a_frozen_server_is_reported_by_the_watchdog(
    own_redis: LocalRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_WATCHDOG_S", "2")
    threading.Timer(2.0, own_redis.freeze).start()
    try:
        report, elapsed = run_named_redis(tmp_path, direct=True)
    finally:
        own_redis.thaw()
    (result,) = report.results
    assert result.verdict is Verdict.ERROR, report.details()
    assert result.error is not None and "did not return within 2s (watchdog" in result.error, result.error
    assert elapsed < 40, elapsed  # the frozen server blocked the old harness for ~80 s per call chain
    assert not (tmp_path / "failures").exists() or not any((tmp_path / "failures").iterdir())


def _watched_store_run(
    factory: Callable[[str, MembershipDirectory], Awaitable[object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[SuiteResult, float]:
    """The store suite on ``factory`` under a 1 s watchdog: its one result, an error (exit 2),
    and the seconds the run took."""
    monkeypatch.setenv("RATCHET_WATCHDOG_S", "1")
    started = time.perf_counter()
    report = run_conformance(factory, suites=("store",), seed=SEED, failure_dir=tmp_path, database_dir=None)
    (result,) = report.results
    assert result.verdict is Verdict.ERROR, report.details()
    assert report.exit_code == 2
    return result, time.perf_counter() - started


async def never_returns(namespace: str, membership: MembershipDirectory) -> object:
    await asyncio.sleep(3600)
    raise MessageStoreError  # pragma: no cover - never reached


@pytest.mark.timing
def test_a_factory_that_never_returns_is_reported_by_the_watchdog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, elapsed = _watched_store_run(never_returns, tmp_path, monkeypatch)
    assert result.error == "the store factory did not return within 1s (watchdog; RATCHET_WATCHDOG_S)"
    assert elapsed < 10


class _DropNeverReturns(MemoryMessageStore):
    async def drop_namespace(self) -> None:
        await asyncio.sleep(3600)


async def drop_never_returns(namespace: str, membership: MembershipDirectory) -> object:
    return _DropNeverReturns(namespace, membership)


@pytest.mark.timing
def test_a_drop_that_never_returns_is_reported_by_the_watchdog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cleanup of a passing example is a backend call too: a frozen server there (make test under
    # load, 216 s of redis-py's own 10 s timeouts) must end the run as the watchdog's outage.
    result, elapsed = _watched_store_run(drop_never_returns, tmp_path, monkeypatch)
    # The first drop the run makes hangs: the corrupt walk's own store, or a passing example's.
    assert result.error is not None and "drop" in result.error, result.error
    assert result.error.endswith("did not return within 1s (watchdog; RATCHET_WATCHDOG_S)"), result.error
    assert elapsed < 20
    assert not any(tmp_path.iterdir())


def test_the_drops_at_the_end_of_a_run_stop_at_the_first_that_never_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Counted as failed, never raised: the report comes first, the leftovers are `conformance clean`'s.
    monkeypatch.setenv("RATCHET_WATCHDOG_S", "0.2")
    membership = InMemoryMembership()
    cleanup = Namespaces()
    for name in ("a", "b", "c"):
        opened = Opened(drop_never_returns, (name, membership), _DropNeverReturns(name, membership))
        cleanup.failed([opened])
    started = time.perf_counter()
    cleanup.settle(keep_last=True)
    assert time.perf_counter() - started < 5
    assert (cleanup.dropped, cleanup.failed_drops, cleanup.kept) == (0, 2, ("c",))


def sleeps_forever(namespace: str) -> object:
    time.sleep(3600)
    return None  # pragma: no cover


def test_a_blocking_saga_factory_is_reported_by_the_watchdog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_WATCHDOG_S", "1")
    report = run_conformance(
        sleeps_forever, suites=("saga",), seed=SEED, failure_dir=tmp_path, database_dir=None
    )
    (result,) = report.results
    assert result.verdict is Verdict.ERROR
    assert result.error == "the saga backend factory did not return within 1s (watchdog; RATCHET_WATCHDOG_S)"
