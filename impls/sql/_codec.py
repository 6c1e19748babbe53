"""Rows of ``impls.saga._backend`` to SQL column tuples and back (``to_row``/``from_row``).

Every column order here matches the ``COLUMNS`` of the table in ``_saga.SCHEMA``. Envelopes
go in as canonical blobs (``impls.saga.codec``); enums as their ``.value``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from impls.saga import codec
from impls.saga._backend import (
    AwaitingRow,
    CapabilityRow,
    CommandOutboxRow,
    DefinitionRow,
    EffectRow,
    GateRow,
    InstanceRow,
    JournalRow,
    LeaseRow,
    ReceiptRow,
    ResultOutboxRow,
    SagaBackendError,
    SagaBackendErrorKind,
    TimerRow,
)
from model.saga import (
    Cause,
    DefinitionKey,
    Lifecycle,
    PayloadContract,
    Phase,
    ResultKind,
    SagaPayload,
    SagaStatus,
    Transport,
)

Row = Sequence[Any]


def _bytes(value: Any) -> bytes:
    return bytes(value)


def corrupt(what: str) -> SagaBackendError:
    return SagaBackendError(SagaBackendErrorKind.CORRUPT, f"undecodable {what} row")


DEFINITION_COLUMNS = ("tenant", "workflow", "version", "digest", "document", "lifecycle")


def definition_to_row(row: DefinitionRow) -> tuple[Any, ...]:
    return (row.key.tenant, row.key.workflow, row.key.version, row.digest, row.document, row.lifecycle.value)


def definition_from_row(r: Row) -> DefinitionRow:
    try:
        return DefinitionRow(DefinitionKey(r[0], r[1], int(r[2])), r[3], _bytes(r[4]), Lifecycle(r[5]))
    except (ValueError, TypeError) as exc:
        raise corrupt("definition") from exc


CAPABILITY_COLUMNS = (
    "tenant", "workflow", "version", "step_index", "owner", "replica", "transport", "address",
    "base_path", "credentials_digest", "generation", "lease_expires_ms",
)  # fmt: skip


def capability_to_row(row: CapabilityRow) -> tuple[Any, ...]:
    return (
        row.tenant, row.workflow, row.version, row.step_index, row.owner, row.replica,
        row.transport.value, row.address, row.base_path, row.credentials_digest, row.generation,
        row.lease_expires_ms,
    )  # fmt: skip


def capability_from_row(r: Row) -> CapabilityRow:
    try:
        return CapabilityRow(
            r[0],
            r[1],
            int(r[2]),
            int(r[3]),
            r[4],
            r[5],
            Transport(r[6]),
            r[7],
            r[8],
            r[9],
            int(r[10]),
            int(r[11]),
        )
    except (ValueError, TypeError) as exc:
        raise corrupt("capability") from exc


RECEIPT_COLUMNS = ("saga_id", "tenant", "workflow", "version", "start_digest")


def receipt_to_row(row: ReceiptRow) -> tuple[Any, ...]:
    k = row.definition
    return (row.saga_id, k.tenant, k.workflow, k.version, row.start_digest)


def receipt_from_row(r: Row) -> ReceiptRow:
    try:
        return ReceiptRow(r[0], DefinitionKey(r[1], r[2], int(r[3])), r[4])
    except (ValueError, TypeError) as exc:
        raise corrupt("receipt") from exc


INSTANCE_COLUMNS = (
    "saga_id", "tenant", "workflow", "version", "definition_digest", "start_digest", "business_key",
    "status", "steps", "aw_phase", "aw_step", "aw_attempt", "aw_effect_id", "aw_command_id",
    "revision", "payload_data", "payload_media_type", "payload_schema_id",
)  # fmt: skip


def instance_to_row(row: InstanceRow) -> tuple[Any, ...]:
    k = row.definition
    a = row.awaiting
    waiting: tuple[Any, ...] = (
        (None, None, None, None, None)
        if a is None
        else (a.phase.value, a.step_index, a.attempt, a.effect_id, a.command_id)
    )
    p = row.payload
    # No first-step input (S-START-10): the three payload columns are NULL (they always were
    # nullable, so rows written before this encoding read back unchanged).
    given = (None, None, None) if p is None else (p.data, p.contract.media_type, p.contract.schema_id)
    return (
        row.saga_id, k.tenant, k.workflow, k.version, row.definition_digest, row.start_digest,
        row.business_key, row.status.value, codec.steps_to_text(row.steps), *waiting, row.revision,
        *given,
    )  # fmt: skip


def instance_from_row(r: Row) -> InstanceRow:
    try:
        awaiting = None if r[9] is None else AwaitingRow(Phase(r[9]), int(r[10]), int(r[11]), r[12], r[13])
        return InstanceRow(
            saga_id=r[0],
            definition=DefinitionKey(r[1], r[2], int(r[3])),
            definition_digest=r[4],
            start_digest=r[5],
            business_key=r[6],
            status=SagaStatus(r[7]),
            steps=codec.steps_from_text(r[8]),
            awaiting=awaiting,
            revision=int(r[14]),
            payload=None if r[16] is None else SagaPayload(_bytes(r[15]), PayloadContract(r[16], r[17])),
        )
    except (ValueError, TypeError) as exc:
        raise corrupt("instance") from exc


JOURNAL_COLUMNS = (
    "saga_id",
    "revision",
    "before_status",
    "after_status",
    "step_index",
    "phase",
    "cause",
    "dispatched",
)


def journal_to_row(row: JournalRow) -> tuple[Any, ...]:
    before = None if row.before is None else row.before.value
    return (
        row.saga_id, row.revision, before, row.after.value, row.step_index, row.phase.value,
        row.cause.value, row.dispatched,
    )  # fmt: skip


def journal_from_row(r: Row) -> JournalRow:
    try:
        before = None if r[2] is None else SagaStatus(r[2])
        return JournalRow(
            r[0], int(r[1]), before, SagaStatus(r[3]), int(r[4]), Phase(r[5]), Cause(r[6]), r[7]
        )
    except (ValueError, TypeError) as exc:
        raise corrupt("journal") from exc


COMMAND_COLUMNS = ("command_id", "saga_id", "tenant", "workflow", "version", "envelope", "published")


def command_to_row(row: CommandOutboxRow) -> tuple[Any, ...]:
    k = row.definition
    return (
        row.command_id, row.saga_id, k.tenant, k.workflow, k.version,
        codec.command_to_blob(row.envelope), 1 if row.published else 0,
    )  # fmt: skip


def command_from_row(r: Row) -> CommandOutboxRow:
    """Columns as COMMAND_COLUMNS followed by seq."""
    try:
        return CommandOutboxRow(
            r[0],
            r[1],
            DefinitionKey(r[2], r[3], int(r[4])),
            codec.command_from_blob(_bytes(r[5])),
            bool(r[6]),
            int(r[7]),
        )
    except (ValueError, TypeError) as exc:
        raise corrupt("command outbox") from exc


TIMER_COLUMNS = (
    "timer_id",
    "saga_id",
    "command_id",
    "due_ms",
    "lease_worker",
    "lease_token",
    "lease_expires_ms",
)


def timer_to_row(row: TimerRow) -> tuple[Any, ...]:
    lease = row.lease
    held: tuple[Any, ...] = (
        (None, None, None) if lease is None else (lease.worker, lease.token, lease.expires_ms)
    )
    return (row.timer_id, row.saga_id, row.command_id, row.due_ms, *held)


def timer_from_row(r: Row) -> TimerRow:
    try:
        lease = None if r[5] is None else LeaseRow(r[4], int(r[5]), int(r[6]))
        return TimerRow(r[0], r[1], r[2], int(r[3]), lease)
    except (ValueError, TypeError) as exc:
        raise corrupt("timer") from exc


GATE_COLUMNS = ("effect_id", "phase", "kind", "command_id")


def gate_to_row(row: GateRow) -> tuple[Any, ...]:
    return (row.effect_id, row.phase.value, row.kind.value, row.command_id)


def gate_from_row(r: Row) -> GateRow:
    try:
        return GateRow(r[0], Phase(r[1]), ResultKind(r[2]), r[3])
    except (ValueError, TypeError) as exc:
        raise corrupt("gate") from exc


EFFECT_COLUMNS = ("effect_id", "command_id")


def effect_from_row(r: Row) -> EffectRow:
    return EffectRow(r[0], r[1], int(r[2]))


RESULT_COLUMNS = ("message_id", "envelope", "published")


def result_to_row(row: ResultOutboxRow) -> tuple[Any, ...]:
    return (row.message_id, codec.result_to_blob(row.envelope), 1 if row.published else 0)


def result_from_row(r: Row) -> ResultOutboxRow:
    try:
        return ResultOutboxRow(r[0], codec.result_from_blob(_bytes(r[1])), bool(r[2]), int(r[3]))
    except (ValueError, TypeError) as exc:
        raise corrupt("result outbox") from exc
