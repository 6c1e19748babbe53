"""A last shrinking pass over a failure's program: drop every step the violation does not need.

Hypothesis shrinks within a budget of test calls (about ten per ``max_examples``), and a ``ci``
profile leaves it little room after generation: a shrunk program can keep a few steps that play no
part. Replay is cheap and needs no Hypothesis, so after a run we delete steps one at a time (last
first, repeating until nothing more can go) and keep each deletion whose replay still breaks the
same rule. The result is 1-minimal: removing any single remaining step loses the violation.

A deletion that makes the program meaningless to the machine (a later step needs the deleted one
and fails with something other than a ``Violation``) is simply not kept.
"""

from __future__ import annotations

import time

import attrs

from conformance._failures import FailureFile
from conformance._machine import Step
from conformance._replay import ReplayResult, replay
from conformance._violations import HarnessEnvironmentError


def minimize(failure: FailureFile, *, budget_s: float = 60.0, max_replays: int = 400) -> FailureFile:
    """The same failure with the fewest steps this pass finds; ``failure`` itself if none go."""
    deadline = time.perf_counter() + budget_s
    program = list(failure.program)
    best: ReplayResult | None = None
    replays = 0
    changed = True
    while changed and len(program) > 1:
        changed = False
        index = len(program) - 1
        while index >= 0 and len(program) > 1:
            if replays >= max_replays or time.perf_counter() > deadline:
                return _with(failure, program, best)
            candidate = attrs.evolve(failure, program=tuple(program[:index] + program[index + 1 :]))
            replays += 1
            result = _attempt(candidate)
            if result is not None and result.same_rule:
                del program[index]
                best = result
                changed = True
            index -= 1
    return _with(failure, program, best)


def _attempt(candidate: FailureFile) -> ReplayResult | None:
    try:
        return replay(candidate)
    except HarnessEnvironmentError:
        raise
    except Exception:
        return None  # the shorter program does not make sense to the machine: keep the step


def _with(failure: FailureFile, program: list[Step], best: ReplayResult | None) -> FailureFile:
    if best is None or best.violation is None:
        return failure
    return attrs.evolve(
        failure,
        program=tuple(program),
        message=best.violation.message,
        context=dict(best.violation.context),
        trace=best.trace,
    )
