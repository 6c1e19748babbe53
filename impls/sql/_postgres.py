"""PostgreSQL dialect and saga backend (psycopg 3), on the shared tables of ``_server``.

Transactions are ``BEGIN ISOLATION LEVEL SERIALIZABLE``: SSI makes every unit behave as if
units ran one at a time, whatever the runtime reads without a lock (the quota, the
retirement reference check); the ``lock=True`` reads still take ``FOR UPDATE`` row locks
(route generations, the catalog's definition row, instances, timers, gates), which turns
most conflicts into waits instead of serialization failures. ``lock_timeout`` bounds every
wait. Keys and text are ``COLLATE "C"``: byte order is code point order, so every
``ORDER BY`` matches the model's Python ordering.

Keys are B-tree entries of at most 2704 bytes; a table whose declared key could be wider (four
200-character names, an unbounded reference id) is keyed by a unique index on the SHA-256 of
its key columns instead.

Error classes (SQLSTATE), decided here and only here:

* before COMMIT was sent, every failure is ``ROLLED_BACK``: ``40001`` serialization failure,
  ``40P01`` deadlock, ``55P03`` lock timeout, ``57014`` statement timeout, ``23505`` a key
  taken in a race, a dropped session (the server rolls back what it loses);
* a COMMIT answered with a class 40 error (but ``40003``), a class 23 error (a deferred
  constraint) or ``25P02`` is ``ROLLED_BACK``: the server refused it;
* anything else while COMMIT was in flight (a lost connection has no SQLSTATE; ``57P01`` is
  the session terminated) is ``OUTCOME_UNKNOWN``.

A COMMIT that the server answers with ``ROLLBACK`` (the transaction had failed) is raised as
``InFailedSqlTransaction``: never reported as committed.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

from impls.endpoints import pg_dsn
from impls.saga._backend import SagaBackendErrorKind

from ._saga import SCHEMA
from ._server import NS_CHARS, Contention, ServerSagaBackend

NAME_CHARS = 200  # the model's longest name (model.saga._values.name_validator)

# Session settings sent with the startup packet (no extra round trip): bound every lock
# wait, every statement, and a transaction a crashed worker left open.
LOCK_TIMEOUT_MS = 2000
SESSION_OPTIONS = "-c statement_timeout=30000 -c idle_in_transaction_session_timeout=60000"
CONNECT_TIMEOUT_S = 5

# Errors the server answers a COMMIT with when it has rolled the transaction back.
_COMMIT_REFUSED_CLASSES = frozenset({"40", "23"})  # serialization/deadlock, deferred constraint
_COMMIT_REFUSED_STATES = frozenset({"25P02"})  # in failed transaction (see ``check``)
_COMPLETION_UNKNOWN = "40003"  # statement_completion_unknown: class 40, yet not a rollback


def sqlstate(error: BaseException) -> str | None:
    return error.sqlstate if isinstance(error, psycopg.Error) else None


class PostgresDialect:
    placeholder = "%s"
    key_type = 'TEXT COLLATE "C"'
    text_type = 'TEXT COLLATE "C"'
    blob_type = "BYTEA"
    int_type = "BIGINT"
    for_update = " FOR UPDATE"
    begin = "BEGIN ISOLATION LEVEL SERIALIZABLE"
    update_returning = True

    def insert_ignore(self, table: str, columns: tuple[str, ...]) -> str:
        marks = ", ".join("%s" for _ in columns)
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING"

    def classify(self, error: BaseException, *, during_commit: bool) -> SagaBackendErrorKind:
        """S-TX-01/S-TX-02: definite rollback, or unknown outcome once COMMIT was sent."""
        state = sqlstate(error)
        if during_commit:
            # The server answered the COMMIT with an error that ends the transaction unapplied.
            if (
                state is not None
                and state != _COMPLETION_UNKNOWN
                and (state[:2] in _COMMIT_REFUSED_CLASSES or state in _COMMIT_REFUSED_STATES)
            ):
                return SagaBackendErrorKind.ROLLED_BACK
            return SagaBackendErrorKind.OUTCOME_UNKNOWN
        return SagaBackendErrorKind.ROLLED_BACK

    def error_code(self, error: BaseException) -> str | None:
        state = sqlstate(error)
        return None if state is None else f"SQLSTATE {state}"

    def create_table_suffix(self) -> str:
        return ""


POSTGRES = PostgresDialect()

_TYPES = {"K": POSTGRES.key_type, "T": POSTGRES.text_type, "B": POSTGRES.blob_type, "I": POSTGRES.int_type}
# Serializes concurrent first-time DDL of several processes (CREATE TABLE IF NOT EXISTS races).
_DDL_LOCK_KEY = 0x5A6A_7E7A
# A B-tree entry holds at most 2704 bytes. Worst cases: a name is 200 characters of 4 bytes
# (plus a 4-byte length), the ns column 64 ASCII bytes, an integer 8 bytes.
MAX_KEY_BYTES = 2600
_KEY_BYTES = {"K": 4 + NAME_CHARS * 4, "I": 8}


def _digest_function(prefix: str) -> str:
    # sha256 of the UTF-8 text; convert_to() is only STABLE (it looks the encoding up by name),
    # but with a fixed encoding it is immutable, which an index expression needs.
    return (
        f"CREATE OR REPLACE FUNCTION {prefix}key_digest(text) RETURNS bytea LANGUAGE sql IMMUTABLE "
        "PARALLEL SAFE AS $$ SELECT sha256(convert_to($1, 'UTF8')) $$"
    )


def create_table_statements(prefix: str) -> list[str]:
    statements = [_digest_function(prefix)]
    for table, (columns, key) in SCHEMA.items():
        roles = dict(columns)
        cols = ", ".join(
            f"{name} {_TYPES[role]}{' NOT NULL' if name in key else ''}" for name, role in columns
        )
        name, ns = f"{prefix}{table}", f"ns {POSTGRES.key_type} NOT NULL"
        if 4 + NS_CHARS + sum(_KEY_BYTES[roles[column]] for column in key) <= MAX_KEY_BYTES:
            primary = f"PRIMARY KEY (ns, {', '.join(key)})"
            statements.append(f"CREATE TABLE IF NOT EXISTS {name} ({ns}, {cols}, {primary})")
            continue
        # Too wide for a B-tree entry: unique on a digest of the key (names are printable, so the
        # separator keeps the parts apart), looked up through an index on its leading columns.
        parts = " || chr(31) || ".join(f"{c}::text" if roles[c] == "I" else c for c in key)
        statements += [
            f"CREATE TABLE IF NOT EXISTS {name} ({ns}, {cols})",
            f"CREATE UNIQUE INDEX IF NOT EXISTS {name}_key ON {name} (ns, {prefix}key_digest({parts}))",
            f"CREATE INDEX IF NOT EXISTS {name}_lookup ON {name} (ns, {', '.join(key[:3])})",
        ]
    return statements


class PostgresEngine:
    def __init__(self, dsn: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        self._dsn = dsn
        self._lock_timeout_ms = lock_timeout_ms

    @property
    def dialect(self) -> PostgresDialect:
        return POSTGRES

    @property
    def endpoint(self) -> str:
        # Pooled sessions are only shared between backends with the same session settings.
        return f"{self._dsn}#lock_timeout={self._lock_timeout_ms}"

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            self._dsn,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            options=f"{SESSION_OPTIONS} -c lock_timeout={self._lock_timeout_ms}",
            application_name="ratchet-saga",
        )

    def usable(self, raw: psycopg.Connection[Any]) -> bool:
        return not raw.closed and not raw.broken

    def in_transaction(self, raw: psycopg.Connection[Any]) -> bool:
        status = raw.info.transaction_status
        return status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)

    def session_id(self, raw: psycopg.Connection[Any]) -> int:
        return int(raw.info.backend_pid)

    def kill_session(self, session_id: int) -> None:
        with psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as admin:
            # With a timeout, pg_terminate_backend waits until the session has really ended.
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (session_id,))

    def lost_connection(self) -> Exception:
        return psycopg.OperationalError("server closed the connection unexpectedly")

    def contention(self, kind: Contention) -> Exception:
        if kind is Contention.DEADLOCK:
            return pg_errors.DeadlockDetected("deadlock detected")
        if kind is Contention.LOCK_TIMEOUT:
            return pg_errors.LockNotAvailable("canceling statement due to lock timeout")
        return pg_errors.SerializationFailure("could not serialize access due to read/write dependencies")

    def create_tables(self, raw: psycopg.Connection[Any], prefix: str) -> None:
        with raw.transaction():
            raw.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
            for statement in create_table_statements(prefix):
                raw.execute(statement)

    def ddl_fingerprint(self) -> str:
        return "\n".join(create_table_statements(""))

    def durable(self, raw: psycopg.Connection[Any]) -> bool:
        row = raw.execute(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
            "current_setting('full_page_writes')"
        ).fetchone()
        # synchronous_commit 'local', 'remote_write', ... flush locally too; only 'off' does not.
        return row is not None and row[0] == "on" and row[1] != "off" and row[2] == "on"

    def check(self, raw_cursor: psycopg.Cursor[Any], sql: str) -> None:
        # COMMIT of a failed transaction is answered "ROLLBACK" without an error.
        if sql == "COMMIT" and raw_cursor.statusmessage == "ROLLBACK":
            raise pg_errors.InFailedSqlTransaction("COMMIT rolled back a failed transaction")


def open_postgres_saga_backend(
    namespace: str, endpoint: str | None = None, *, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> ServerSagaBackend:
    """The saga backend for ``namespace`` on PostgreSQL (``RATCHET_PG_DSN`` or the DSN ``endpoint``)."""
    return ServerSagaBackend(PostgresEngine(endpoint or pg_dsn(), lock_timeout_ms), namespace)


__all__ = ["POSTGRES", "PostgresDialect", "PostgresEngine", "open_postgres_saga_backend"]
