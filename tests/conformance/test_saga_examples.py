"""The saga suite catches every shipped broken saga backend (examples/broken_saga_backends.py)
within the ci profile, names the rule it broke, shrinks the program to a few steps, and its
failure file replays to the same violation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_saga_backends import BROKEN_SAGA_BACKENDS
from tests._planted import planted_options

# Any seed catches every bug; a fixed one keeps the test's timing and program stable, and each
# bug gets one whose search and shrink take few examples (the shrinker can spend hundreds).
SEEDS = {
    "gate_keyed_on_command_id": 20_240_601,
    "timer_ignores_fencing": 30,
    "outbox_outside_transaction": 27,
    "receipt_keyed_by_tenant": 1,
    "release_answers_unapplied": 1,
}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    """Runs the saga suite on a broken backend once per module; the tests read facets of that run."""
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            path = f"examples.broken_saga_backends:{factory}"
            backend = BackendUnderTest(factory, "saga", {"backend": path})
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures)
            reports[factory] = run_matrix([(backend, suite_named("saga"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_SAGA_BACKENDS.items()))
def test_broken_saga_backend_is_caught_and_replays(factory: str, rule_id: str, run_broken: RunBroken) -> None:
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 12, report.details()
    assert report.exit_code == 1
    print(f"{factory}: {rule_id} in {result.elapsed_s:.1f}s, {len(result.failure.program)} steps")

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.suite == "saga"
    assert saved.rule_id == rule_id
    assert saved.factories == {"backend": f"examples.broken_saga_backends:{factory}"}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert replayed.exit_code == 1


def test_the_correct_backend_does_not_reproduce(run_broken: RunBroken) -> None:
    """The same failure file replayed on the memory saga backend passes: the bug was the backend's."""
    failure = run_broken("timer_ignores_fencing").results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file),
        overrides={"backend": "impls.saga.memory:open_memory_saga_backend"},
    )
    assert not result.reproduced, result.describe()
    assert result.exit_code == 0
