"""The saga suite catches every shipped broken saga backend (examples/broken_saga_backends.py)
within the ci profile, names the rule it broke, shrinks the program to a few steps, and its
failure file replays to the same violation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conformance import FailureFile, RunOptions, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_saga_backends import BROKEN_SAGA_BACKENDS

SEED = 20_240_601  # any seed works; a fixed one keeps the test's timing and program stable


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_SAGA_BACKENDS.items()))
def test_broken_saga_backend_is_caught_and_replays(factory: str, rule_id: str, tmp_path: Path) -> None:
    backend = BackendUnderTest(factory, "saga", {"backend": f"examples.broken_saga_backends:{factory}"})
    started = time.perf_counter()
    report = run_matrix(
        [(backend, suite_named("saga"))],
        RunOptions(profile="ci", seed=SEED, failure_dir=tmp_path, database_dir=None),
    )
    elapsed = time.perf_counter() - started
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 12, report.details()
    assert report.exit_code == 1
    print(f"{factory}: {rule_id} in {elapsed:.1f}s, {len(result.failure.program)} steps")

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.suite == "saga"
    assert saved.rule_id == rule_id
    assert saved.factories == {"backend": f"examples.broken_saga_backends:{factory}"}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert replayed.exit_code == 1


def test_the_correct_backend_does_not_reproduce(tmp_path: Path) -> None:
    """The same failure file replayed on the memory saga backend passes: the bug was the backend's."""
    backend = BackendUnderTest(
        "timer_ignores_fencing", "saga", {"backend": "examples.broken_saga_backends:timer_ignores_fencing"}
    )
    report = run_matrix(
        [(backend, suite_named("saga"))],
        RunOptions(profile="ci", seed=SEED, failure_dir=tmp_path, database_dir=None),
    )
    failure = report.results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file),
        overrides={"backend": "impls.saga.memory:open_memory_saga_backend"},
    )
    assert not result.reproduced, result.describe()
    assert result.exit_code == 0
