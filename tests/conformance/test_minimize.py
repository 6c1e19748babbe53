"""The runner's last shrinking pass (``conformance._minimize``): blocks, then single steps, and a
replay that breaks at a step drops the steps after it; the result is 1-minimal."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from conformance import RunOptions, Verdict, _minimize, run_matrix
from conformance._failures import FailureFile
from conformance._machine import Step
from conformance._replay import ReplayResult
from conformance._suites import BackendUnderTest, suite_named
from conformance._violations import Violation
from tests.conformance.test_failure_file import sample

FAILURE = attrs.evolve(sample(), program=tuple(Step("step", {"n": n}) for n in range(40)))


def _needs(needed: set[int], at_step: bool, calls: list[int]) -> object:
    """A fake replay: the violation comes back when every needed step is still in the program,
    at the last needed one (``at_step``) or at quiescence."""

    def attempt(candidate: FailureFile) -> ReplayResult:
        calls.append(len(candidate.program))
        numbers = [int(str(s.args["n"])) for s in candidate.program]
        if not needed <= set(numbers):
            return ReplayResult(candidate, None, len(numbers) + 1)
        last = max(numbers.index(n) for n in needed) + 1
        return ReplayResult(candidate, Violation("C-POST-01", "again"), last if at_step else len(numbers) + 1)

    return attempt


@pytest.mark.parametrize("at_step", [True, False])
def test_a_long_program_loses_every_step_it_does_not_need(
    monkeypatch: pytest.MonkeyPatch, at_step: bool
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_minimize, "_attempt", _needs({7, 23}, at_step, calls))
    shrunk = _minimize.minimize(FAILURE)
    assert [s.args["n"] for s in shrunk.program] == [7, 23]
    assert shrunk.message == "again"
    # Blocks first: far fewer replays than one per step per round (40 + 2 at the least).
    assert len(calls) < 40, calls


def test_the_replay_budget_keeps_the_best_program_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_minimize, "_attempt", _needs({0, 1}, False, calls))
    shrunk = _minimize.minimize(FAILURE, max_replays=3)
    assert len(calls) == 3 + 1  # and one replay to confirm the shortest program kept
    assert {0, 1} <= {s.args["n"] for s in shrunk.program}
    assert len(shrunk.program) < 40


def test_a_violation_no_deletion_keeps_is_the_failure_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_minimize, "_attempt", _needs(set(range(40)), False, calls))
    assert _minimize.minimize(FAILURE) is FAILURE


def test_a_shrink_cut_short_is_still_the_violation_and_made_minimal(tmp_path: Path) -> None:
    """``shrink_budget_s`` stops Hypothesis mid-shrink (this seed's shrink runs hundreds of
    replays): the verdict is the violation found, the runner's pass shortens its program, and the
    run's time budget is not reported spent."""
    backend = BackendUnderTest(
        "x", "saga", {"backend": "examples.broken_saga_backends:outbox_outside_transaction"}
    )
    options = RunOptions(profile="ci", seed=2, failure_dir=tmp_path, database_dir=None, shrink_budget_s=0.05)
    (result,) = run_matrix([(backend, suite_named("saga"))], options).results
    assert result.verdict is Verdict.VIOLATION, result.error
    assert result.failure is not None and result.failure.rule_id == "S-ORCH-02"
    assert 1 <= len(result.failure.program) <= 6
    assert not result.budget_spent


def test_a_program_that_failed_only_once_is_not_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flaky violation: the two-step program breaks the rule on its first replay only; the
    program returned is the shortest that breaks it again."""
    calls: list[int] = []
    needs = _needs({7, 23}, False, calls)
    seen: set[tuple[object, ...]] = set()

    def flaky(candidate: FailureFile) -> ReplayResult:
        result = needs(candidate)
        numbers = tuple(s.args["n"] for s in candidate.program)
        if len(numbers) == 2 and numbers in seen:
            return ReplayResult(candidate, None, len(numbers) + 1)
        seen.add(numbers)
        return result

    monkeypatch.setattr(_minimize, "_attempt", flaky)
    shrunk = _minimize.minimize(FAILURE)
    assert len(shrunk.program) > 2 and {7, 23} <= {s.args["n"] for s in shrunk.program}
