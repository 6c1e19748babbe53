"""PostgreSQL dialect and saga backend (psycopg 3), on the shared tables of ``_server``.

Transactions are ``BEGIN ISOLATION LEVEL SERIALIZABLE``: SSI makes every unit behave as if
units ran one at a time, whatever the runtime reads without a lock (the quota, the
retirement reference check); the ``lock=True`` reads still take ``FOR UPDATE`` row locks
(route generations, the catalog's definition row, instances, timers, gates), which turns
most conflicts into waits instead of serialization failures. ``lock_timeout`` bounds every
wait. Keys and text are ``COLLATE "C"``: byte order is code point order, so every
``ORDER BY`` matches the model's Python ordering.

Error classes (SQLSTATE), decided here and only here:

* class 40 (``40001`` serialization failure, ``40P01`` deadlock), ``55P03`` lock timeout,
  ``57014`` statement timeout, class 23 (a key taken in a race), ``25P02`` (a failed
  transaction) -> ``ROLLED_BACK``: the server ended the transaction and nothing of it applied;
* anything else while COMMIT was in flight (a lost connection has no SQLSTATE; ``57P01`` is
  the session terminated) -> ``OUTCOME_UNKNOWN``;
* anything else before COMMIT -> ``ROLLED_BACK`` (the server rolls back a session it lost).

A COMMIT that the server answers with ``ROLLBACK`` (the transaction had failed) is raised as
``InFailedSqlTransaction``: never reported as committed.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from conformance.services import pg_dsn
from impls.saga._backend import SagaBackendErrorKind

from ._saga import SCHEMA
from ._server import Contention, ServerSagaBackend

# Session settings sent with the startup packet (no extra round trip): bound every lock
# wait, every statement, and a transaction a crashed worker left open.
SESSION_OPTIONS = " ".join(
    ("-c lock_timeout=2000", "-c statement_timeout=30000", "-c idle_in_transaction_session_timeout=60000")
)
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

    def create_table_suffix(self) -> str:
        return ""


POSTGRES = PostgresDialect()

_TYPES = {"K": POSTGRES.key_type, "T": POSTGRES.text_type, "B": POSTGRES.blob_type, "I": POSTGRES.int_type}
# Serializes concurrent first-time DDL of several processes (CREATE TABLE IF NOT EXISTS races).
_DDL_LOCK_KEY = 0x5A6A_7E7A


def create_table_statements(prefix: str) -> list[str]:
    statements = []
    for table, (columns, key) in SCHEMA.items():
        cols = ", ".join(f"{name} {_TYPES[role]}" for name, role in columns)
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {prefix}{table} (ns {POSTGRES.key_type} NOT NULL, {cols}, "
            f"PRIMARY KEY (ns, {', '.join(key)}))"
        )
    return statements


class PostgresEngine:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn

    @property
    def dialect(self) -> PostgresDialect:
        return POSTGRES

    @property
    def endpoint(self) -> str:
        return self._dsn

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            self.endpoint,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            options=SESSION_OPTIONS,
            application_name="ratchet-saga",
        )

    def namespace_key(self, namespace: str) -> str:
        return namespace  # TEXT holds any namespace as it is

    def usable(self, raw: psycopg.Connection[Any]) -> bool:
        return not raw.closed and not raw.broken

    def session_id(self, raw: psycopg.Connection[Any]) -> int:
        return int(raw.info.backend_pid)

    def kill_session(self, session_id: int) -> None:
        with psycopg.connect(self.endpoint, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as admin:
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

    def check(self, raw_cursor: psycopg.Cursor[Any], sql: str) -> None:
        # COMMIT of a failed transaction is answered "ROLLBACK" without an error.
        if sql == "COMMIT" and raw_cursor.statusmessage == "ROLLBACK":
            raise pg_errors.InFailedSqlTransaction("COMMIT rolled back a failed transaction")


def open_postgres_saga_backend(namespace: str, dsn: str | None = None) -> ServerSagaBackend:
    """The saga backend for ``namespace`` on PostgreSQL (``RATCHET_PG_DSN`` unless ``dsn``)."""
    return ServerSagaBackend(PostgresEngine(dsn or pg_dsn()), namespace)


__all__ = ["POSTGRES", "PostgresDialect", "PostgresEngine", "open_postgres_saga_backend"]
