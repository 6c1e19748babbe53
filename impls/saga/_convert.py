"""Rows to model values and back: the runtime works in model values, backends in rows."""

from __future__ import annotations

from model.saga import Awaiting, JournalEntry, Lease, SagaInstance, Timer

from ._backend import AwaitingRow, InstanceRow, JournalRow, LeaseRow, TimerRow


def instance_to_row(instance: SagaInstance) -> InstanceRow:
    waiting = instance.awaiting
    return InstanceRow(
        saga_id=instance.saga_id,
        definition=instance.definition,
        definition_digest=instance.definition_digest,
        start_digest=instance.start_digest,
        business_key=instance.business_key,
        status=instance.status,
        steps=instance.steps,
        awaiting=None
        if waiting is None
        else AwaitingRow(
            waiting.phase, waiting.step_index, waiting.attempt, waiting.effect_id, waiting.command_id
        ),
        revision=instance.revision,
        payload=instance.first_payload,
    )


def instance_from_row(row: InstanceRow) -> SagaInstance:
    waiting = row.awaiting
    return SagaInstance(
        saga_id=row.saga_id,
        definition=row.definition,
        definition_digest=row.definition_digest,
        start_digest=row.start_digest,
        business_key=row.business_key,
        status=row.status,
        steps=row.steps,
        awaiting=None
        if waiting is None
        else Awaiting(
            waiting.phase, waiting.step_index, waiting.attempt, waiting.effect_id, waiting.command_id
        ),
        revision=row.revision,
        first_payload=row.payload,
    )


def journal_to_row(entry: JournalEntry) -> JournalRow:
    return JournalRow(
        entry.saga_id,
        entry.revision,
        entry.before,
        entry.after,
        entry.step_index,
        entry.phase,
        entry.cause,
        entry.dispatched,
    )


def journal_from_row(row: JournalRow) -> JournalEntry:
    return JournalEntry(
        row.saga_id, row.revision, row.before, row.after, row.step_index, row.phase, row.cause, row.dispatched
    )


def timer_from_row(row: TimerRow) -> Timer:
    lease = None if row.lease is None else Lease(row.lease.worker, row.lease.token, row.lease.expires_ms)
    return Timer(row.timer_id, row.saga_id, row.command_id, row.due_ms, lease)


def timer_to_row(timer: Timer) -> TimerRow:
    lease = timer.lease
    return TimerRow(
        timer.timer_id,
        timer.saga_id,
        timer.command_id,
        timer.due_ms,
        None if lease is None else LeaseRow(lease.worker, lease.token, lease.expires_ms),
    )
