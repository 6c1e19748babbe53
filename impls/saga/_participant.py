"""The participant adapter: one command, one local transaction (S-PART-01..06).

Verification first (trusted producer, owner, step binding, digest, derived identities,
payload contract; S-PART-05), then in one transaction: inbox claim by ``command_id``
(S-PART-02), gate by ``effect_id`` (S-PART-03), the business fact, the result outbox.
A business transient failure or a rolled-back transaction is not acknowledged and counts
against the per-command budget (S-PART-04); an unknown COMMIT counts for nothing: the
redelivery meets the inbox and the gate, which know (S-STEP-05, S-TX-02). A spent budget's
dead letter is claimed in the inbox by a transaction of its own before it is answered, so it
outlives the process (S-PART-04, S-PART-02).
"""

from __future__ import annotations

import attrs

from model.saga import (
    CommandDelivery,
    CommandEnvelope,
    CommandOutcome,
    CommandProcessed,
    DeadLettered,
    Decision,
    DuplicateCommand,
    MessageRefused,
    ParticipantConfig,
    ParticipantState,
    Phase,
    ResultEnvelope,
    ResultKind,
    RolledBack,
    Stage,
    Unit,
    result_message_id_for,
    verify_command,
)

from ._backend import EffectRow, GateRow, ResultOutboxRow, SagaBackend, SagaTransaction
from ._metrics import RuntimeMetrics, counted, process_metrics
from ._unit import Conflict, Discard, FateHook, Keep, always_commit, read_only, run_unit

_KIND = {
    Decision.SUCCEED: ResultKind.SUCCEEDED,
    Decision.REJECT: ResultKind.REJECTED,
    Decision.UNKNOWN: ResultKind.UNKNOWN,
}


_Letter = DeadLettered | DuplicateCommand


class _Transient(Exception):
    """The business code asked for a retry: roll back, do not acknowledge."""


def answer(command: CommandEnvelope, kind: ResultKind) -> ResultEnvelope:
    """The result envelope for ``command``; its id is derived from the command (S-ORCH-03)."""
    return ResultEnvelope(
        message_id=result_message_id_for(command.command_id),
        command_id=command.command_id,
        effect_id=command.effect_id,
        saga_id=command.saga_id,
        definition_digest=command.definition_digest,
        step_index=command.step_index,
        phase=command.phase,
        owner=command.owner,
        kind=kind,
    )


def _need(written: bool) -> None:
    if not written:
        raise Conflict


@attrs.define
class Participant:
    """One participant's side of the runtime over its own database."""

    backend: SagaBackend
    config: ParticipantConfig
    fates: FateHook = always_commit
    #: The process's one metrics source, shared with every other service of the process (S-OBS-04).
    metrics: RuntimeMetrics = attrs.field(factory=process_metrics)
    #: Failed tries per command, kept by this process as a consumer keeps its redelivery count:
    #: a restarted process counts afresh (S-PART-04; the dead letter itself is durable).
    delivery_failures: dict[str, int] = attrs.field(factory=dict)

    @counted(Unit.COMMAND)
    def handle_command(self, command: CommandEnvelope, producer: str, decision: Decision) -> CommandOutcome:
        """The participant transaction (S-PART-01..06, S-DLV-01..04, S-TX-01; stages S-OBS-02)."""
        reason = verify_command(ParticipantState(self.config), CommandDelivery(command, producer, decision))
        if reason is not None:
            return MessageRefused(command.command_id, reason)

        def body(tx: SagaTransaction) -> Keep[CommandOutcome] | Discard[CommandOutcome]:
            if not tx.claim_command(command.command_id):
                return Discard(DuplicateCommand(command.command_id))
            kind, absorbed = self._decide(tx, command, decision)
            result = answer(command, kind)
            _need(tx.append_result(ResultOutboxRow(result.message_id, result)))
            return Keep(CommandProcessed(result, absorbed))

        try:
            timed = self.metrics.timing(Stage.PARTICIPANT_TRANSACTION)
            outcome = run_unit(self.backend, "command", body, self.fates, timed)
        except _Transient:
            outcome = RolledBack()
        if isinstance(outcome, RolledBack):
            return self._failed(command.command_id)
        return outcome

    def _decide(
        self, tx: SagaTransaction, command: CommandEnvelope, decision: Decision
    ) -> tuple[ResultKind, bool]:
        """Gate and business fact; returns the answer and whether the gate absorbed it."""
        if command.phase is Phase.RESOLVE:
            assert command.target_effect_id is not None  # verified identity
            target = command.target_effect_id
            record = tx.load_gate(target, lock=True)
            if record is not None and record.kind is not ResultKind.UNKNOWN:
                return record.kind, True
            if record is None:
                # Never ran here: fence the effect so a late execute copy cannot run it (S-PART-06).
                _need(tx.insert_gate(GateRow(target, Phase.EXECUTE, ResultKind.REJECTED, command.command_id)))
                return ResultKind.REJECTED, False
            kind = self._handler(decision)
            if kind is ResultKind.UNKNOWN:
                return kind, False
            _need(tx.update_gate(attrs.evolve(record, kind=kind), ResultKind.UNKNOWN))
            if kind is ResultKind.SUCCEEDED:
                tx.append_effect(EffectRow(target, command.command_id))
            return kind, False
        record = tx.load_gate(command.effect_id, lock=True)
        if record is not None:
            return record.kind, True
        kind = self._handler(decision)
        _need(tx.insert_gate(GateRow(command.effect_id, command.phase, kind, command.command_id)))
        if kind is ResultKind.SUCCEEDED:
            tx.append_effect(EffectRow(command.effect_id, command.command_id))
        return kind, False

    def _handler(self, decision: Decision) -> ResultKind:
        """The business handler (here: the delivery's decision), timed as its own stage (S-OBS-02)."""
        with self.metrics.timed(Stage.HANDLER):
            if decision is Decision.TRANSIENT_FAILURE:
                raise _Transient
            return _KIND[decision]

    def _failed(self, command_id: str) -> RolledBack | DeadLettered | DuplicateCommand:
        """Count one rolled-back try; dead-letter when the budget is spent (S-PART-04).

        The dead letter is durable before it is answered (the seed's durable DLT): its own
        participant transaction claims the command in the inbox, so a copy delivered later, to
        this process or a restarted one, meets the claim (S-PART-02). Kept in memory only, a copy
        redelivered after a lost acknowledgement and a restart ran the dead letter's command
        (saga-durability, seed 20261130). Not recorded, it is not answered: ``RolledBack``, the
        copy redelivered meets the spent budget again."""
        failures = self.delivery_failures.get(command_id, 0) + 1
        self.delivery_failures[command_id] = failures
        if failures < self.config.transient_failure_budget:
            return RolledBack()

        def letter(tx: SagaTransaction) -> Keep[_Letter] | Discard[_Letter]:
            if not tx.claim_command(command_id):
                return Discard(DuplicateCommand(command_id))  # another delivery claimed it first
            return Keep(DeadLettered(command_id, failures))

        timed = self.metrics.timing(Stage.PARTICIPANT_TRANSACTION)
        outcome = run_unit(self.backend, "dead-letter", letter, timed=timed)
        return outcome if isinstance(outcome, DeadLettered | DuplicateCommand) else RolledBack()

    def pending_results(self) -> tuple[ResultEnvelope, ...]:
        rows = read_only(self.backend, lambda tx: tx.list_results(unpublished_only=True))
        return tuple(r.envelope for r in rows)

    def mark_result_published(self, message_id: str) -> bool:
        def body(tx: SagaTransaction) -> Keep[bool] | Discard[bool]:
            return Keep(True) if tx.mark_result_published(message_id) else Discard(False)

        return run_unit(self.backend, "relay", body) is True

    def effects(self) -> tuple[EffectRow, ...]:
        return read_only(self.backend, lambda tx: tx.list_effects())
