"""Saga instances: statuses, legal transitions (as tables) and the step policy.

``plan(...)`` is the whole step-outcome policy on plain values (statuses, step statuses,
attempt counters, budgets); CrossHair checks it against ``plan_is_sound``. ``react``
wraps it for an instance: it matches the event to the awaited command, then returns the
next instance, the journal entry recording the move and the next command to dispatch,
or ``IllegalTransition`` (nothing changes). The orchestrator transactions around it add
the inbox claim, timers and outbox.

Forward: a success advances (the last one completes); a rejection compensates the
completed steps in reverse order; an effect that cannot be confirmed (an ``UNKNOWN``
answer, or timeouts after the step's attempt budget) goes to resolution or manual
intervention per the step's policy, never to compensation (S-STEP-01..05).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TypeAlias

import attrs

from ._definition import DefinitionArtifact
from ._errors import IllegalTransition
from ._keys import SagaStatus
from ._messages import CommandEnvelope, command_id_for, effect_id_for
from ._values import DefinitionKey, Phase, ResultKind, SagaPayload, UncertainPolicy

#: The only statuses an instance can end in: nothing moves it again (S-STEP-07).
TERMINAL_STATUSES: frozenset[SagaStatus] = frozenset(
    {SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.MANUALLY_CLOSED}
)

#: Statuses that await no command and take no automatic transition (S-STEP-07): the terminal
#: ones and manual intervention, which only management actions leave (S-MGT-06..08).
SETTLED_STATUSES: frozenset[SagaStatus] = TERMINAL_STATUSES | {SagaStatus.AWAITING_MANUAL_INTERVENTION}

#: The statuses automatic transitions (results, timeouts) can end in (S-STEP-07).
AUTOMATIC_ENDS: frozenset[SagaStatus] = frozenset(
    {SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.AWAITING_MANUAL_INTERVENTION}
)

#: Legal journal transitions; ``None`` is "no instance yet" (S-STEP-08).
SAGA_TRANSITIONS: Mapping[SagaStatus | None, frozenset[SagaStatus]] = {
    None: frozenset({SagaStatus.RUNNING}),
    SagaStatus.RUNNING: frozenset(
        {SagaStatus.RUNNING, SagaStatus.RESOLVING, SagaStatus.COMPENSATING} | AUTOMATIC_ENDS
    ),
    SagaStatus.RESOLVING: frozenset(
        {SagaStatus.RESOLVING, SagaStatus.RUNNING, SagaStatus.COMPENSATING} | AUTOMATIC_ENDS
    ),
    SagaStatus.COMPENSATING: frozenset(
        {
            SagaStatus.COMPENSATING,
            SagaStatus.COMPENSATED,
            SagaStatus.AWAITING_MANUAL_INTERVENTION,
        }
    ),
    SagaStatus.COMPLETED: frozenset(),
    SagaStatus.COMPENSATED: frozenset(),
    # Only management leaves it (S-MGT-06..08): a new resolve poll, a compensation retry, a close.
    SagaStatus.AWAITING_MANUAL_INTERVENTION: frozenset(
        {SagaStatus.RESOLVING, SagaStatus.COMPENSATING, SagaStatus.MANUALLY_CLOSED}
    ),
    SagaStatus.MANUALLY_CLOSED: frozenset(),
}


class StepStatus(enum.Enum):
    PENDING = "pending"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_UNCONFIRMED = "compensation_unconfirmed"


#: Legal step status changes (S-STEP-08).
STEP_TRANSITIONS: Mapping[StepStatus, frozenset[StepStatus]] = {
    StepStatus.PENDING: frozenset({StepStatus.EXECUTING}),
    StepStatus.EXECUTING: frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.UNCERTAIN}),
    StepStatus.UNCERTAIN: frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED}),
    StepStatus.SUCCEEDED: frozenset({StepStatus.COMPENSATING}),
    StepStatus.COMPENSATING: frozenset({StepStatus.COMPENSATED, StepStatus.COMPENSATION_UNCONFIRMED}),
    StepStatus.FAILED: frozenset(),
    StepStatus.COMPENSATED: frozenset(),
    # A compensation retried by management (S-MGT-07).
    StepStatus.COMPENSATION_UNCONFIRMED: frozenset({StepStatus.COMPENSATING}),
}


def saga_transition_legal(before: SagaStatus | None, after: SagaStatus) -> bool:
    """Whether ``before -> after`` may appear in a journal (S-STEP-08).

    post: __return__ == (after in SAGA_TRANSITIONS[before])
    post: not (__return__ and before in TERMINAL_STATUSES)
    """
    return after in SAGA_TRANSITIONS[before]


def step_transition_legal(before: StepStatus, after: StepStatus) -> bool:
    """Whether a step may change from ``before`` to ``after`` (S-STEP-08).

    post: not (__return__ and before is StepStatus.FAILED)
    """
    return after in STEP_TRANSITIONS[before]


class Cause(enum.Enum):
    """Why a journal entry was written."""

    STARTED = "started"
    SUCCEEDED = "succeeded"
    REJECTED = "rejected"
    UNKNOWN = "unknown"
    TIMED_OUT = "timed_out"
    #: A management action (S-MGT-06..08).
    MANAGED = "managed"


@attrs.frozen
class JournalEntry:
    """One committed instance transition; ``revision`` numbers them from 1."""

    saga_id: str
    revision: int
    before: SagaStatus | None
    after: SagaStatus
    step_index: int
    phase: Phase
    cause: Cause
    dispatched: str | None


@attrs.frozen
class Awaiting:
    """The command an active instance waits on (the latest attempt of one effect)."""

    phase: Phase
    step_index: int
    attempt: int
    effect_id: str
    command_id: str


@attrs.frozen
class SagaInstance:
    """One saga; ``definition``/``definition_digest`` are frozen at start (S-CAT-06)."""

    saga_id: str
    definition: DefinitionKey
    definition_digest: str
    start_digest: str
    business_key: str
    status: SagaStatus
    steps: tuple[StepStatus, ...]
    awaiting: Awaiting | None
    revision: int
    #: The first step's input; ``None`` for a start without one (S-START-10).
    first_payload: SagaPayload | None


@attrs.frozen
class StepAnswered:
    """An authenticated result for an effect of this instance."""

    phase: Phase
    step_index: int
    effect_id: str
    kind: ResultKind


@attrs.frozen
class AttemptTimedOut:
    """The timeout timer of ``command_id`` fired under a valid fence."""

    command_id: str


Event: TypeAlias = StepAnswered | AttemptTimedOut


@attrs.frozen
class Reaction:
    """The planned transition; applied atomically by the orchestrator transaction."""

    instance: SagaInstance
    entry: JournalEntry
    dispatch: CommandEnvelope | None
    #: The command that no longer needs its timeout timer.
    settled_command_id: str


def make_command(
    instance: SagaInstance, artifact: DefinitionArtifact, phase: Phase, step_index: int, attempt: int
) -> CommandEnvelope:
    """The envelope for one attempt of one effect (S-ID-01, S-ID-02, S-START-12)."""
    step = artifact.steps[step_index]
    effect = effect_id_for(instance.saga_id, step_index, phase)
    target = effect_id_for(instance.saga_id, step_index, Phase.EXECUTE) if phase is Phase.RESOLVE else None
    carries_payload = phase is Phase.EXECUTE and step_index == 0
    return CommandEnvelope(
        command_id=command_id_for(effect, attempt),
        effect_id=effect,
        target_effect_id=target,
        saga_id=instance.saga_id,
        definition=instance.definition,
        definition_digest=instance.definition_digest,
        step_index=step_index,
        step_name=step.name,
        owner=step.owner,
        phase=phase,
        attempt=attempt,
        payload=instance.first_payload if carries_payload else None,
    )


def begin(
    saga_id: str,
    artifact: DefinitionArtifact,
    definition_digest: str,
    start_digest: str,
    business_key: str,
    payload: SagaPayload | None,
) -> tuple[SagaInstance, JournalEntry, CommandEnvelope]:
    """A new instance: running, first step executing, its first command (S-START-03)."""
    steps = (StepStatus.EXECUTING,) + (StepStatus.PENDING,) * (len(artifact.steps) - 1)
    draft = SagaInstance(
        saga_id=saga_id,
        definition=artifact.key,
        definition_digest=definition_digest,
        start_digest=start_digest,
        business_key=business_key,
        status=SagaStatus.RUNNING,
        steps=steps,
        awaiting=None,
        revision=1,
        first_payload=payload,
    )
    command = make_command(draft, artifact, Phase.EXECUTE, 0, 1)
    instance = attrs.evolve(draft, awaiting=_awaiting_for(command))
    entry = JournalEntry(
        saga_id, 1, None, SagaStatus.RUNNING, 0, Phase.EXECUTE, Cause.STARTED, command.command_id
    )
    return instance, entry, command


def _awaiting_for(command: CommandEnvelope) -> Awaiting:
    return Awaiting(command.phase, command.step_index, command.attempt, command.effect_id, command.command_id)


@attrs.frozen
class Plan:
    """The outcome of the step policy: next status, step statuses and next command."""

    status: SagaStatus
    steps: tuple[StepStatus, ...]
    #: (phase, step index, attempt) of the next command, if any
    next_command: tuple[Phase, int, int] | None


def _with(steps: tuple[StepStatus, ...], index: int, status: StepStatus) -> tuple[StepStatus, ...]:
    return (*steps[:index], status, *steps[index + 1 :])


#: The saga status that goes with each awaited phase.
PHASE_STATUS: Mapping[Phase, SagaStatus] = {
    Phase.EXECUTE: SagaStatus.RUNNING,
    Phase.RESOLVE: SagaStatus.RESOLVING,
    Phase.COMPENSATE: SagaStatus.COMPENSATING,
}

_UNDONE = frozenset({StepStatus.COMPENSATED, StepStatus.FAILED, StepStatus.PENDING})


def awaiting_shape(status: SagaStatus, steps: tuple[StepStatus, ...], phase: Phase, index: int) -> bool:
    """The step statuses an instance has while awaiting ``phase`` of step ``index``.

    Before the awaited step every step succeeded. Forward (execute/resolve): the awaited
    step is executing/uncertain and every later one pending. Compensating: the awaited
    step is compensating and every later one is compensated, failed or pending. This is
    the inductive invariant ``plan`` preserves.
    """
    if not 0 <= index < len(steps) or PHASE_STATUS[phase] is not status:
        return False
    if steps[:index] != (StepStatus.SUCCEEDED,) * index:
        return False
    after = steps[index + 1 :]
    if phase is Phase.COMPENSATE:
        return steps[index] is StepStatus.COMPENSATING and all(s in _UNDONE for s in after)
    current = StepStatus.EXECUTING if phase is Phase.EXECUTE else StepStatus.UNCERTAIN
    return steps[index] is current and after == (StepStatus.PENDING,) * len(after)


def ended_shape(status: SagaStatus, steps: tuple[StepStatus, ...]) -> bool:
    """What the settled statuses promise about the steps (S-STEP-02, S-STEP-07)."""
    if status is SagaStatus.COMPLETED:
        return all(s is StepStatus.SUCCEEDED for s in steps)
    if status is SagaStatus.COMPENSATED:
        return all(s in _UNDONE for s in steps)
    return status is SagaStatus.AWAITING_MANUAL_INTERVENTION


def plan_is_sound(
    status: SagaStatus, steps: tuple[StepStatus, ...], phase: Phase, signal: ResultKind | None, result: Plan
) -> bool:
    """Legal moves, and an unconfirmed effect never goes straight to compensation."""
    nxt = result.next_command
    changed = all(a is b or step_transition_legal(a, b) for a, b in zip(steps, result.steps, strict=True))
    shaped = (
        ended_shape(result.status, result.steps)
        if nxt is None
        else awaiting_shape(result.status, result.steps, nxt[0], nxt[1]) and nxt[2] >= 1
    )
    unconfirmed = phase is not Phase.COMPENSATE and signal in (None, ResultKind.UNKNOWN)
    compensating = result.status in (SagaStatus.COMPENSATING, SagaStatus.COMPENSATED)
    return (
        saga_transition_legal(status, result.status)
        and changed
        and shaped
        and (nxt is None) == (result.status in SETTLED_STATUSES)
        and not (unconfirmed and compensating)
    )


def _compensate_from(steps: tuple[StepStatus, ...], index: int) -> Plan:
    """Compensate the highest succeeded step at or below ``index`` (S-STEP-02)."""
    for k in range(index, -1, -1):
        if steps[k] is StepStatus.SUCCEEDED:
            return Plan(
                SagaStatus.COMPENSATING, _with(steps, k, StepStatus.COMPENSATING), (Phase.COMPENSATE, k, 1)
            )
    return Plan(SagaStatus.COMPENSATED, steps, None)


def plan(
    status: SagaStatus,
    steps: tuple[StepStatus, ...],
    phase: Phase,
    index: int,
    attempt: int,
    signal: ResultKind | None,
    policy: UncertainPolicy,
    max_attempts: int,
    resolve_budget: int,
) -> Plan:
    """The step policy: what an answer (``signal``) or a timeout (``None``) leads to.

    Forward (S-STEP-01..05): a success advances (the last one completes); a rejection
    compensates the completed steps in reverse order; a timeout re-dispatches the same
    effect while ``attempt < max_attempts``; an ``UNKNOWN`` answer, an exhausted attempt
    budget or a resolve poll without verdict goes to resolution (``resolve_budget`` polls)
    or manual intervention per ``policy``, never to compensation. Compensation
    (S-STEP-02, S-STEP-06): success moves to the next lower completed step; a timeout
    retries within ``max_attempts``; anything else awaits manual intervention.

    pre: len(steps) <= 4
    pre: awaiting_shape(status, steps, phase, index)
    pre: attempt >= 1 and max_attempts >= 1 and resolve_budget >= 1
    pre: phase is not Phase.RESOLVE or policy is UncertainPolicy.RESOLVE
    post: plan_is_sound(status, steps, phase, signal, __return__)
    """
    # crosshair: per_condition_timeout=12
    # (the shaped precondition takes the solver several seconds to satisfy at all)
    if phase is Phase.COMPENSATE:
        if signal is ResultKind.SUCCEEDED:
            return _compensate_from(_with(steps, index, StepStatus.COMPENSATED), index - 1)
        if signal is None and attempt < max_attempts:
            return Plan(status, steps, (Phase.COMPENSATE, index, attempt + 1))
        return Plan(
            SagaStatus.AWAITING_MANUAL_INTERVENTION,
            _with(steps, index, StepStatus.COMPENSATION_UNCONFIRMED),
            None,
        )
    if signal is ResultKind.SUCCEEDED:
        done = _with(steps, index, StepStatus.SUCCEEDED)
        if index + 1 < len(steps):
            return Plan(
                SagaStatus.RUNNING,
                _with(done, index + 1, StepStatus.EXECUTING),
                (Phase.EXECUTE, index + 1, 1),
            )
        return Plan(SagaStatus.COMPLETED, done, None)
    if signal is ResultKind.REJECTED:
        return _compensate_from(_with(steps, index, StepStatus.FAILED), index - 1)
    if signal is None and phase is Phase.EXECUTE and attempt < max_attempts:
        # A timeout is not a failure: re-dispatch the same effect (the gate dedupes it).
        return Plan(status, steps, (Phase.EXECUTE, index, attempt + 1))
    # Unconfirmed: the effect may have happened, so compensation is not an option here.
    uncertain = _with(steps, index, StepStatus.UNCERTAIN)
    if policy is UncertainPolicy.MANUAL_INTERVENTION:
        return Plan(SagaStatus.AWAITING_MANUAL_INTERVENTION, uncertain, None)
    if phase is Phase.EXECUTE:
        return Plan(SagaStatus.RESOLVING, uncertain, (Phase.RESOLVE, index, 1))
    if attempt < resolve_budget:
        return Plan(SagaStatus.RESOLVING, uncertain, (Phase.RESOLVE, index, attempt + 1))
    return Plan(SagaStatus.AWAITING_MANUAL_INTERVENTION, uncertain, None)


_CAUSE = {
    ResultKind.SUCCEEDED: Cause.SUCCEEDED,
    ResultKind.REJECTED: Cause.REJECTED,
    ResultKind.UNKNOWN: Cause.UNKNOWN,
}


def react(instance: SagaInstance, artifact: DefinitionArtifact, event: Event) -> Reaction | IllegalTransition:
    """The transition an instance makes on ``event`` (S-STEP-01..08, S-ORCH-04).

    Only an answer for the awaited effect (any attempt of it) or the timeout of the
    awaited command moves an instance; anything else, and anything on a terminal
    instance, is ``IllegalTransition``. The policy itself is ``plan`` (checked by
    CrossHair); ``reaction_is_sound`` is what the model tests check of every reaction.
    """
    awaiting = instance.awaiting
    if awaiting is None or instance.status in SETTLED_STATUSES:
        return IllegalTransition(instance.saga_id, instance.status, repr(event))
    signal: ResultKind | None
    if isinstance(event, StepAnswered):
        expected = (awaiting.phase, awaiting.step_index, awaiting.effect_id)
        if (event.phase, event.step_index, event.effect_id) != expected:
            return IllegalTransition(instance.saga_id, instance.status, repr(event))
        signal = event.kind
        cause = _CAUSE[event.kind]
    else:
        if event.command_id != awaiting.command_id:
            return IllegalTransition(instance.saga_id, instance.status, repr(event))
        signal = None
        cause = Cause.TIMED_OUT
    step = artifact.steps[awaiting.step_index]
    planned = plan(
        instance.status,
        instance.steps,
        awaiting.phase,
        awaiting.step_index,
        awaiting.attempt,
        signal,
        step.uncertain_policy,
        step.max_attempts,
        step.resolve_budget,
    )
    draft = attrs.evolve(instance, status=planned.status, steps=planned.steps, revision=instance.revision + 1)
    command = None
    if planned.next_command is not None:
        phase, index, attempt = planned.next_command
        command = make_command(draft, artifact, phase, index, attempt)
    nxt = attrs.evolve(draft, awaiting=None if command is None else _awaiting_for(command))
    entry = JournalEntry(
        instance.saga_id,
        nxt.revision,
        instance.status,
        nxt.status,
        awaiting.step_index,
        awaiting.phase,
        cause,
        None if command is None else command.command_id,
    )
    return Reaction(nxt, entry, command, awaiting.command_id)


def reaction_is_sound(before: SagaInstance, result: Reaction | IllegalTransition) -> bool:
    """What every reaction guarantees: one revision forward, a legal move, and a next
    command exactly when the instance is not terminal (S-STEP-07, S-STEP-08)."""
    if isinstance(result, IllegalTransition):
        return True
    after = result.instance
    changed = all(
        a is b or step_transition_legal(a, b) for a, b in zip(before.steps, after.steps, strict=True)
    )
    return (
        after.revision == before.revision + 1
        and saga_transition_legal(before.status, after.status)
        and (result.dispatch is None) == (after.status in SETTLED_STATUSES)
        and (after.awaiting is None) == (result.dispatch is None)
        and changed
    )


def journal_violations(entries: Sequence[JournalEntry]) -> tuple[str, ...]:
    """Why one instance's journal is not a legal history; empty when it is (S-STEP-08).

    Legal: revisions 1, 2, ... in order; each entry starts where the previous ended (the
    first from "no instance"); each move is in ``SAGA_TRANSITIONS``.
    """
    problems: list[str] = []
    before: SagaStatus | None = None
    for position, entry in enumerate(entries, start=1):
        if entry.revision != position:
            problems.append(f"entry {position} has revision {entry.revision}")
        if entry.before is not before:
            problems.append(f"entry {position} starts at {entry.before}, previous ended at {before}")
        if not saga_transition_legal(entry.before, entry.after):
            problems.append(f"entry {position}: {entry.before} -> {entry.after} is not legal")
        before = entry.after
    return tuple(problems)
