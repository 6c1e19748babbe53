"""Replay: run a failure file's program again, step by step, with nothing drawn by Hypothesis.

The machine is built exactly as a run builds it (same suite, same backend factories, same fault
filter), then each recorded step calls the rule method with its recorded arguments; the machine's
own after-step checks and quiescence checks run as they did. Hypothesis chooses nothing, so the
result does not depend on the Hypothesis version, only on the harness and the backend.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from conformance._failures import FailureFile
from conformance._faults import FaultFilter
from conformance._machine import ConformanceMachine, RunContext, step_names
from conformance._suites import FAMILIES, BackendUnderTest, suite_named
from conformance._violations import HarnessEnvironmentError, Violation


@attrs.frozen
class ReplayResult:
    failure: FailureFile
    violation: Violation | None  # what the replay raised, if anything
    steps_run: int
    trace: tuple[str, ...] = ()  # what the backend was asked in the failing step
    kept: tuple[str, ...] = ()  # namespaces left on the backend (``keep_namespace``)

    @property
    def reproduced(self) -> bool:
        return self.violation is not None

    @property
    def same_rule(self) -> bool:
        return self.violation is not None and self.violation.rule_id == self.failure.rule_id

    @property
    def exit_code(self) -> int:
        """1 when the violation is still there (the bug reproduces), 0 when it did not reproduce."""
        return 1 if self.reproduced else 0

    def describe(self) -> str:
        total = len(self.failure.program)
        if self.violation is None:
            return f"did not reproduce: all {total} steps and the quiescence checks passed"
        where = f"at step {self.steps_run} of {total}" if self.steps_run <= total else "at quiescence"
        if self.same_rule:
            return f"reproduced {self.violation.rule_id} {where}: {self.violation.message}"
        return (
            f"reproduced a different violation {where}: {self.violation.rule_id}: {self.violation.message} "
            f"(the file recorded {self.failure.rule_id})"
        )


def backend_for(failure: FailureFile, overrides: Mapping[str, str] | None = None) -> BackendUnderTest:
    """The backend the file names, with factory paths from the file unless overridden."""
    suite = suite_named(failure.suite)
    factories: dict[str, str] = dict(failure.factories)
    factories.update(overrides or {})
    service = failure.service
    in_process = False
    family = FAMILIES.get(suite.family)
    if family is not None:
        named = family.backends().get(failure.backend)
        if named is not None:
            service = service if service is not None else named.service
            in_process = named.in_process
    for role, path in factories.items():
        if path.startswith("<"):
            flag = family.flag if family is not None and role == family.primary_role else f"--{role}"
            raise ValueError(f"the {role} factory of this failure is not importable ({path}); pass {flag}")
    return BackendUnderTest(failure.backend, suite.family, factories, service, in_process)


def untrusted_factories(
    failure: FailureFile, overrides: Mapping[str, str] | None = None, trust: Collection[str] = ()
) -> list[str]:
    """The factory paths of ``failure`` replay would import without the reader's say-so.

    A failure file is data someone may attach to a bug report; importing a module it names runs
    that module's code. Trusted are: the factories of the family's registered backends, the ones
    the user gives (``overrides``: ``--store`` / ``--outbox``), and any factory of a module (or the
    exact ``module:factory``) in ``trust`` (``--trust``)."""
    from conformance._suites import FAMILIES

    suite = suite_named(failure.suite)
    family = FAMILIES.get(suite.family)
    registered = family.registered_paths() if family is not None else {}
    given = dict(overrides or {})
    refused = []
    for role, path in sorted(failure.factories.items()):
        if role in given or path in registered.get(role, frozenset()):
            continue
        if path in trust or path.partition(":")[0] in trust:
            continue
        refused.append(f"{role}={path}")
    return refused


def replay(
    failure: FailureFile,
    *,
    overrides: Mapping[str, str] | None = None,
    on_step: Callable[[int, str], None] | None = None,
    keep_namespace: bool = False,
) -> ReplayResult:
    """Re-run ``failure.program``. Raises ``ValueError`` for an unusable file or factory path or a
    program this harness cannot run (an empty one, an unknown rule, arguments a rule does not take
    or cannot use), ``HarnessEnvironmentError`` when the backend cannot be opened. It imports the
    factories the file names: check ``untrusted_factories`` first for a file from elsewhere."""
    if not failure.program:
        raise ValueError("the failure file's program is empty: there is nothing to replay")
    suite = suite_named(failure.suite)
    backend = backend_for(failure, overrides)
    target = suite.make_target(backend)
    faults = FaultFilter.parse(failure.faults.split(","))
    context = RunContext(suite.name, backend.name, target, faults, profile=failure.profile)
    machine_class = context.machine_class(suite.machine())
    rules = set(step_names(machine_class))
    unknown = sorted({s.rule for s in failure.program} - rules)
    if unknown:
        raise ValueError(f"the program uses rules this harness does not have: {', '.join(unknown)}")
    for number, step in enumerate(failure.program, 1):
        try:
            inspect.signature(getattr(machine_class, step.rule)).bind(None, **step.args)
        except TypeError as exc:
            raise ValueError(f"step {number}, {step.render()}: {exc}") from None
    machine: ConformanceMachine = machine_class()
    steps_run = 0
    violation: Violation | None = None
    try:
        for step in failure.program:
            steps_run += 1
            if on_step is not None:
                on_step(steps_run, step.render())
            method: Any = getattr(machine, step.rule)
            try:
                method(**step.args)
            except (Violation, HarnessEnvironmentError):
                raise
            except Exception as exc:
                # The rules only ever receive values their strategies draw; anything else is an
                # edited or foreign file, not a verdict on the backend.
                raise ValueError(
                    f"step {steps_run}, {step.render()}, is not a step this harness can run: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        steps_run += 1  # quiescence
    except Violation as found:
        violation = found
    finally:
        try:
            machine.teardown()
        except Violation as found:
            violation = violation or found
    trace = tuple(context.last_failure.trace) if context.last_failure is not None else ()
    # A reproduced violation's namespace is kept only when asked (the CLI, to inspect the server).
    context.cleanup.settle(keep_last=keep_namespace)
    return ReplayResult(failure, violation, steps_run, trace, context.cleanup.kept)
