"""The harness catches every shipped broken store (examples/broken_stores.py) within the ci profile,
names the rule it broke, shrinks the program to a few steps, and its failure file replays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance
from examples.broken_stores import BROKEN_STORES
from tests._planted import PLANTED_SHRINK_S

SEED = 20_240_601  # any seed works; a fixed one keeps the test's timing and program stable

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    """Runs the store suite on a broken store once per module; the tests read facets of that run."""
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            reports[factory] = run_conformance(
                f"examples.broken_stores:{factory}",
                backend=factory,
                suites=("store",),
                profile="ci",
                seed=SEED,
                failure_dir=tmp_path_factory.mktemp(factory),
                database_dir=None,
                shrink_budget_s=PLANTED_SHRINK_S,
            )
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_STORES.items()))
def test_broken_store_is_caught_and_replays(factory: str, rule_id: str, run_broken: RunBroken) -> None:
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 10, report.details()
    assert report.exit_code == 1
    print(f"{factory}: {rule_id} in {result.elapsed_s:.1f}s, {len(result.failure.program)} steps")

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.rule_id == rule_id
    assert saved.factories["store"] == f"examples.broken_stores:{factory}"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert replayed.exit_code == 1


def test_a_hand_written_program_replays_without_hypothesis(tmp_path: Path) -> None:
    """The failure file's program is the whole truth: a file written by hand replays the same way."""
    program = [
        {"rule": "first_reserve", "args": {"key": "t1/alice/m1"}},
        {"rule": "reserve", "args": {"key": "t1/alice/m1", "variant": "mentions"}},
    ]
    failure = FailureFile.from_json(
        {
            "format": "ratchet-failure/1",
            "suite": "store",
            "backend": "conflict_replays_ack",
            "factories": {
                "store": "examples.broken_stores:conflict_replays_ack",
                "outbox": "impls.memory:open_outbox",
            },
            "rule_id": "C-PRE-03",
            "message": "written by hand",
            "program": program,
        }
    )
    result = replay(failure)
    assert result.same_rule, result.describe()
    assert result.steps_run == 2
    assert any("reserve(t1/alice/m1)" in line for line in result.trace)


def test_the_fixed_store_does_not_reproduce(run_broken: RunBroken) -> None:
    """Replaying against the correct store (--store override) reports 'did not reproduce', exit 0."""
    report = run_broken("repeat_consumes_sequence")
    path = report.results[0].failure.failure_file if report.results[0].failure else None
    assert path is not None
    result = replay(FailureFile.read(path), overrides={"store": "impls.memory:open_store"})
    assert not result.reproduced
    assert result.exit_code == 0
    assert result.describe().startswith("did not reproduce")


def test_uncertain_outcomes_are_settled_not_blamed() -> None:
    """A correct store whose writes sometimes end OUTCOME_UNKNOWN or UNAVAILABLE passes both suites."""
    report = run_conformance(
        "examples.uncertain_store:uncertain_store",
        backend="uncertain",
        suites=("store", "commit"),
        seed=SEED,
        database_dir=None,
        failure_dir=None,
    )
    assert report.ok, report.details()
    for result in report.results:
        assert "settled-uncertain" in result.stats.reached
