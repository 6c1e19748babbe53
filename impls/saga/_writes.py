"""Writes shared by the runtime's units: guarded writes, staging a command, applying a reaction.

The orchestrator's transactions and the management actions (``_management``) write the same way:
a guarded write that must succeed (``_need``), an outbox row with its timeout timer (``_stage``),
the instance CAS with its journal entry, timer swap and next command (``_apply``).
"""

from __future__ import annotations

from model.saga import (
    TERMINAL_STATUSES,
    CatalogEntry,
    CommandEnvelope,
    ControlState,
    DefinitionArtifact,
    QuotaMode,
    Reaction,
    SagaInstance,
    StaleFencingToken,
    timer_id_for,
)

from . import codec
from ._backend import CommandOutboxRow, DefinitionRow, SagaTransaction, TimerRow
from ._convert import instance_to_row, journal_to_row
from ._unit import Conflict


def entry_of(row: DefinitionRow) -> CatalogEntry:
    return CatalogEntry(codec.artifact_from_document(row.document), row.document, row.digest, row.lifecycle)


def _need(written: bool) -> None:
    # A guarded write the reads of this transaction said would succeed: a concurrent writer
    # got there first, so this unit rolls back and its input is redelivered.
    if not written:
        raise Conflict


def _stale(row: TimerRow, token: int) -> StaleFencingToken:
    return StaleFencingToken(row.timer_id, token, None if row.lease is None else row.lease.token)


def _stage(tx: SagaTransaction, command: CommandEnvelope, due_ms: int) -> None:
    """Outbox row plus timeout timer of a dispatched command, in the caller's transaction."""
    _need(
        tx.append_command(CommandOutboxRow(command.command_id, command.saga_id, command.definition, command))
    )
    timer = TimerRow(timer_id_for(command.command_id), command.saga_id, command.command_id, due_ms)
    _need(tx.insert_timer(timer))


def settle_quota(tx: SagaTransaction, mode: QuotaMode, before: SagaInstance, after: SagaInstance) -> None:
    """An instance that becomes terminal returns its quota unit in the same transaction, when the
    quota counts instances in flight (S-START-13, ``model.saga.settle_quota``)."""
    settles = before.status not in TERMINAL_STATUSES and after.status in TERMINAL_STATUSES
    if mode is QuotaMode.IN_FLIGHT and settles and tx.quota_used(after.definition.tenant) > 0:
        tx.add_quota(after.definition.tenant, -1)


def _apply(
    tx: SagaTransaction,
    before: SagaInstance,
    reaction: Reaction,
    artifact: DefinitionArtifact,
    now_ms: int,
    quota_mode: QuotaMode = QuotaMode.ADMITTED,
) -> None:
    """Instance CAS, journal, timer swap, quota and next command, one transaction (S-ORCH-02)."""
    _need(tx.update_instance(instance_to_row(reaction.instance), before.revision))
    _need(tx.append_journal(journal_to_row(reaction.entry)))
    settle_quota(tx, quota_mode, before, reaction.instance)
    tx.delete_timer(timer_id_for(reaction.settled_command_id))
    command = reaction.dispatch
    if command is not None:
        _stage(tx, command, now_ms + artifact.steps[command.step_index].timeout_ms)


def paused(tx: SagaTransaction, saga_id: str) -> bool:
    """A paused instance takes no automatic transition (S-MGT-05); read under the row lock."""
    control = tx.load_control(saga_id, lock=True)
    return control is not None and control.state is ControlState.PAUSED
