"""The durability suite catches what only faults below the seam show (examples/durability_bugs.py),
names the rule, shrinks the program, and the failure file replays; the shipped Redis store passes on a
private durable server killed under it. Fixed seeds keep each run to seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import FailureFile, Report, Verdict, replay
from conformance._faults import FaultFilter
from conformance._runner import RunOptions, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from conformance.crash import LocalRedis
from impls.api import MembershipDirectory
from impls.redis import open_redis_outbox, open_redis_store
from tests._planted import PLANTED_SHRINK_S

SEED = 20_261_130
BUGS = "examples.durability_bugs"


def run(
    backend: BackendUnderTest, tmp_path: Path, examples: int | None = None, faults: tuple[str, ...] = ()
) -> Report:
    options = RunOptions(
        seed=SEED,
        examples=examples,
        failure_dir=tmp_path,
        database_dir=None,
        coverage_gate=examples is None and not faults,
        faults=FaultFilter.parse(faults),
        shrink_budget_s=PLANTED_SHRINK_S,
    )
    return run_matrix([(backend, suite_named("durability"))], options)


def caught(report: Report, rule_id: str) -> Path:
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
    path = result.failure.failure_file
    assert path is not None and path.exists()
    return Path(path)


def test_a_store_that_keeps_its_state_in_the_process_is_caught_by_reopen(tmp_path: Path) -> None:
    backend = BackendUnderTest(
        "in-process", "commit", {"store": f"{BUGS}:in_process_store", "outbox": "impls.memory:open_outbox"}
    )
    # Two clients catch it too (the second object sees nothing of the first: C-POST-01); this test
    # is about reopen, so that fault is left out.
    report = run(backend, tmp_path, faults=("-two-clients",))
    path = caught(report, "C-POST-08")
    saved = FailureFile.read(path)
    assert any(step.rule == "reopen" for step in saved.program)
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()


@pytest.mark.service("redis")  # the redis-server binary comes with it; the shared server is not used
def test_the_non_durable_redis_configuration_is_caught_by_server_crash(tmp_path: Path) -> None:
    backend = BackendUnderTest(
        "nondurable-redis",
        "commit",
        {
            "store": f"{BUGS}:nondurable_redis_store",
            "outbox": f"{BUGS}:nondurable_redis_outbox",
            "control": f"{BUGS}:nondurable_redis_control",
        },
    )
    # Two clients catch it too (the second object sees nothing of the first: C-POST-01); this test
    # is about reopen, so that fault is left out.
    report = run(backend, tmp_path, faults=("-two-clients",))
    path = caught(report, "C-POST-08")
    saved = FailureFile.read(path)
    assert any(step.rule == "server_crash" for step in saved.program)
    assert saved.factories["control"] == f"{BUGS}:nondurable_redis_control"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()


class CountedRedis(LocalRedis):
    """A durable private server whose control counts the harness's ``before_crash`` calls (the
    three-node ring's control waits there for its last victim, ``conformance/crash/_ring.py``)."""

    before_crashes = 0

    def before_crash(self) -> None:
        self.before_crashes += 1


_durable: CountedRedis | None = None


def durable_control() -> CountedRedis:
    global _durable
    if _durable is None:
        _durable = CountedRedis(durable=True)
        _durable.start()
    return _durable


async def durable_store(namespace: str, membership: MembershipDirectory) -> object:
    return await open_redis_store(namespace, membership, endpoint=durable_control().url)


async def durable_outbox(namespace: str) -> object:
    return await open_redis_outbox(namespace, endpoint=durable_control().url)


@pytest.mark.service("redis")
def test_the_redis_store_on_a_durable_server_survives_server_crash(tmp_path: Path) -> None:
    here = "tests.conformance.test_durability_examples"
    backend = BackendUnderTest(
        "durable-redis",
        "commit",
        {
            "store": f"{here}:durable_store",
            "outbox": f"{here}:durable_outbox",
            "control": f"{here}:durable_control",
        },
    )
    try:
        report = run(backend, tmp_path, examples=15)
    finally:
        if _durable is not None:
            _durable.stop()
    (result,) = report.results
    assert result.verdict is Verdict.PASS, report.details()
    assert result.stats.faults["server-crash"] > 0
    assert _durable is not None and _durable.before_crashes == result.stats.faults["server-crash"]
    assert "server-crash waits" in result.stats.details
