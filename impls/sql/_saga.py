"""``SagaBackend`` over any SQL engine through a ``Dialect``: schema, statements, transactions.

One ``SqlTransaction`` is one database transaction opened with the dialect's ``begin``
(``BEGIN IMMEDIATE`` in SQLite: the write lock is taken up front, so the unit is serial).
Guarded writes are conditional statements whose row count is the answer: a unique key
(``insert_ignore``), a version column (``revision = ?``), a fencing token (``lease_token = ?``).
Counters (fencing tokens, registry revision, outbox order) are rows of one table, bumped
with ``UPDATE ... SET value = value + 1`` so the row lock orders them. Driver exceptions are
classified by the dialect and stop here as ``SagaBackendError``.

A backend opened with a ``namespace`` shares one set of tables with every other namespace
(PostgreSQL, MariaDB): each table then leads with an ``ns`` key column, every statement adds
``AND ns = ?`` as its last predicate and every insert writes it, so namespaces never see each
other's rows and the tables are created once, not per namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from impls.saga._backend import (
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
    SagaCapabilities,
    TimerRow,
)
from model.saga import DefinitionKey, DefinitionReference, Lifecycle, ReferenceKind, ResultKind

from . import _codec as c
from ._dialect import Dialect, failure, placeholders
from ._saga_management import MANAGEMENT_SCHEMA, ManagementRows

# Table -> (columns with types by role, primary key). Roles: K key text, T text, B blob, I int.
SCHEMA: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "definitions": (
        (("tenant", "K"), ("workflow", "K"), ("version", "I"), ("digest", "T"), ("document", "B"),
         ("lifecycle", "T")),
        ("tenant", "workflow", "version"),
    ),
    "def_references": (
        (("kind", "K"), ("tenant", "K"), ("workflow", "K"), ("version", "I"), ("ref_id", "K")),
        ("kind", "tenant", "workflow", "version", "ref_id"),
    ),
    "capabilities": (
        (("tenant", "K"), ("workflow", "K"), ("version", "I"), ("step_index", "I"), ("owner", "K"),
         ("replica", "K"), ("transport", "T"), ("address", "T"), ("base_path", "T"),
         ("credentials_digest", "T"), ("generation", "I"), ("lease_expires_ms", "I")),
        ("tenant", "workflow", "version", "step_index", "owner", "replica"),
    ),
    "receipts": (
        (("saga_id", "K"), ("tenant", "T"), ("workflow", "T"), ("version", "I"), ("start_digest", "T")),
        ("saga_id",),
    ),
    "instances": (
        (("saga_id", "K"), ("tenant", "K"), ("workflow", "K"), ("version", "I"),
         ("definition_digest", "T"), ("start_digest", "T"), ("business_key", "T"), ("status", "T"),
         ("steps", "T"), ("aw_phase", "T"), ("aw_step", "I"), ("aw_attempt", "I"),
         ("aw_effect_id", "T"), ("aw_command_id", "T"), ("revision", "I"), ("payload_data", "B"),
         ("payload_media_type", "T"), ("payload_schema_id", "T")),
        ("saga_id",),
    ),
    "quota": ((("tenant", "K"), ("used", "I")), ("tenant",)),
    "journal": (
        (("saga_id", "K"), ("revision", "I"), ("before_status", "T"), ("after_status", "T"),
         ("step_index", "I"), ("phase", "T"), ("cause", "T"), ("dispatched", "T")),
        ("saga_id", "revision"),
    ),
    "result_inbox": ((("message_id", "K"),), ("message_id",)),
    "command_outbox": (
        (("command_id", "K"), ("saga_id", "K"), ("tenant", "K"), ("workflow", "K"), ("version", "I"),
         ("envelope", "B"), ("published", "I"), ("seq", "I")),
        ("command_id",),
    ),
    "timers": (
        (("timer_id", "K"), ("saga_id", "K"), ("command_id", "K"), ("due_ms", "I"),
         ("lease_worker", "T"), ("lease_token", "I"), ("lease_expires_ms", "I")),
        ("timer_id",),
    ),
    "counters": ((("name", "K"), ("value", "I")), ("name",)),
    "command_inbox": ((("command_id", "K"),), ("command_id",)),
    "gate": ((("effect_id", "K"), ("phase", "T"), ("kind", "T"), ("command_id", "T")), ("effect_id",)),
    "business_facts": ((("seq", "I"), ("effect_id", "K"), ("command_id", "K")), ("seq",)),
    "result_outbox": (
        (("message_id", "K"), ("envelope", "B"), ("published", "I"), ("seq", "I")),
        ("message_id",),
    ),
    **MANAGEMENT_SCHEMA,
}  # fmt: skip

COUNTERS = ("fencing_token", "registry_revision", "seq", "audit_seq")


class SqlTransaction(ManagementRows):
    """One database transaction; every statement's driver error becomes ``SagaBackendError``."""

    def __init__(self, backend: SqlSagaBackend) -> None:
        self._b = backend
        self._d = backend.dialect
        self._cursor = backend.connection.cursor()
        self._open = True
        # Shared tables: the namespace predicate always comes last, its parameter too.
        self._ns: tuple[Any, ...] = () if backend.namespace is None else (backend.namespace,)
        self._and_ns = "" if backend.namespace is None else " AND ns = ?"
        self._where_ns = "" if backend.namespace is None else " WHERE ns = ?"
        self._exec(self._d.begin)

    # -- plumbing ----------------------------------------------------------------------------

    def _t(self, table: str) -> str:
        return f"{self._b.prefix}{table}"

    def _sql(self, text: str) -> str:
        return text.replace("?", self._d.placeholder) if self._d.placeholder != "?" else text

    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        self._b.statements += 1
        try:
            self._cursor.execute(self._sql(sql), params)
        except Exception as exc:
            raise SagaBackendError(
                self._d.classify(exc, during_commit=False), failure("statement failed", self._d, exc)
            ) from None
        count = self._cursor.rowcount
        return int(count) if count is not None else 0

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        self._exec(sql, params)
        try:
            return list(self._cursor.fetchall())
        except Exception as exc:
            raise SagaBackendError(
                self._d.classify(exc, during_commit=False), failure("fetch failed", self._d, exc)
            ) from None

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    def _insert(self, table: str, columns: tuple[str, ...], values: tuple[Any, ...]) -> bool:
        if self._ns:
            columns, values = ("ns", *columns), (*self._ns, *values)
        return self._exec(self._d.insert_ignore(self._t(table), columns), values) == 1

    def _lock(self, lock: bool) -> str:
        return self._d.for_update if lock else ""

    def _bump(self, name: str) -> int:
        counters, key = self._t("counters"), (name, *self._ns)
        bump = f"UPDATE {counters} SET value = value + 1 WHERE name = ?{self._and_ns}"
        if self._d.update_returning:
            row = self._one(f"{bump} RETURNING value", key)
        else:
            self._exec(bump, key)
            row = self._one(f"SELECT value FROM {counters} WHERE name = ?{self._and_ns}", key)
        if row is None:
            raise SagaBackendError(SagaBackendErrorKind.CORRUPT, "missing counter")
        return int(row[0])

    def commit(self) -> None:
        if not self._open:
            return
        self._open = False
        self._b.statements += 1
        try:
            self._b.connection.commit() if self._b.driver_commits else self._cursor.execute("COMMIT")
        except Exception as exc:
            kind = self._d.classify(exc, during_commit=True)
            raise SagaBackendError(kind, failure("commit failed", self._d, exc)) from None

    def rollback(self) -> None:
        if not self._open:
            return
        self._open = False
        self._b.statements += 1
        # A lost connection has rolled back already.
        with suppress(Exception):
            self._b.connection.rollback() if self._b.driver_commits else self._cursor.execute("ROLLBACK")

    # -- catalog -------------------------------------------------------------------------

    def load_definition(self, key: DefinitionKey, *, lock: bool = False) -> DefinitionRow | None:
        cols = ", ".join(c.DEFINITION_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('definitions')} WHERE tenant = ? AND workflow = ? AND version = ?"
            + self._and_ns
            + self._lock(lock),
            (key.tenant, key.workflow, key.version, *self._ns),
        )
        return None if row is None else c.definition_from_row(row)

    def insert_definition(self, row: DefinitionRow) -> bool:
        return self._insert("definitions", c.DEFINITION_COLUMNS, c.definition_to_row(row))

    def update_lifecycle(self, key: DefinitionKey, expected: Lifecycle, lifecycle: Lifecycle) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('definitions')} SET lifecycle = ? "
                f"WHERE tenant = ? AND workflow = ? AND version = ? AND lifecycle = ?{self._and_ns}",
                (lifecycle.value, key.tenant, key.workflow, key.version, expected.value, *self._ns),
            )
            == 1
        )

    def list_definitions(self) -> tuple[DefinitionRow, ...]:
        cols = ", ".join(c.DEFINITION_COLUMNS)
        rows = self._all(
            f"SELECT {cols} FROM {self._t('definitions')}{self._where_ns} ORDER BY tenant, workflow, version",
            self._ns,
        )
        return tuple(c.definition_from_row(r) for r in rows)

    def registry_revision(self) -> int:
        row = self._one(
            f"SELECT value FROM {self._t('counters')} WHERE name = ?{self._and_ns}",
            ("registry_revision", *self._ns),
        )
        return 0 if row is None else int(row[0])

    def bump_registry_revision(self) -> int:
        return self._bump("registry_revision")

    def definition_references(self, key: DefinitionKey, now_ms: int) -> frozenset[DefinitionReference]:
        k = (key.tenant, key.workflow, key.version, *self._ns)
        where = "tenant = ? AND workflow = ? AND version = ?" + self._and_ns
        found: set[DefinitionReference] = set()
        for kind, ref_id in self._all(
            f"SELECT kind, ref_id FROM {self._t('def_references')} WHERE {where}", k
        ):
            found.add(DefinitionReference(ReferenceKind(kind), key, ref_id))
        for (saga_id,) in self._all(f"SELECT saga_id FROM {self._t('instances')} WHERE {where}", k):
            found.add(DefinitionReference(ReferenceKind.INSTANCE, key, saga_id))
        for (command_id,) in self._all(
            f"SELECT command_id FROM {self._t('command_outbox')} WHERE {where}", k
        ):
            found.add(DefinitionReference(ReferenceKind.OUTBOX, key, command_id))
        for owner, replica, step in self._all(
            f"SELECT owner, replica, step_index FROM {self._t('capabilities')} "
            f"WHERE {where} AND lease_expires_ms > ?",
            (*k, now_ms),
        ):
            found.add(DefinitionReference(ReferenceKind.CAPABILITY_LEASE, key, f"{owner}/{replica}/{step}"))
        return frozenset(found)

    def insert_reference(self, reference: DefinitionReference) -> bool:
        k = reference.key
        return self._insert(
            "def_references",
            ("kind", "tenant", "workflow", "version", "ref_id"),
            (reference.kind.value, k.tenant, k.workflow, k.version, reference.ref_id),
        )

    def delete_reference(self, reference: DefinitionReference) -> bool:
        k = reference.key
        return (
            self._exec(
                f"DELETE FROM {self._t('def_references')} WHERE kind = ? AND tenant = ? "
                f"AND workflow = ? AND version = ? AND ref_id = ?{self._and_ns}",
                (reference.kind.value, k.tenant, k.workflow, k.version, reference.ref_id, *self._ns),
            )
            == 1
        )

    # -- capabilities ------------------------------------------------------------------------

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
    ) -> CapabilityRow | None:
        cols = ", ".join(c.CAPABILITY_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('capabilities')} WHERE tenant = ? AND workflow = ? AND version = ? "
            "AND step_index = ? AND owner = ? AND replica = ?" + self._and_ns + self._lock(lock),
            (tenant, workflow, version, step_index, owner, replica, *self._ns),
        )
        return None if row is None else c.capability_from_row(row)

    def upsert_capability(self, row: CapabilityRow) -> None:
        values = c.capability_to_row(row)
        self._exec(
            f"DELETE FROM {self._t('capabilities')} WHERE tenant = ? AND workflow = ? AND version = ? "
            f"AND step_index = ? AND owner = ? AND replica = ?{self._and_ns}",
            (*values[:6], *self._ns),
        )
        self._insert("capabilities", c.CAPABILITY_COLUMNS, values)

    def list_capabilities(self) -> tuple[CapabilityRow, ...]:
        cols = ", ".join(c.CAPABILITY_COLUMNS)
        rows = self._all(
            f"SELECT {cols} FROM {self._t('capabilities')}{self._where_ns} "
            "ORDER BY tenant, workflow, version, step_index, owner, replica",
            self._ns,
        )
        return tuple(c.capability_from_row(r) for r in rows)

    # -- starts and instances ------------------------------------------------------------------

    def load_receipt(self, saga_id: str) -> ReceiptRow | None:
        cols = ", ".join(c.RECEIPT_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('receipts')} WHERE saga_id = ?{self._and_ns}", (saga_id, *self._ns)
        )
        return None if row is None else c.receipt_from_row(row)

    def insert_receipt(self, row: ReceiptRow) -> bool:
        return self._insert("receipts", c.RECEIPT_COLUMNS, c.receipt_to_row(row))

    def load_instance(self, saga_id: str, *, lock: bool = False) -> InstanceRow | None:
        cols = ", ".join(c.INSTANCE_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('instances')} WHERE saga_id = ?{self._and_ns}" + self._lock(lock),
            (saga_id, *self._ns),
        )
        return None if row is None else c.instance_from_row(row)

    def insert_instance(self, row: InstanceRow) -> bool:
        return self._insert("instances", c.INSTANCE_COLUMNS, c.instance_to_row(row))

    def update_instance(self, row: InstanceRow, expected_revision: int) -> bool:
        values = c.instance_to_row(row)
        sets = ", ".join(f"{col} = ?" for col in c.INSTANCE_COLUMNS[1:])
        return (
            self._exec(
                f"UPDATE {self._t('instances')} SET {sets} WHERE saga_id = ? AND revision = ?{self._and_ns}",
                (*values[1:], row.saga_id, expected_revision, *self._ns),
            )
            == 1
        )

    def delete_instance(self, saga_id: str) -> bool:
        return (
            self._exec(
                f"DELETE FROM {self._t('instances')} WHERE saga_id = ?{self._and_ns}", (saga_id, *self._ns)
            )
            == 1
        )

    def list_instances(self) -> tuple[InstanceRow, ...]:
        cols = ", ".join(c.INSTANCE_COLUMNS)
        rows = self._all(
            f"SELECT {cols} FROM {self._t('instances')}{self._where_ns} ORDER BY saga_id", self._ns
        )
        return tuple(c.instance_from_row(r) for r in rows)

    def quota_used(self, tenant: str) -> int:
        row = self._one(
            f"SELECT used FROM {self._t('quota')} WHERE tenant = ?{self._and_ns}", (tenant, *self._ns)
        )
        return 0 if row is None else int(row[0])

    def add_quota(self, tenant: str, amount: int) -> int:
        self._insert("quota", ("tenant", "used"), (tenant, 0))
        add = f"UPDATE {self._t('quota')} SET used = used + ? WHERE tenant = ?{self._and_ns}"
        if not self._d.update_returning:
            self._exec(add, (amount, tenant, *self._ns))
            return self.quota_used(tenant)
        row = self._one(f"{add} RETURNING used", (amount, tenant, *self._ns))
        if row is None:
            raise SagaBackendError(SagaBackendErrorKind.CORRUPT, "missing quota row")
        return int(row[0])

    def append_journal(self, row: JournalRow) -> bool:
        return self._insert("journal", c.JOURNAL_COLUMNS, c.journal_to_row(row))

    def journal(self, saga_id: str | None = None) -> tuple[JournalRow, ...]:
        cols = ", ".join(c.JOURNAL_COLUMNS)
        if saga_id is None:
            rows = self._all(
                f"SELECT {cols} FROM {self._t('journal')}{self._where_ns} ORDER BY saga_id, revision",
                self._ns,
            )
        else:
            rows = self._all(
                f"SELECT {cols} FROM {self._t('journal')} WHERE saga_id = ?{self._and_ns} ORDER BY revision",
                (saga_id, *self._ns),
            )
        return tuple(c.journal_from_row(r) for r in rows)

    # -- result inbox ----------------------------------------------------------------------

    def claim_result(self, message_id: str) -> bool:
        return self._insert("result_inbox", ("message_id",), (message_id,))

    def result_claimed(self, message_id: str) -> bool:
        return (
            self._one(
                f"SELECT 1 FROM {self._t('result_inbox')} WHERE message_id = ?{self._and_ns}",
                (message_id, *self._ns),
            )
            is not None
        )

    # -- command outbox ------------------------------------------------------------------------

    def append_command(self, row: CommandOutboxRow) -> bool:
        if self.load_command(row.command_id) is not None:
            return False
        return self._insert(
            "command_outbox", (*c.COMMAND_COLUMNS, "seq"), (*c.command_to_row(row), self._bump("seq"))
        )

    def load_command(self, command_id: str) -> CommandOutboxRow | None:
        cols = ", ".join((*c.COMMAND_COLUMNS, "seq"))
        row = self._one(
            f"SELECT {cols} FROM {self._t('command_outbox')} WHERE command_id = ?{self._and_ns}",
            (command_id, *self._ns),
        )
        return None if row is None else c.command_from_row(row)

    def mark_command_published(self, command_id: str) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('command_outbox')} SET published = 1 "
                f"WHERE command_id = ? AND published = 0{self._and_ns}",
                (command_id, *self._ns),
            )
            == 1
        )

    def delete_commands(self, saga_id: str) -> int:
        return self._exec(
            f"DELETE FROM {self._t('command_outbox')} WHERE saga_id = ?{self._and_ns}", (saga_id, *self._ns)
        )

    def list_commands(self, *, unpublished_only: bool = False) -> tuple[CommandOutboxRow, ...]:
        cols = ", ".join((*c.COMMAND_COLUMNS, "seq"))
        where = (" WHERE published = 0" + self._and_ns) if unpublished_only else self._where_ns
        rows = self._all(f"SELECT {cols} FROM {self._t('command_outbox')}{where} ORDER BY seq", self._ns)
        return tuple(c.command_from_row(r) for r in rows)

    # -- timers ------------------------------------------------------------------------------

    def insert_timer(self, row: TimerRow) -> bool:
        return self._insert("timers", c.TIMER_COLUMNS, c.timer_to_row(row))

    def load_timer(self, timer_id: str, *, lock: bool = False) -> TimerRow | None:
        cols = ", ".join(c.TIMER_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('timers')} WHERE timer_id = ?{self._and_ns}" + self._lock(lock),
            (timer_id, *self._ns),
        )
        return None if row is None else c.timer_from_row(row)

    def list_timers(self) -> tuple[TimerRow, ...]:
        cols = ", ".join(c.TIMER_COLUMNS)
        rows = self._all(
            f"SELECT {cols} FROM {self._t('timers')}{self._where_ns} ORDER BY due_ms, timer_id", self._ns
        )
        return tuple(c.timer_from_row(r) for r in rows)

    def allocate_fencing_token(self) -> int:
        return self._bump("fencing_token")

    def lease_timer(self, timer_id: str, expected_token: int | None, lease: LeaseRow) -> bool:
        fence = "lease_token IS NULL" if expected_token is None else "lease_token = ?"
        params: tuple[Any, ...] = (lease.worker, lease.token, lease.expires_ms, timer_id)
        if expected_token is not None:
            params = (*params, expected_token)
        params = (*params, *self._ns)
        return (
            self._exec(
                f"UPDATE {self._t('timers')} SET lease_worker = ?, lease_token = ?, lease_expires_ms = ? "
                f"WHERE timer_id = ? AND {fence}{self._and_ns}",
                params,
            )
            == 1
        )

    # The fence of renew/release/complete: the token, and a lease not yet expired (S-TIMER-04).
    _FENCE = "timer_id = ? AND lease_token = ? AND lease_expires_ms > ?"

    def renew_timer(self, timer_id: str, token: int, now_ms: int, expires_ms: int) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('timers')} SET lease_expires_ms = ? WHERE {self._FENCE}{self._and_ns}",
                (expires_ms, timer_id, token, now_ms, *self._ns),
            )
            == 1
        )

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('timers')} "
                "SET lease_worker = NULL, lease_token = NULL, lease_expires_ms = NULL "
                f"WHERE {self._FENCE}{self._and_ns}",
                (timer_id, token, now_ms, *self._ns),
            )
            == 1
        )

    def complete_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return (
            self._exec(
                f"DELETE FROM {self._t('timers')} WHERE {self._FENCE}{self._and_ns}",
                (timer_id, token, now_ms, *self._ns),
            )
            == 1
        )

    def delete_timer(self, timer_id: str) -> bool:
        return (
            self._exec(
                f"DELETE FROM {self._t('timers')} WHERE timer_id = ?{self._and_ns}", (timer_id, *self._ns)
            )
            == 1
        )

    # -- participant -----------------------------------------------------------------------

    def claim_command(self, command_id: str) -> bool:
        return self._insert("command_inbox", ("command_id",), (command_id,))

    def command_claimed(self, command_id: str) -> bool:
        return (
            self._one(
                f"SELECT 1 FROM {self._t('command_inbox')} WHERE command_id = ?{self._and_ns}",
                (command_id, *self._ns),
            )
            is not None
        )

    def load_gate(self, effect_id: str, *, lock: bool = False) -> GateRow | None:
        cols = ", ".join(c.GATE_COLUMNS)
        row = self._one(
            f"SELECT {cols} FROM {self._t('gate')} WHERE effect_id = ?{self._and_ns}" + self._lock(lock),
            (effect_id, *self._ns),
        )
        return None if row is None else c.gate_from_row(row)

    def insert_gate(self, row: GateRow) -> bool:
        return self._insert("gate", c.GATE_COLUMNS, c.gate_to_row(row))

    def update_gate(self, row: GateRow, expected_kind: ResultKind) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('gate')} SET phase = ?, kind = ?, command_id = ? "
                f"WHERE effect_id = ? AND kind = ?{self._and_ns}",
                (*c.gate_to_row(row)[1:], row.effect_id, expected_kind.value, *self._ns),
            )
            == 1
        )

    def append_effect(self, row: EffectRow) -> None:
        self._insert(
            "business_facts",
            ("seq", "effect_id", "command_id"),
            (self._bump("seq"), row.effect_id, row.command_id),
        )

    def list_effects(self) -> tuple[EffectRow, ...]:
        rows = self._all(
            f"SELECT effect_id, command_id, seq FROM {self._t('business_facts')}{self._where_ns} "
            "ORDER BY seq",
            self._ns,
        )
        return tuple(c.effect_from_row(r) for r in rows)

    def append_result(self, row: ResultOutboxRow) -> bool:
        return self._insert(
            "result_outbox", (*c.RESULT_COLUMNS, "seq"), (*c.result_to_row(row), self._bump("seq"))
        )

    def mark_result_published(self, message_id: str) -> bool:
        return (
            self._exec(
                f"UPDATE {self._t('result_outbox')} SET published = 1 "
                f"WHERE message_id = ? AND published = 0{self._and_ns}",
                (message_id, *self._ns),
            )
            == 1
        )

    def list_results(self, *, unpublished_only: bool = False) -> tuple[ResultOutboxRow, ...]:
        cols = ", ".join((*c.RESULT_COLUMNS, "seq"))
        where = (" WHERE published = 0" + self._and_ns) if unpublished_only else self._where_ns
        rows = self._all(f"SELECT {cols} FROM {self._t('result_outbox')}{where} ORDER BY seq", self._ns)
        return tuple(c.result_from_row(r) for r in rows)


class SqlSagaBackend:
    """A ``SagaBackend`` on one DB-API connection; tables named ``<prefix><table>``.

    ``driver_commits``: COMMIT/ROLLBACK through ``connection.commit()`` (psycopg, PyMySQL) rather
    than statements on an autocommit connection (sqlite3 with ``isolation_level=None``).
    """

    def __init__(
        self,
        connection: Any,
        dialect: Dialect,
        prefix: str = "",
        *,
        driver_commits: bool = False,
        capabilities: SagaCapabilities | None = None,
        on_close: Callable[[], None] | None = None,
        namespace: str | None = None,
    ) -> None:
        self.connection = connection
        self.dialect = dialect
        self.prefix = prefix
        #: None: the tables belong to this backend alone; else the ``ns`` value of its rows.
        self.namespace = namespace
        self.driver_commits = driver_commits
        #: SQL statements sent by this backend's transactions, BEGIN/COMMIT/ROLLBACK included
        #: (``SqlTransaction`` counts them; ``conformance bench`` reads the count per unit).
        self.statements = 0
        self._capabilities = capabilities or SagaCapabilities(
            fenced_timers=True, row_locks=bool(dialect.for_update)
        )
        self._on_close = on_close
        self.create_schema()

    @property
    def capabilities(self) -> SagaCapabilities:
        return self._capabilities

    def begin(self) -> SqlTransaction:
        return SqlTransaction(self)

    @contextmanager
    def _ddl(self) -> Iterator[SqlTransaction]:
        tx = self.begin()
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        tx.commit()

    def create_schema(self) -> None:
        """CREATE TABLE IF NOT EXISTS for every table, and the counter rows."""
        types = {"K": self.dialect.key_type, "T": self.dialect.text_type, "B": self.dialect.blob_type,
                 "I": self.dialect.int_type}  # fmt: skip
        with self._ddl() as tx:
            for table, (declared, declared_key) in SCHEMA.items():
                columns, key = declared, declared_key
                if self.namespace is not None:
                    columns, key = (("ns", "K"), *declared), ("ns", *declared_key)
                cols = ", ".join(f"{name} {types[role]}" for name, role in columns)
                tx._exec(
                    f"CREATE TABLE IF NOT EXISTS {self.prefix}{table} "
                    f"({cols}, PRIMARY KEY ({', '.join(key)}))" + self.dialect.create_table_suffix()
                )
            for name in COUNTERS:
                tx._insert("counters", ("name", "value"), (name, 0))

    def readiness(self) -> None:
        tx = self.begin()
        try:
            tx._one("SELECT 1")
        finally:
            tx.rollback()

    def drop_namespace(self) -> None:
        """``impls.saga.NamespacedSagaBackend``: delete this namespace's rows of every table (all
        rows, when the tables are this backend's own), in one transaction."""
        with self._ddl() as tx:
            for table in SCHEMA:
                tx._exec(f"DELETE FROM {tx._t(table)}{tx._where_ns}", tx._ns)

    def namespaces(self) -> list[str]:
        """The ``ns`` values with rows in any table (none for tables of this backend's own)."""
        if self.namespace is None:
            return []
        union = " UNION ".join(f"SELECT ns FROM {self.prefix}{table}" for table in SCHEMA)
        tx = self.begin()
        try:
            return sorted(str(row[0]) for row in tx._all(union))
        finally:
            tx.rollback()

    def close(self) -> None:
        with suppress(Exception):
            self.connection.close()
        if self._on_close is not None:
            self._on_close()


__all__ = ["SCHEMA", "SqlSagaBackend", "SqlTransaction", "placeholders"]
