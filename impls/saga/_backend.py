"""The storage port of the saga runtime: ``SagaBackend`` and its row models.

Theory of operation
-------------------
One runtime (``impls.saga``) owns every saga flow: starts, results, timers, the participant
step, recovery, compensation and management actions. A backend provides *storage only*: the
rows below, unique keys, a version column, row locks and fenced timer writes, all inside one
local transaction per atomic unit of the contract (seed 002; S-ORCH-02, S-PART-01, S-TX-01).

The port is **synchronous** on purpose. The SQL drivers the backends use (sqlite3, psycopg,
PyMySQL) are synchronous, and an atomic unit never waits on anything but its own database:
holding an event loop across ``BEGIN`` would only invite interleavings *inside* a transaction,
which the contract does not have. The harness interleaves at transaction boundaries.

A unit of work::

    tx = backend.begin()        # BEGIN (IMMEDIATE in SQLite); may raise SagaBackendError
    ...reads and writes on tx   # each may raise SagaBackendError; caller then calls rollback()
    tx.commit()                 # ROLLED_BACK: definite, nothing applied;
                                # OUTCOME_UNKNOWN: COMMIT sent, answer lost (S-TX-02)
    tx.rollback()               # always safe, idempotent

Writes that the contract guards return ``bool`` instead of raising: ``False`` means the guard
held and nothing was written (unique key taken, version moved, fence lost). The runtime turns
those into the model's outcomes; a backend never decides an outcome itself.

Every one of one database's tables lives in the same backend: an orchestrator database and
each participant's database are separate ``SagaBackend`` instances (separate namespaces), and
each uses the half of the tables it needs.

Row fields are storage-shaped: names, ints, bytes, enums (store ``.value``), and small model
values (``DefinitionKey``, ``SagaPayload``, the envelopes) that a codec flattens into columns
or a canonical blob (``impls.saga.codec``). Only ``SagaBackendError`` leaves a backend.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs

from model.saga import (
    AuditRecord,
    Cause,
    CommandEnvelope,
    Control,
    DefinitionKey,
    DefinitionReference,
    Lifecycle,
    Phase,
    ResultEnvelope,
    ResultKind,
    SagaPayload,
    SagaStatus,
    StepStatus,
    Transport,
)

# -- errors ------------------------------------------------------------------------------


class SagaBackendErrorKind(enum.Enum):
    """Whose trouble and what is known about the transaction it happened in."""

    #: The transaction definitely did not apply (failure before COMMIT, serialization
    #: failure, deadlock victim, lock timeout). Safe to redeliver.
    ROLLED_BACK = "rolled_back"
    #: COMMIT was sent and no answer came back; it may or may not have applied (S-TX-02).
    OUTCOME_UNKNOWN = "outcome_unknown"
    #: The database could not be reached or refused the session; nothing was started.
    UNAVAILABLE = "unavailable"
    #: Stored data that the codec cannot decode.
    CORRUPT = "corrupt"


@attrs.frozen(auto_exc=True)
class SagaBackendError(Exception):
    """The only exception a backend raises. ``detail`` names no table, key or SQL text."""

    kind: SagaBackendErrorKind
    detail: str = ""


# -- capabilities --------------------------------------------------------------------------


@attrs.frozen
class SagaCapabilities:
    """What a backend guarantees; the harness turns these into preconditions.

    ``fenced_timers``: ``renew_timer``/``release_timer``/``complete_timer`` compare the lease
    token and its expiry (``lease_expires_ms > now_ms``) in the same conditional write, and
    ``allocate_fencing_token`` never repeats a token, even after timer removal (S-TIMER-01..04).
    ``Orchestrator`` refuses to be built on a backend without it (``UnfencedTimers``).
    ``row_locks``: ``lock=True`` reads take a row lock held until the end of the transaction
    (``SELECT ... FOR UPDATE``); without it the backend serializes whole transactions
    (SQLite ``BEGIN IMMEDIATE``, the memory backend's single writer).
    ``durable``: committed rows survive closing and reopening the backend on the same namespace.
    """

    fenced_timers: bool = True
    row_locks: bool = False
    durable: bool = False


# -- rows --------------------------------------------------------------------------------


@attrs.frozen
class DefinitionRow:
    """``definitions``: PK (tenant, workflow, version). ``document`` is the canonical document
    (S-CAT-01); the runtime rebuilds the artifact from it, so no other column is needed."""

    key: DefinitionKey
    digest: str
    document: bytes
    lifecycle: Lifecycle


@attrs.frozen
class CapabilityRow:
    """``capabilities``: PK (tenant, workflow, version, step_index, owner, replica).

    ``generation`` is allocated by the runtime under the row lock (S-ROUTE-02)."""

    tenant: str
    workflow: str
    version: int
    step_index: int
    owner: str
    replica: str
    transport: Transport
    address: str
    base_path: str | None
    credentials_digest: str
    generation: int
    lease_expires_ms: int


@attrs.frozen
class ReceiptRow:
    """``start_receipts``: PK saga_id. Outlives instance release (S-START-02)."""

    saga_id: str
    definition: DefinitionKey
    start_digest: str


@attrs.frozen
class AwaitingRow:
    """The command an instance waits on (five nullable columns of ``instances``)."""

    phase: Phase
    step_index: int
    attempt: int
    effect_id: str
    command_id: str


@attrs.frozen
class InstanceRow:
    """``instances``: PK saga_id; ``revision`` is the version column of the CAS (S-ORCH-02).

    ``steps`` is stored as a text column (comma-joined ``StepStatus`` values); the payload as
    (data BLOB, media_type, schema_id) and is never rewritten (S-START-11); a start without
    first-step input has none (all three NULL, S-START-10)."""

    saga_id: str
    definition: DefinitionKey
    definition_digest: str
    start_digest: str
    business_key: str
    status: SagaStatus
    steps: tuple[StepStatus, ...]
    awaiting: AwaitingRow | None
    revision: int
    payload: SagaPayload | None


@attrs.frozen
class JournalRow:
    """``journal``: PK (saga_id, revision); rows are only appended (S-STEP-08)."""

    saga_id: str
    revision: int
    before: SagaStatus | None
    after: SagaStatus
    step_index: int
    phase: Phase
    cause: Cause
    dispatched: str | None


@attrs.frozen
class CommandOutboxRow:
    """``command_outbox``: PK command_id; ``seq`` orders the relay (allocated by the backend on
    append, ignored on input). ``envelope`` goes into a blob via ``impls.saga.codec``; the
    definition key columns are kept for the retirement reference check (S-CAT-07)."""

    command_id: str
    saga_id: str
    definition: DefinitionKey
    envelope: CommandEnvelope
    published: bool = False
    seq: int = 0


@attrs.frozen
class LeaseRow:
    worker: str
    token: int
    expires_ms: int


@attrs.frozen
class TimerRow:
    """``timers``: PK timer_id; lease as three nullable columns (worker, token, expires_ms)."""

    timer_id: str
    saga_id: str
    command_id: str
    due_ms: int
    lease: LeaseRow | None = None


@attrs.frozen
class GateRow:
    """``participant_gate``: PK effect_id — the effect, stable across attempts (S-PART-03)."""

    effect_id: str
    phase: Phase
    kind: ResultKind
    command_id: str


@attrs.frozen
class EffectRow:
    """``business_facts``: one applied external effect; PK seq (backend-allocated)."""

    effect_id: str
    command_id: str
    seq: int = 0


@attrs.frozen
class ResultOutboxRow:
    """``result_outbox``: PK message_id (derived from the command, S-ORCH-03)."""

    message_id: str
    envelope: ResultEnvelope
    published: bool = False
    seq: int = 0


# -- the port ------------------------------------------------------------------------------


@runtime_checkable
class SagaTransaction(Protocol):
    """One local transaction. Every method may raise ``SagaBackendError``."""

    def commit(self) -> None:
        """COMMIT. Raises ROLLED_BACK (definitely not applied) or OUTCOME_UNKNOWN (S-TX-02)."""

    def rollback(self) -> None:
        """ROLLBACK; idempotent, never raises (a lost connection already rolled back)."""

    # catalog (a serial transaction: ``lock=True`` on the definition row) ------------------
    def load_definition(self, key: DefinitionKey, *, lock: bool = False) -> DefinitionRow | None: ...
    def insert_definition(self, row: DefinitionRow) -> bool:
        """False if the key exists (unique key; S-CAT-02/03 are decided by the runtime)."""

    def update_lifecycle(self, key: DefinitionKey, expected: Lifecycle, lifecycle: Lifecycle) -> bool:
        """Compare-and-set of the lifecycle column (S-CAT-04)."""

    def list_definitions(self) -> tuple[DefinitionRow, ...]: ...
    def registry_revision(self) -> int: ...
    def bump_registry_revision(self) -> int:
        """Increment the single registry revision row and return the new value (S-ROUTE-10)."""

    def definition_references(self, key: DefinitionKey, now_ms: int) -> frozenset[DefinitionReference]:
        """Retained instances, command outbox rows (published or not), live capability leases and
        recorded migration/audit references naming ``key`` (S-CAT-07)."""

    def insert_reference(self, reference: DefinitionReference) -> bool: ...
    def delete_reference(self, reference: DefinitionReference) -> bool: ...

    # capability routes (generation under the capability row lock, S-ROUTE-02) ---------------
    def load_capability(
        self,
        tenant: str,
        workflow: str,
        version: int,
        step_index: int,
        owner: str,
        replica: str,
        *,
        lock: bool = False,
    ) -> CapabilityRow | None: ...
    def upsert_capability(self, row: CapabilityRow) -> None: ...
    def list_capabilities(self) -> tuple[CapabilityRow, ...]: ...

    # starts and instances ----------------------------------------------------------------
    def load_receipt(self, saga_id: str) -> ReceiptRow | None: ...
    def insert_receipt(self, row: ReceiptRow) -> bool:
        """False if a receipt for ``saga_id`` exists (the start's unique key, S-START-01)."""

    def load_instance(self, saga_id: str, *, lock: bool = False) -> InstanceRow | None: ...
    def insert_instance(self, row: InstanceRow) -> bool: ...
    def update_instance(self, row: InstanceRow, expected_revision: int) -> bool:
        """UPDATE ... WHERE saga_id = ? AND revision = expected (S-ORCH-02)."""

    def delete_instance(self, saga_id: str) -> bool: ...
    def list_instances(self) -> tuple[InstanceRow, ...]: ...
    def quota_used(self, tenant: str) -> int: ...
    def add_quota(self, tenant: str, amount: int) -> int: ...
    def append_journal(self, row: JournalRow) -> bool:
        """False if (saga_id, revision) exists."""

    def journal(self, saga_id: str | None = None) -> tuple[JournalRow, ...]:
        """One instance's entries (or all), in (saga_id, revision) commit order."""

    # orchestrator result inbox ---------------------------------------------------------
    def claim_result(self, message_id: str) -> bool:
        """INSERT into the inbox; False if the key is taken (S-ORCH-03)."""

    def result_claimed(self, message_id: str) -> bool: ...

    # command outbox -----------------------------------------------------------------------
    def append_command(self, row: CommandOutboxRow) -> bool: ...
    def load_command(self, command_id: str) -> CommandOutboxRow | None: ...
    def mark_command_published(self, command_id: str) -> bool:
        """False if already published or absent."""

    def list_commands(self, *, unpublished_only: bool = False) -> tuple[CommandOutboxRow, ...]:
        """In append (``seq``) order."""

    def delete_commands(self, saga_id: str) -> int:
        """Drops one released instance's commands (all published, S-CAT-07); how many went."""

    # durable timers with fencing (S-TIMER-01..05) ------------------------------------------
    def insert_timer(self, row: TimerRow) -> bool: ...
    def load_timer(self, timer_id: str, *, lock: bool = False) -> TimerRow | None: ...
    def list_timers(self) -> tuple[TimerRow, ...]:
        """In (due_ms, timer_id) order."""

    def allocate_fencing_token(self) -> int:
        """Strictly greater than every token handed out before, even after timer removal."""

    def lease_timer(self, timer_id: str, expected_token: int | None, lease: LeaseRow) -> bool:
        """Set the lease iff the current lease token is ``expected_token`` (None: no lease)."""

    def renew_timer(self, timer_id: str, token: int, now_ms: int, expires_ms: int) -> bool:
        """Fenced: only while ``token`` is the current lease token and its lease has not expired
        at ``now_ms`` (S-TIMER-04)."""

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        """Fenced (token and unexpired lease): clear the lease."""

    def complete_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        """Fenced (token and unexpired lease): delete the timer."""

    def delete_timer(self, timer_id: str) -> bool:
        """Unfenced delete by the orchestrator transaction that settled the timer's command."""

    # management: control state and audit trail (S-MGT-05, S-MGT-09) -------------------------
    # Rows are the model's own values: ``Control`` (``controls``: PK saga_id, absent = active at
    # revision 1) and ``AuditRecord`` (``audit``: PK (saga_id, operation_id), ordered by ``seq``).
    def load_control(self, saga_id: str, *, lock: bool = False) -> Control | None: ...
    def save_control(self, saga_id: str, control: Control, expected_revision: int) -> bool:
        """Compare-and-set on the control revision; with no row, ``expected_revision == 1``
        inserts (the implicit active control of every instance)."""

    def next_audit_seq(self) -> int:
        """The next audit sequence number (a counter row, bumped in this transaction)."""

    def append_audit(self, record: AuditRecord) -> bool:
        """INSERT; False if the saga's operation id is taken (S-MGT-03)."""

    def load_audit(self, saga_id: str, operation_id: str) -> AuditRecord | None: ...
    def list_audit(self, saga_id: str | None = None) -> tuple[AuditRecord, ...]:
        """In ``seq`` order."""

    # participant: inbox, gate, business facts, result outbox (S-PART-01..03) ----------------
    def claim_command(self, command_id: str) -> bool:
        """INSERT into the participant inbox; False if taken (S-PART-02)."""

    def command_claimed(self, command_id: str) -> bool: ...
    def load_gate(self, effect_id: str, *, lock: bool = False) -> GateRow | None: ...
    def insert_gate(self, row: GateRow) -> bool:
        """False if the effect already has a record (unique key on effect_id, S-PART-03)."""

    def update_gate(self, row: GateRow, expected_kind: ResultKind) -> bool:
        """Decide an UNKNOWN record (resolve): WHERE effect_id = ? AND kind = expected."""

    def append_effect(self, row: EffectRow) -> None: ...
    def list_effects(self) -> tuple[EffectRow, ...]: ...
    def append_result(self, row: ResultOutboxRow) -> bool: ...
    def mark_result_published(self, message_id: str) -> bool: ...
    def list_results(self, *, unpublished_only: bool = False) -> tuple[ResultOutboxRow, ...]: ...


@runtime_checkable
class SagaBackend(Protocol):
    """One database (one namespace). ``begin`` opens a transaction; a backend may allow one
    open transaction at a time per instance (the runtime never nests)."""

    @property
    def capabilities(self) -> SagaCapabilities: ...

    def begin(self) -> SagaTransaction: ...

    def readiness(self) -> None:
        """Round-trip to the database now; raises UNAVAILABLE."""

    def close(self) -> None: ...


@runtime_checkable
class NamespacedSagaBackend(Protocol):
    """Optional: a ``SagaBackend`` that can remove its namespace, and list the namespaces present.

    Isolation is by namespace, never by truncating shared tables, so without this every example
    would leave its rows behind for good. ``drop_namespace`` deletes every row of this backend's
    namespace (idempotent; the backend may be closed afterwards as usual). ``namespaces`` lists
    the namespaces that have rows in the storage this backend lives in (for ``conformance clean``);
    a backend whose storage is its own (an in-memory database) lists just its own, if non-empty.
    Errors leave as ``SagaBackendError``.
    """

    def drop_namespace(self) -> None: ...

    def namespaces(self) -> list[str]: ...


#: ``module:function`` factories registered in ``conformance.backends.SAGA_BACKENDS``.
SagaBackendFactory = Callable[[str], SagaBackend]
