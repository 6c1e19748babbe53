"""A participant's transaction on one command: inbox, gate, business fact, result outbox.

Before anything is claimed the command is verified: trusted producer, addressed to
this participant, a step it serves under the same definition digest, derived
identities, and the declared payload contract for first-step input (S-PART-05).

Then, in one local transaction (S-PART-01): claim the inbox by ``command_id`` (a copy
of the same delivery is absorbed, S-PART-02); consult the gate by ``effect_id`` (another
attempt at an effect already decided is answered from the gate and never re-executed,
S-PART-03); record the business fact (an applied effect is appended to ``effects``
exactly once); write the result to the outbox.

A business ``TRANSIENT_FAILURE`` or a transaction that rolled back is not acknowledged;
failures per ``command_id`` are bounded by ``transient_failure_budget``, after which the
command is dead-lettered and the orchestrator's timeout takes over (S-PART-04). The dead
letter is durable (the seed's "耐久 DLT"), recorded in the inbox by a participant transaction
of its own: a later copy is a duplicate (S-PART-02). The failure count is the consumer's, as a
broker's redelivery count: a restarted participant counts afresh (``restart_participant``). A COMMIT
with unknown outcome is neither acknowledged nor counted as a transient failure: the
redelivery meets the inbox and gate, which know what happened (S-STEP-05, S-TX-02).

A resolve command polls the *target* effect: a decided gate record answers directly; an
``UNKNOWN`` record asks the outside world (the delivery's decision); no record at all
means the effect never ran here, and the gate is fenced as ``REJECTED`` so a late copy
of the execute command can no longer run it (S-PART-06).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar, TypeAlias

import attrs

from ._errors import MessageRefused, RefusalReason
from ._messages import CommandEnvelope, ResultEnvelope, answer, command_identity_holds
from ._transaction import OutcomeUnknown, RolledBack, settle
from ._values import (
    CommitFate,
    DefinitionKey,
    DeliveryVerdict,
    PayloadContract,
    Phase,
    ResultKind,
    is_json_document,
    is_json_media_type,
    name_validator,
)


class Decision(enum.Enum):
    """What the participant's business code (or, for resolve, the outside world) says."""

    SUCCEED = "succeed"
    REJECT = "reject"
    UNKNOWN = "unknown"
    TRANSIENT_FAILURE = "transient_failure"


_KIND = {
    Decision.SUCCEED: ResultKind.SUCCEEDED,
    Decision.REJECT: ResultKind.REJECTED,
    Decision.UNKNOWN: ResultKind.UNKNOWN,
}


@attrs.frozen
class StepBinding:
    """A step this participant serves; ``input_contract`` only for the first step."""

    definition: DefinitionKey
    definition_digest: str
    step_index: int
    input_contract: PayloadContract | None


@attrs.frozen
class ParticipantConfig:
    identity: str = attrs.field(validator=name_validator)
    trusted_producers: frozenset[str]
    bindings: frozenset[StepBinding]
    transient_failure_budget: int = attrs.field(default=3, validator=attrs.validators.ge(1))


@attrs.frozen
class GateRecord:
    """The decided (or still unknown) outcome of one effect."""

    effect_id: str
    phase: Phase
    kind: ResultKind
    command_id: str


@attrs.frozen
class ParticipantState:
    config: ParticipantConfig
    inbox: frozenset[str] = frozenset()
    gate: Mapping[str, GateRecord] = attrs.field(factory=dict)
    #: Business facts: each effect id appended when its effect was applied here.
    effects: tuple[str, ...] = ()
    outbox: tuple[ResultEnvelope, ...] = ()
    #: Failed tries per command, kept by the consuming process (lost when it restarts).
    delivery_failures: Mapping[str, int] = attrs.field(factory=dict)
    #: Dead-lettered commands, durable: claimed in the participant's inbox (S-PART-04).
    dead_letters: frozenset[str] = frozenset()


@attrs.frozen
class CommandDelivery:
    """One delivery of a command; ``producer`` is the transport-authenticated principal."""

    command: CommandEnvelope
    producer: str
    decision: Decision = Decision.SUCCEED
    commit: CommitFate = CommitFate.COMMITTED


@attrs.frozen
class CommandProcessed:
    """Committed; ``absorbed`` when the gate answered for an earlier attempt."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.ACK

    result: ResultEnvelope
    absorbed: bool


@attrs.frozen
class DuplicateCommand:
    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.ACK

    command_id: str


@attrs.frozen
class DeadLettered:
    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.DEAD_LETTER

    command_id: str
    failures: int


CommandOutcome: TypeAlias = (
    CommandProcessed | DuplicateCommand | DeadLettered | MessageRefused | RolledBack | OutcomeUnknown
)


def verify_command(state: ParticipantState, delivery: CommandDelivery) -> RefusalReason | None:
    """Why ``delivery`` must not touch the inbox, or ``None`` (S-PART-05, S-DLV-03)."""
    config = state.config
    command = delivery.command
    if delivery.producer not in config.trusted_producers:
        return RefusalReason.UNTRUSTED_PRODUCER
    binding = next(
        (
            b
            for b in config.bindings
            if b.definition == command.definition and b.step_index == command.step_index
        ),
        None,
    )
    if command.owner != config.identity or binding is None:
        return RefusalReason.OWNER_MISMATCH
    if binding.definition_digest != command.definition_digest:
        return RefusalReason.DIGEST_MISMATCH
    if not command_identity_holds(command):
        return RefusalReason.IDENTITY_MISMATCH
    first_input = command.phase is Phase.EXECUTE and command.step_index == 0
    payload = command.payload
    if first_input:
        if payload is None:
            return None  # a start without first-step input (S-START-10): nothing to re-check
        if payload.contract != binding.input_contract:
            return RefusalReason.PAYLOAD_CONTRACT_MISMATCH
        if is_json_media_type(payload.contract.media_type) and not is_json_document(payload.data):
            return RefusalReason.PAYLOAD_CONTRACT_MISMATCH
    elif payload is not None:
        return RefusalReason.PAYLOAD_CONTRACT_MISMATCH
    return None


def _failed(state: ParticipantState, command_id: str) -> tuple[ParticipantState, CommandOutcome]:
    """Count one rolled-back try; dead-letter when the budget is spent (S-PART-04)."""
    failures = state.delivery_failures.get(command_id, 0) + 1
    counted = {**state.delivery_failures, command_id: failures}
    if failures >= state.config.transient_failure_budget:
        dead = attrs.evolve(state, delivery_failures=counted, dead_letters=state.dead_letters | {command_id})
        return dead, DeadLettered(command_id, failures)
    return attrs.evolve(state, delivery_failures=counted), RolledBack()


def _write(
    state: ParticipantState,
    command: CommandEnvelope,
    kind: ResultKind,
    gate: GateRecord | None,
    applied_effect: str | None,
) -> tuple[ParticipantState, ResultEnvelope]:
    result = answer(command, kind)
    written = attrs.evolve(
        state,
        inbox=state.inbox | {command.command_id},
        gate=state.gate if gate is None else {**state.gate, gate.effect_id: gate},
        effects=state.effects if applied_effect is None else (*state.effects, applied_effect),
        outbox=(*state.outbox, result),
    )
    return written, result


def _plan(
    state: ParticipantState, delivery: CommandDelivery
) -> tuple[ParticipantState, ResultEnvelope, bool] | None:
    """The transaction's writes, or ``None`` for a business transient failure."""
    command = delivery.command
    decision = delivery.decision
    if command.phase is Phase.RESOLVE:
        assert command.target_effect_id is not None  # verified by command_identity_holds
        target = command.target_effect_id
        record = state.gate.get(target)
        if record is not None and record.kind is not ResultKind.UNKNOWN:
            written, result = _write(state, command, record.kind, None, None)
            return written, result, True
        if record is None:
            # Never ran here: fence the effect so a late execute copy cannot run it.
            fence = GateRecord(target, Phase.EXECUTE, ResultKind.REJECTED, command.command_id)
            written, result = _write(state, command, ResultKind.REJECTED, fence, None)
            return written, result, False
        if decision is Decision.TRANSIENT_FAILURE:
            return None
        kind = _KIND[decision]
        if kind is ResultKind.UNKNOWN:
            written, result = _write(state, command, kind, None, None)
            return written, result, False
        decided = attrs.evolve(record, kind=kind)
        applied = target if kind is ResultKind.SUCCEEDED else None
        written, result = _write(state, command, kind, decided, applied)
        return written, result, False
    record = state.gate.get(command.effect_id)
    if record is not None:
        written, result = _write(state, command, record.kind, None, None)
        return written, result, True
    if decision is Decision.TRANSIENT_FAILURE:
        return None
    kind = _KIND[decision]
    gate = GateRecord(command.effect_id, command.phase, kind, command.command_id)
    applied = command.effect_id if kind is ResultKind.SUCCEEDED else None
    written, result = _write(state, command, kind, gate, applied)
    return written, result, False


def handle_command(
    state: ParticipantState, delivery: CommandDelivery
) -> tuple[ParticipantState, CommandOutcome]:
    """The participant transaction for one command (S-PART-01..06, S-DLV-01..04, S-TX-01).

    post: not isinstance(__return__[1], MessageRefused) or __return__[0] is state
    post: ack_is_earned(__return__[1])
    """
    command = delivery.command
    reason = verify_command(state, delivery)
    if reason is not None:
        return state, MessageRefused(command.command_id, reason)
    if command.command_id in state.inbox or command.command_id in state.dead_letters:
        return state, DuplicateCommand(command.command_id)
    planned = _plan(state, delivery)
    if planned is None:
        return _failed(state, command.command_id)
    written, result, absorbed = planned
    after, outcome = settle(state, written, delivery.commit, CommandProcessed(result, absorbed))
    if isinstance(outcome, RolledBack):
        return _failed(state, command.command_id)
    return after, outcome


def restart_participant(state: ParticipantState) -> ParticipantState:
    """The participant's process restarted on its own rows: the failure counts it kept are gone,
    the dead letters stay (S-PART-04). The seed leaves the count's home open; nasaga-runtime-core
    takes it from the consumer's delivery context (``retry_attempt``), which a restart begins anew."""
    return attrs.evolve(state, delivery_failures={})


def dead_letter_unrecorded(state: ParticipantState, command_id: str) -> ParticipantState:
    """A spent budget whose dead letter the database refused to record: the try still counted,
    the command is not dead-lettered, and its copy meets the spent budget again (S-PART-04)."""
    return attrs.evolve(state, dead_letters=state.dead_letters - {command_id})


def ack_is_earned(outcome: CommandOutcome) -> bool:
    """Only a local commit or an absorbed duplicate is acknowledged (S-DLV-01, S-DLV-04)."""
    acked = outcome.verdict is DeliveryVerdict.ACK
    return acked == isinstance(outcome, (CommandProcessed, DuplicateCommand))


def effect_counts(state: ParticipantState) -> Mapping[str, int]:
    """How many times each effect was applied here; the contract allows at most 1."""
    counts: dict[str, int] = {}
    for effect in state.effects:
        counts[effect] = counts.get(effect, 0) + 1
    return counts
