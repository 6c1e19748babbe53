"""The seam between the shared saga SQL and one engine: placeholders, types, locks, errors."""

from __future__ import annotations

from typing import Any, Protocol

from impls.saga._backend import SagaBackendErrorKind


class Dialect(Protocol):
    #: the driver's placeholder: "?" (sqlite3) or "%s" (psycopg, PyMySQL)
    placeholder: str
    #: column types: keys (indexed text), free text, blobs, integers
    key_type: str
    text_type: str
    blob_type: str
    int_type: str
    #: appended to a locking read: " FOR UPDATE", or "" where BEGIN already serializes (SQLite)
    for_update: str
    #: the statement opening a write transaction ("BEGIN IMMEDIATE", "BEGIN", "START TRANSACTION")
    begin: str
    #: whether ``UPDATE ... RETURNING`` exists (PostgreSQL, SQLite >= 3.35; not MariaDB/MySQL): an
    #: increment read back is then one statement, one round trip, instead of two
    update_returning: bool

    def insert_ignore(self, table: str, columns: tuple[str, ...]) -> str:
        """An INSERT that writes nothing (rowcount 0) when a unique key is taken."""
        ...

    def classify(self, error: BaseException, *, during_commit: bool) -> SagaBackendErrorKind:
        """What a driver exception means for the transaction it happened in."""
        ...

    def error_code(self, error: BaseException) -> str | None:
        """The engine's code for a driver exception ("SQLSTATE 40001", "error 1213"), or None:
        put in a ``SagaBackendError``'s detail so an error that escapes a run names its cause."""
        ...

    def create_table_suffix(self) -> str:
        """Appended to CREATE TABLE (engine options), usually ""."""
        ...


def failure(what: str, dialect: Dialect, error: BaseException) -> str:
    """``what`` failed, with the engine's code or else the driver's exception class: no message
    text (it may name tables, keys or statements), only what says which kind of failure it was."""
    return f"{what} ({dialect.error_code(error) or type(error).__name__})"


def placeholders(dialect: Dialect, count: int) -> str:
    return ", ".join([dialect.placeholder] * count)


Params = tuple[Any, ...]
