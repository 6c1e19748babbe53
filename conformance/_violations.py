"""What a failed check raises: a contract violation that names the rule it broke.

A ``Violation`` is an ``AssertionError`` so Hypothesis treats it as a test failure and shrinks it.
Hypothesis reports one bug per run and may shrink to a smaller example that breaks another rule; the
program recorded is always the one that raised the violation reported.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


class Violation(AssertionError):
    """A backend (or runtime) broke contract rule ``rule_id``.

    ``context`` holds JSON values only (expected/actual renderings, the key, the step), so a
    failure file can carry it unchanged.
    """

    def __init__(self, rule_id: str, message: str, context: Mapping[str, JsonValue] | None = None):
        self.rule_id = rule_id
        self.message = message
        self.context: dict[str, JsonValue] = dict(context or {})
        super().__init__(f"{rule_id}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (Violation, (self.rule_id, self.message, self.context))


def rule_statement(rule_id: str) -> str | None:
    """The contract's statement of ``rule_id`` (``model.commit.RULES`` / ``model.saga.RULES``), if any."""
    from model.commit import RULES as COMMIT_RULES
    from model.saga import RULES as SAGA_RULES

    return COMMIT_RULES.get(rule_id) or SAGA_RULES.get(rule_id)


class HarnessEnvironmentError(Exception):
    """The run could not be carried out (service unreachable, bad factory): exit code 2, no verdict."""


def violation_in(exc: BaseException) -> Violation | None:
    if isinstance(exc, Violation):
        return exc
    if isinstance(exc, BaseExceptionGroup):  # a Flaky failure wraps what it saw
        for inner in exc.exceptions:
            found = violation_in(inner)
            if found is not None:
                return found
    return None


def environment_error_in(exc: BaseException) -> HarnessEnvironmentError | None:
    """The environment error behind ``exc``: itself, one a Flaky failure wraps, or the one that was
    being handled when Hypothesis raised its own error (``FlakyStrategyDefinition``, raised while
    it concluded an example that ended on it)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, HarnessEnvironmentError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                found = environment_error_in(inner)
                if found is not None:
                    return found
        following = exc.__cause__ or exc.__context__
        if following is None:
            return None
        exc = following
    return None


@attrs.frozen
class CoverageGap:
    """A ``sometimes`` target the run never reached (Stateright's sometimes property)."""

    target: str
    description: str
