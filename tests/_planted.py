"""What the planted-bug tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance import FailureFile, Report, RunOptions, Verdict, replay
from conformance._suites import Suite

#: Seconds Hypothesis may shrink a planted bug's failure (``RunOptions.shrink_budget_s``); the
#: runner's replay pass then makes the program 1-minimal. Unbounded, Hypothesis replays for up to
#: five minutes, each replay a whole example on a real engine.
PLANTED_SHRINK_S = 20.0


def planted_options(seed: int, failures: Path, **more: Any) -> RunOptions:
    """The ci profile at ``seed``, failure files in ``failures``, no example database, shrinking
    bounded by ``PLANTED_SHRINK_S``; ``more`` overrides the rest (examples, steps...)."""
    return RunOptions(
        profile="ci",
        seed=seed,
        failure_dir=failures,
        database_dir=None,
        shrink_budget_s=PLANTED_SHRINK_S,
        **more,
    )


def caught_and_replayed(report: Report, rule_id: str) -> FailureFile:
    """Asserts a run of one planted bug: a violation of ``rule_id`` whose failure file replays to
    the same rule; returns the saved file for the test's own further checks."""
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    assert result.failure.failure_file is not None, report.details()
    saved = FailureFile.read(result.failure.failure_file)
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    return saved


def bare_suite(name: str, description: str, machine: type) -> Suite:
    """A commit-family suite around ``machine`` alone: no faults, no target, no coverage targets
    (a harness test's own machine, not a contract suite)."""
    return Suite(
        name=name,
        family="commit",
        description=description,
        fault_kinds=(),
        machine=lambda: machine,
        make_target=lambda backend: None,
        coverage_targets=lambda stats: {},
    )
