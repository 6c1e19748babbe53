"""The orchestrator's transactions: a result arrives, a timeout timer fires.

A result is first *verified* against what the store already knows: the instance and
the command it answers exist (identity), the definition digest is the instance's frozen
one, the answering owner is the step's owner, and the transport principal is trusted
and is that owner (S-ORCH-01). Only then is its message id claimed in the inbox, so a
forged or misdirected message never occupies the key its genuine twin needs.

After the claim, inbox key, instance compare-and-swap (revision + 1), journal entry,
timer swap and next command land in one transaction (S-ORCH-02). A copy whose key was
already claimed is a ``DuplicateResult`` (S-ORCH-03); a verified result for an effect
the instance no longer waits on only claims its key (``StaleResult``, S-ORCH-04).
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from ._audit import ControlState
from ._catalog import is_loadable
from ._definition import DefinitionArtifact
from ._errors import MessageRefused, NoSuchTimer, RefusalReason, StaleFencingToken
from ._instance import AttemptTimedOut, JournalEntry, Reaction, StepAnswered, react
from ._messages import ResultEnvelope, result_message_id_for
from ._store import OrchestratorStore, settle_quota, stage_command
from ._timers import Timer, check_fence, remove_timer, timer_id_for
from ._transaction import OutcomeUnknown, RolledBack, settle
from ._values import CommitFate, DeliveryVerdict


@attrs.frozen
class ResultDelivery:
    """One delivery of a result; ``producer`` is the transport-authenticated principal."""

    envelope: ResultEnvelope
    producer: str
    now_ms: int
    commit: CommitFate = CommitFate.COMMITTED


@attrs.frozen
class ResultApplied:
    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.ACK

    saga_id: str
    entry: JournalEntry
    dispatched: str | None


@attrs.frozen
class DuplicateResult:
    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.ACK

    message_id: str


@attrs.frozen
class StaleResult:
    """Verified and claimed, but for an effect the instance no longer awaits."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.ACK

    message_id: str
    saga_id: str


@attrs.frozen
class ResultDeferred:
    """Verified, but its saga is paused: not claimed, to be redelivered after resume (S-MGT-05)."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.REDELIVER

    message_id: str
    saga_id: str


ResultOutcome: TypeAlias = (
    ResultApplied
    | DuplicateResult
    | StaleResult
    | ResultDeferred
    | MessageRefused
    | RolledBack
    | OutcomeUnknown
)


def verify_result(store: OrchestratorStore, delivery: ResultDelivery) -> RefusalReason | None:
    """Why ``delivery`` must not touch the inbox, or ``None`` (S-ORCH-01).

    Checked in this order: the instance and the answered command exist; definition
    digest; participant owner; producer trust; the rest of the message identity.
    """
    envelope = delivery.envelope
    instance = store.instances.get(envelope.saga_id)
    issued = store.outbox.get(envelope.command_id)
    if instance is None or issued is None or issued.command.saga_id != envelope.saga_id:
        return RefusalReason.IDENTITY_MISMATCH
    command = issued.command
    entry = store.catalog.entries.get(instance.definition)
    if (
        entry is None
        or envelope.definition_digest != instance.definition_digest
        or entry.digest != instance.definition_digest
    ):
        return RefusalReason.DIGEST_MISMATCH
    if envelope.owner != entry.artifact.steps[command.step_index].owner:
        return RefusalReason.OWNER_MISMATCH
    if delivery.producer not in store.trusted_producers or delivery.producer != envelope.owner:
        return RefusalReason.UNTRUSTED_PRODUCER
    if (
        envelope.effect_id != command.effect_id
        or envelope.step_index != command.step_index
        or envelope.phase is not command.phase
        or envelope.message_id != result_message_id_for(envelope.command_id)
    ):
        return RefusalReason.IDENTITY_MISMATCH
    return None


def _apply(
    store: OrchestratorStore, reaction: Reaction, artifact: DefinitionArtifact, now_ms: int
) -> OrchestratorStore:
    """Instance CAS, journal, timer swap and next command, written together (S-ORCH-02)."""
    instance = reaction.instance
    written = attrs.evolve(
        store,
        instances={**store.instances, instance.saga_id: instance},
        journal=(*store.journal, reaction.entry),
        timers=remove_timer(store.timers, timer_id_for(reaction.settled_command_id)),
    )
    written = settle_quota(written, store.instances[instance.saga_id], instance)
    command = reaction.dispatch
    if command is None:
        return written
    return stage_command(written, command, now_ms + artifact.steps[command.step_index].timeout_ms)


def handle_result(
    store: OrchestratorStore, delivery: ResultDelivery
) -> tuple[OrchestratorStore, ResultOutcome]:
    """The orchestrator transaction for one result (S-ORCH-01..04, S-STEP-*, S-TX-01).

    post: not isinstance(__return__[1], MessageRefused) or __return__[0] is store
    post: not isinstance(__return__[1], MessageRefused) or __return__[1].verdict is DeliveryVerdict.DEAD_LETTER
    """  # noqa: E501 - a CrossHair condition is one line
    envelope = delivery.envelope
    reason = verify_result(store, delivery)
    if reason is not None:
        return store, MessageRefused(envelope.message_id, reason)
    if envelope.message_id in store.inbox:
        return store, DuplicateResult(envelope.message_id)
    instance = store.instances[envelope.saga_id]
    if _paused(store, instance.saga_id):
        return store, ResultDeferred(envelope.message_id, instance.saga_id)
    entry = store.catalog.entries[instance.definition]
    claimed = attrs.evolve(store, inbox=store.inbox | {envelope.message_id})
    event = StepAnswered(envelope.phase, envelope.step_index, envelope.effect_id, envelope.kind)
    reaction = react(instance, entry.artifact, event)
    if not isinstance(reaction, Reaction) or not is_loadable(entry.lifecycle):
        stale = StaleResult(envelope.message_id, instance.saga_id)
        return settle(store, claimed, delivery.commit, stale)
    written = _apply(claimed, reaction, entry.artifact, delivery.now_ms)
    applied = ResultApplied(
        instance.saga_id, reaction.entry, None if reaction.dispatch is None else reaction.dispatch.command_id
    )
    return settle(store, written, delivery.commit, applied)


@attrs.frozen
class FireTimer:
    """A worker runs the timeout transition of a timer it claimed (S-TIMER-01, S-TIMER-05)."""

    timer_id: str
    token: int
    now_ms: int
    commit: CommitFate = CommitFate.COMMITTED


@attrs.frozen
class TimerFired:
    saga_id: str
    entry: JournalEntry
    dispatched: str | None


@attrs.frozen
class TimerObsolete:
    """The timer's command no longer matters; the timer is completed without a transition."""

    timer_id: str


@attrs.frozen
class TimerDeferred:
    """The fence held but the timer's saga is paused: nothing changes, the lease included (S-MGT-05)."""

    timer_id: str


FireOutcome: TypeAlias = (
    TimerFired | TimerObsolete | TimerDeferred | NoSuchTimer | StaleFencingToken | RolledBack | OutcomeUnknown
)


def _paused(store: OrchestratorStore, saga_id: str) -> bool:
    control = store.controls.get(saga_id)
    return control is not None and control.state is ControlState.PAUSED


def fire_timer(store: OrchestratorStore, request: FireTimer) -> tuple[OrchestratorStore, FireOutcome]:
    """Complete a claimed timer and make the timeout transition (S-TIMER-01, S-TIMER-02, S-TIMER-05).

    The fence is checked first: a stale token changes nothing at all. Timer completion,
    instance CAS, journal, next timer and next command are one transaction.

    post: not isinstance(__return__[1], StaleFencingToken) or __return__[0] is store
    """
    fenced = check_fence(store.timers, request.timer_id, request.token, request.now_ms)
    if not isinstance(fenced, Timer):
        return store, fenced
    if _paused(store, fenced.saga_id):
        return store, TimerDeferred(fenced.timer_id)
    completed = attrs.evolve(store, timers=remove_timer(store.timers, fenced.timer_id))
    instance = store.instances.get(fenced.saga_id)
    entry = None if instance is None else store.catalog.entries.get(instance.definition)
    if instance is None or entry is None or not is_loadable(entry.lifecycle):
        return settle(store, completed, request.commit, TimerObsolete(fenced.timer_id))
    reaction = react(instance, entry.artifact, AttemptTimedOut(fenced.command_id))
    if not isinstance(reaction, Reaction):
        return settle(store, completed, request.commit, TimerObsolete(fenced.timer_id))
    written = _apply(completed, reaction, entry.artifact, request.now_ms)
    fired = TimerFired(
        instance.saga_id, reaction.entry, None if reaction.dispatch is None else reaction.dispatch.command_id
    )
    return settle(store, written, request.commit, fired)
