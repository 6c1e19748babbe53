"""SQLite dialect and the embedded saga backend (``BEGIN IMMEDIATE``, one database per namespace).

``BEGIN IMMEDIATE`` takes the database's write lock when the transaction starts, so every unit is
serial and ``FOR UPDATE`` is not needed (SQLite has none). ``SQLITE_BUSY`` before COMMIT is a
definite rollback; an I/O error while committing is an unknown outcome.
"""

from __future__ import annotations

import sqlite3

from impls.saga._backend import SagaBackendErrorKind, SagaCapabilities

from ._saga import SqlSagaBackend


class SqliteDialect:
    placeholder = "?"
    key_type = "TEXT"
    text_type = "TEXT"
    blob_type = "BLOB"
    int_type = "INTEGER"
    for_update = ""
    begin = "BEGIN IMMEDIATE"
    update_returning = sqlite3.sqlite_version_info >= (3, 35, 0)

    def insert_ignore(self, table: str, columns: tuple[str, ...]) -> str:
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING"

    def classify(self, error: BaseException, *, during_commit: bool) -> SagaBackendErrorKind:
        if isinstance(error, sqlite3.OperationalError):
            text = str(error).lower()
            if "locked" in text or "busy" in text:
                return SagaBackendErrorKind.ROLLED_BACK
            return SagaBackendErrorKind.OUTCOME_UNKNOWN if during_commit else SagaBackendErrorKind.UNAVAILABLE
        if isinstance(error, sqlite3.DatabaseError) and during_commit:
            return SagaBackendErrorKind.OUTCOME_UNKNOWN
        return SagaBackendErrorKind.ROLLED_BACK

    def error_code(self, error: BaseException) -> str | None:
        name = getattr(error, "sqlite_errorname", None)
        return name if isinstance(name, str) else None

    def create_table_suffix(self) -> str:
        return ""


SQLITE = SqliteDialect()


def open_sqlite_saga_backend(namespace: str, path: str | None = None) -> SqlSagaBackend:
    """A fresh in-memory database per namespace, or a file at ``path`` (durable)."""
    connection = sqlite3.connect(path or ":memory:", isolation_level=None, check_same_thread=False)
    return SqlSagaBackend(
        connection,
        SQLITE,
        capabilities=SagaCapabilities(fenced_timers=True, row_locks=False, durable=path is not None),
    )
