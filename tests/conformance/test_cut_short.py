"""An example cut short between steps is not judged at quiescence (conformance._machine).

Found on CI's pytest-sql: once the shrink budget of a planted bug ran out, the next example was
stopped before its first step, its quiescence checks still ran on the empty program and recorded
the failure that the run then reported, with an empty program no replay can run.
"""

from __future__ import annotations

import pytest

from conformance._machine import BudgetSpent, RecordedFailure, RunContext, Step, step
from conformance._suites import BackendUnderTest, suite_named
from conformance._violations import HarnessEnvironmentError, Violation

# Its quiescence alone breaks S-PART-03 (a zero-step example would be judged and recorded).
BROKEN = "examples.broken_saga_backends:gate_keyed_on_command_id"


def _machine() -> tuple[RunContext, object]:
    suite = suite_named("saga")
    backend = BackendUnderTest("gate", "saga", {"backend": BROKEN}, None)
    context = RunContext("saga", "gate", suite.make_target(backend))
    return context, context.machine_class(suite.machine())()


def test_a_fresh_example_stopped_before_its_first_step_records_nothing() -> None:
    context, machine = _machine()
    found = RecordedFailure([Step("first_start", {"key": 1})], Violation("S-PART-03", "found"), [])
    context.last_failure = found
    context.shrink_budget_s = 1.0
    context.deadline = context.hard_deadline = 0.0  # the shrink budget is spent
    with pytest.raises(BudgetSpent):
        machine.first_start(key=1)  # type: ignore[attr-defined]
    machine.teardown()  # type: ignore[attr-defined]
    assert context.shrink_stopped and context.last_failure is found


def test_the_same_example_finished_is_judged_at_quiescence() -> None:
    """The check the test above relies on: this machine's quiescence does break the rule."""
    context, machine = _machine()
    machine.first_start(key=1)  # type: ignore[attr-defined]
    with pytest.raises(Violation) as raised:
        machine.teardown()  # type: ignore[attr-defined]
    assert raised.value.rule_id == "S-PART-03"
    assert context.last_failure is not None and len(context.last_failure.program) == 1


def test_an_example_that_ran_no_step_is_not_judged_at_quiescence() -> None:
    """Hypothesis tears down an example it abandoned before its first draw; the planted
    stage_per_unit runtime then reported S-OBS-02 with an empty program, which replay refuses."""
    context, machine = _machine()
    machine.teardown()  # type: ignore[attr-defined]
    assert context.last_failure is None


def test_an_example_whose_step_stopped_part_way_is_not_judged_at_quiescence() -> None:
    """Found on ``examples.contended_saga_backend:refused_in_bursts`` at seed 6: a step that raised
    an environment error after moving the model (the harness's route row refused three times) was
    still judged at quiescence, and the Violation raised there replaced the environment error."""
    suite = suite_named("saga")
    backend = BackendUnderTest("gate", "saga", {"backend": BROKEN}, None)
    context = RunContext("saga", "gate", suite.make_target(backend))

    class Stopped(context.machine_class(suite.machine())):  # type: ignore[misc]
        @step
        def server_went_away(self) -> None:
            raise HarnessEnvironmentError("the server went away")

    machine = Stopped()
    with pytest.raises(HarnessEnvironmentError):
        machine.server_went_away()
    machine.teardown()  # its quiescence alone would break S-PART-03 (the test above)
    assert context.last_failure is None
