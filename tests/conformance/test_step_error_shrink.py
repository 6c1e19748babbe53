"""An exception that is no violation gets the shrink budget a violation gets (conformance._machine).

Seen in a seed sweep: a harness ``KeyError`` in a step was shrunk by Hypothesis with no bound (the
shrink budget started only on a recorded Violation), and the run went on for twenty minutes before
it was stopped by hand. Counted in examples, not seconds: with a budget of zero no example starts
after the one that raised.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import ConformanceMachine, step
from conformance._report import Verdict
from conformance._runner import RunOptions, run_suite
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from tests._planted import bare_suite


class _Crashy(ConformanceMachine):
    """Raises ``raised`` on a large draw; counts the examples opened before the first raise."""

    raised: ClassVar[type[Exception]] = KeyError
    opened_at_first_raise: ClassVar[list[int]] = []

    @rule(n=st.integers(0, 1000))
    @step
    def poke(self, n: int) -> None:
        if n > 500:
            if not self.opened_at_first_raise:
                self.opened_at_first_raise.append(self.context.stats.examples)
            raise self.raised(f"drew {n}")


def _run(raised: type[Exception], shrink_budget_s: float | None) -> tuple[Any, int]:
    machine = type("Crashy", (_Crashy,), {"raised": raised, "opened_at_first_raise": []})
    suite = bare_suite("crashy", "a machine whose one rule raises", machine)
    backend = BackendUnderTest("crashy", "commit", {}, None)
    options = RunOptions(
        seed=1, examples=200, failure_dir=None, database_dir=None, shrink_budget_s=shrink_budget_s
    )
    result = run_suite(suite, backend, options)
    return result, machine.opened_at_first_raise[0]


def test_a_raw_exception_stops_the_run_once_the_shrink_budget_is_spent() -> None:
    result, opened = _run(KeyError, 0.0)
    assert result.verdict is Verdict.ERROR
    assert result.error is not None and result.error.startswith("the harness failed: KeyError")
    assert result.stats.examples == opened  # nothing was shrunk


def test_without_a_budget_hypothesis_shrinks_it() -> None:
    """What the test above relies on: this failure does give Hypothesis something to shrink."""
    result, opened = _run(KeyError, None)
    assert result.verdict is Verdict.ERROR and "KeyError" in (result.error or "")
    assert result.stats.examples > opened


def test_an_environment_error_stays_one_after_a_bounded_shrink() -> None:
    result, opened = _run(HarnessEnvironmentError, 0.0)
    assert result.verdict is Verdict.ERROR
    assert result.error is not None and result.error.startswith("drew ")  # the message as raised
    assert result.stats.examples == opened
