"""A last shrinking pass over a failure's program: drop every step the violation does not need.

Hypothesis shrinks within a budget of test calls (about ten per ``max_examples``), and a ``ci``
profile leaves it little room after generation: a shrunk program can keep a few steps that play no
part. Replay needs no Hypothesis, so after a run (or once ``RunOptions.shrink_budget_s`` ended
Hypothesis's shrinking) we delete blocks of steps, halving their size down to one step (last
first, the single steps repeated until nothing more can go), and keep each deletion whose replay
still breaks the same rule. The result is 1-minimal: removing any single remaining step loses the
violation. The program returned broke the rule again on one more replay (a flaky violation is
not shortened to a program that failed once).

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
    """The same failure with the fewest steps this pass finds; ``failure`` itself if none go.

    Blocks go first, halving in size down to single steps (so a long program loses most of its
    steps in a few replays, each a whole example on the backend), and a replay that breaks at a
    step drops everything after it. The last round, of single steps, repeats until none goes.
    """
    deadline = time.perf_counter() + budget_s
    program = list(failure.program)
    accepted: list[list[Step]] = []  # every shorter program kept, in order
    replays = 0

    def attempt(candidate: list[Step]) -> bool:
        nonlocal program, replays
        replays += 1
        result = _attempt(attrs.evolve(failure, program=tuple(candidate)))
        if result is None or not result.same_rule:
            return False
        # Broken at a step: the steps after it played no part.
        program = candidate[: result.steps_run] if result.steps_run <= len(candidate) else candidate
        accepted.append(program)
        return True

    def spent() -> bool:
        return replays >= max_replays or time.perf_counter() > deadline

    size = len(program) // 2
    while size >= 1 and not spent():
        changed = False
        index = len(program) - size
        while index >= 0 and len(program) > 1 and not spent():
            if attempt(program[:index] + program[index + size :]):
                changed = True
            index = min(index, len(program)) - size
        if size > 1:
            size //= 2
        elif not changed:
            break
    return _confirmed(failure, accepted)


#: Replays spent, past the budget, to confirm the shortest programs kept (see ``_confirmed``).
CONFIRMATIONS = 3


def _confirmed(failure: FailureFile, accepted: list[list[Step]]) -> FailureFile:
    """The shortest kept program that breaks the rule again on a fresh replay.

    A deletion is kept on one replay; a flaky violation (a crash that lost a write or did not)
    could so be shortened to a program that only failed once. Confirming costs one replay when
    the violation is deterministic; otherwise the next longer kept program is tried, and
    Hypothesis's own program stands when none breaks again.
    """
    for program in list(reversed(accepted))[:CONFIRMATIONS]:
        result = _attempt(attrs.evolve(failure, program=tuple(program)))
        if result is not None and result.same_rule:
            return _with(failure, program, result)
    return failure


def _attempt(candidate: FailureFile) -> ReplayResult | None:
    try:
        return replay(candidate)
    except HarnessEnvironmentError:
        raise
    except Exception:
        return None  # the shorter program does not make sense to the machine: keep the step


def _with(failure: FailureFile, program: list[Step], best: ReplayResult) -> FailureFile:
    if best.violation is None:
        return failure
    return attrs.evolve(
        failure,
        program=tuple(program),
        message=best.violation.message,
        context=dict(best.violation.context),
        trace=best.trace,
    )
