"""SQL saga backends (on SQLite) that answer garbage for a stored row that does not decode (S-TX-03).

Each bug changes one read of ``impls.sql.SqlTransaction``; every other read and every write is
the shared SQL, and a well-formed row reads as it should, so only a malformed stored row (planted
by the saga suite's stored-row audit through ``impls.api.SagaInspector``) tells them apart::

    conformance run --suite saga --saga-backend examples.corrupt_saga_rows:timer_read_as_absent

==========================  ===========  =========================================================
bug                         rule broken  what a malformed row reads as
==========================  ===========  =========================================================
timer_read_as_absent        S-TX-03      a silent default: ``load_timer`` answers None (no such
                                         timer) and ``list_timers`` skips the row
journal_decode_error_leaks  S-TX-03      a foreign exception: the decoder's own ValueError or
                                         TypeError leaves ``journal`` instead of CORRUPT
==========================  ===========  =========================================================

``CORRUPT_SAGA_ROWS`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

import sqlite3

from impls.saga import JournalRow, SagaBackendError, SagaBackendErrorKind, SagaCapabilities, TimerRow
from impls.sql import SqlSagaBackend, SqlTransaction
from impls.sql._sqlite import SQLITE


def _corrupt(error: SagaBackendError) -> bool:
    return error.kind is SagaBackendErrorKind.CORRUPT


class TimerReadAsAbsent(SqlTransaction):
    """S-TX-03: a timer row that does not decode is read as no timer at all."""

    def load_timer(self, timer_id: str, *, lock: bool = False) -> TimerRow | None:
        try:
            return super().load_timer(timer_id, lock=lock)
        except SagaBackendError as error:
            if not _corrupt(error):
                raise
            return None

    def list_timers(self) -> tuple[TimerRow, ...]:
        try:
            return super().list_timers()
        except SagaBackendError as error:
            if not _corrupt(error):
                raise
            return ()


class JournalDecodeErrorLeaks(SqlTransaction):
    """S-TX-03: the journal's decoding error leaves as the decoder raised it."""

    def journal(self, saga_id: str | None = None) -> tuple[JournalRow, ...]:
        try:
            return super().journal(saga_id)
        except SagaBackendError as error:
            if _corrupt(error) and isinstance(error.__cause__, (ValueError, TypeError)):
                raise error.__cause__ from None
            raise


class _Backend(SqlSagaBackend):
    transaction: type[SqlTransaction] = SqlTransaction

    def begin(self) -> SqlTransaction:
        return self.transaction(self)


def _backend(transaction: type[SqlTransaction]) -> SqlSagaBackend:
    # As impls.sql.open_sqlite_saga_backend: one in-memory database per namespace.
    connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    backend = type(f"{transaction.__name__}Backend", (_Backend,), {"transaction": transaction})
    created: SqlSagaBackend = backend(
        connection, SQLITE, capabilities=SagaCapabilities(fenced_timers=True, row_locks=False, durable=False)
    )
    return created


def timer_read_as_absent(namespace: str) -> SqlSagaBackend:
    return _backend(TimerReadAsAbsent)


def journal_decode_error_leaks(namespace: str) -> SqlSagaBackend:
    return _backend(JournalDecodeErrorLeaks)


CORRUPT_SAGA_ROWS = {
    "timer_read_as_absent": "S-TX-03",
    "journal_decode_error_leaks": "S-TX-03",
}
