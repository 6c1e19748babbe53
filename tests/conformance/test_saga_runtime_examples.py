"""The saga suite catches every shipped broken runtime (examples/broken_saga_runtimes.py: metrics that
lie, a control revision skipped, references never released) within the ci profile, names the rule it
broke, shrinks the program to a few steps, and its
failure file replays to the same violation, from Python and from ``conformance replay``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from conformance.cli import main
from examples.broken_saga_runtimes import BROKEN_SAGA_RUNTIMES
from tests._planted import PLANTED_SHRINK_S, planted_options

# Fixed seeds whose search and shrink take few examples.
SEEDS = {
    "retry_counted_twice": 1,
    "labels_by_tenant": 1,
    "stage_per_unit": 0,
    "pause_skips_a_revision": 1,
    "references_never_released": 1,
}

#: Where each is caught: the metrics and the rows read back at quiescence; the reference walk is
#: one rule of its own (``retire_spare``).
CAUGHT_AT = {"references_never_released": "step 1"}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    """Runs the saga suite on a broken runtime once per module; the tests read facets of that run."""
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            path = f"examples.broken_saga_runtimes:{factory}"
            backend = BackendUnderTest(factory, "saga", {"runtime": path})
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures)
            reports[factory] = run_matrix([(backend, suite_named("saga"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_SAGA_RUNTIMES.items()))
def test_broken_saga_runtime_is_caught_and_replays(
    factory: str, rule_id: str, run_broken: RunBroken, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
    at = CAUGHT_AT.get(factory, "quiescence")
    assert result.failure.at == at
    assert report.exit_code == 1

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.rule_id == rule_id
    assert saved.factories == {"runtime": f"examples.broken_saga_runtimes:{factory}"}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert main(["replay", str(path), "--trust", "examples.broken_saga_runtimes"]) == 1
    assert f"reproduced {rule_id} at {at}" in capsys.readouterr().out


def test_a_backend_whose_database_refuses_some_commits_passes() -> None:
    """The correct runtime on a database that refuses every third COMMIT (as contention does): it
    runs each refused unit again under the same fate, and the ledger counts every attempt it ran
    at the storage port, so no metric, outcome or row differs (S-OBS-02, S-OBS-03, S-TX-01)."""
    report = run_conformance(
        "examples.contended_saga_backend:contended",
        suites=("saga",),
        seed=6,
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.PASS, report.details()


def test_a_unit_the_database_refuses_on_every_attempt_is_settled_as_rolled_back() -> None:
    """A database that refuses three COMMITs in a row now and then: a unit meeting such a burst is
    refused on every attempt and the runtime answers RolledBack, which the model takes as the
    unit's fate (S-TX-01, decided in conformance/saga/_base.database_refused); every row read back
    must still be the model's."""
    report = run_conformance(
        "examples.contended_saga_backend:refused_in_bursts",
        suites=("saga",),
        seed=1,
        examples=30,
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is not Verdict.VIOLATION, report.details()
    assert "database-refused-every-attempt" in result.stats.reached, report.details()


def test_a_commit_that_applied_but_is_reported_refused_is_caught(tmp_path: Path) -> None:
    """The negative control of that allowance: a backend whose COMMIT applied and is reported as a
    definite rollback makes the runtime run the unit again on its own writes, and the rows (or
    the outcomes) show it: the allowance never hides a write."""
    report = run_conformance(
        "examples.contended_saga_backend:applied_then_refused",
        suites=("saga",),
        seed=1,
        examples=30,
        database_dir=None,
        failure_dir=tmp_path,
        shrink_budget_s=PLANTED_SHRINK_S,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.failure_file is not None
