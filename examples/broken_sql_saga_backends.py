"""The bugs of ``examples.broken_saga_backends`` planted in the SQL saga backend on PostgreSQL and
MariaDB: the harness must catch them on real engines, with real transactions, too.

Each bug changes one or two methods of ``impls.sql.SqlTransaction``; everything else is the
shared SQL, so the planted bug is the only thing to find. Factories are ``SagaBackendFactory``
values (``(namespace) -> SagaBackend``), one per engine::

    conformance run --suite saga \\
        --saga-backend examples.broken_sql_saga_backends:postgres_timer_ignores_fencing

==========================  ===========  =========================================================
bug                         rule broken  how it is planted in SQL
==========================  ===========  =========================================================
gate_keyed_on_command_id    S-PART-03    the gate row's key column holds the command id, so a
                                         lookup by effect id misses and a new attempt runs again
timer_ignores_fencing       S-TIMER-02   renew, release and complete first read the timer's
                                         current token and use it instead of the caller's
outbox_outside_transaction  S-ORCH-02    the command outbox row is written by a second
                                         connection in its own transaction once the unit has
                                         ended, whatever became of the unit
==========================  ===========  =========================================================

``BROKEN_SQL_SAGA_BACKENDS`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from conformance.services import mysql_params, pg_dsn
from impls.saga import CommandOutboxRow, GateRow
from impls.sql._mysql import MysqlEngine
from impls.sql._postgres import PostgresEngine
from impls.sql._saga import SqlTransaction
from impls.sql._server import Engine, ServerSagaBackend


class GateKeyedOnCommandId(SqlTransaction):
    """S-PART-03: the gate's unique key is filled with ``command_id``."""

    def insert_gate(self, row: GateRow) -> bool:
        return super().insert_gate(attrs.evolve(row, effect_id=row.command_id))


class TimerIgnoresFencing(SqlTransaction):
    """S-TIMER-02: the fenced writes compare against the token they just read, not the caller's."""

    def _current(self, timer_id: str, token: int) -> int:
        row = self.load_timer(timer_id)
        return token if row is None or row.lease is None else row.lease.token

    def renew_timer(self, timer_id: str, token: int, now_ms: int, expires_ms: int) -> bool:
        return super().renew_timer(timer_id, self._current(timer_id, token), now_ms, expires_ms)

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return super().release_timer(timer_id, self._current(timer_id, token), now_ms)

    def complete_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return super().complete_timer(timer_id, self._current(timer_id, token), now_ms)


class OutboxOutsideTransaction(SqlTransaction):
    """S-ORCH-02: the outbox row is kept aside and written, once the unit has ended (committed,
    rolled back or lost), by another connection in a transaction of its own."""

    def __init__(self, backend: ServerSagaBackend) -> None:
        super().__init__(backend)
        self._aside: list[CommandOutboxRow] = []

    def append_command(self, row: CommandOutboxRow) -> bool:
        if self.load_command(row.command_id) is not None:
            return False
        self._aside.append(row)
        return True

    def _write_aside(self) -> None:
        backend = self._b
        assert isinstance(backend, BrokenSqlBackend)
        rows, self._aside = self._aside, []
        for row in rows:
            _until_applied(backend.side(), row)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._write_aside()

    def rollback(self) -> None:
        super().rollback()
        self._write_aside()


#: How many times the side write runs when its own database refuses it (other sessions writing the
#: shared tables: PostgreSQL's serialization failures, MariaDB's lock waits).
SIDE_ATTEMPTS = 20


def _until_applied(side: ServerSagaBackend, row: CommandOutboxRow) -> None:
    """The outbox row in a transaction of its own, run again while the database refuses it
    (``ServerSagaBackend.until_applied``, backing off): the planted bug is the write outside the
    unit, and nothing else. Raised out of the unit's COMMIT instead, a refusal would report a COMMIT
    that applied as a definite rollback, a second bug that contention alone brings out (a run beside
    another on one server reported S-START-01: the runtime ran the start again on its own committed
    rows; docs/faults.md)."""
    side.until_applied(lambda tx: tx.append_command(row), SIDE_ATTEMPTS)


class BrokenSqlBackend(ServerSagaBackend):
    """A server backend whose transactions are one of the broken classes above."""

    def __init__(self, engine: Engine, namespace: str, transaction: type[SqlTransaction]) -> None:
        self.transaction = transaction
        self._namespace = namespace
        self._side: ServerSagaBackend | None = None
        super().__init__(engine, namespace)

    def side(self) -> ServerSagaBackend:
        """A second, correct backend on the same namespace: another connection, another transaction."""
        if self._side is None:
            self._side = ServerSagaBackend(self.engine, self._namespace)
        return self._side

    def close(self) -> None:
        if self._side is not None:
            self._side.close()
        super().close()


ENGINES: dict[str, Callable[[], Engine]] = {
    "postgres": lambda: PostgresEngine(pg_dsn(), lock_timeout_ms=1000),
    "mysql": lambda: MysqlEngine(mysql_params(), lock_wait_timeout_s=1),
}


def _factory(engine: str, transaction: type[SqlTransaction]) -> Callable[[str], BrokenSqlBackend]:
    def open_broken(namespace: str) -> BrokenSqlBackend:
        return BrokenSqlBackend(ENGINES[engine](), namespace, transaction)

    return open_broken


postgres_gate_keyed_on_command_id = _factory("postgres", GateKeyedOnCommandId)
postgres_timer_ignores_fencing = _factory("postgres", TimerIgnoresFencing)
postgres_outbox_outside_transaction = _factory("postgres", OutboxOutsideTransaction)
mysql_gate_keyed_on_command_id = _factory("mysql", GateKeyedOnCommandId)
mysql_timer_ignores_fencing = _factory("mysql", TimerIgnoresFencing)
mysql_outbox_outside_transaction = _factory("mysql", OutboxOutsideTransaction)

BROKEN_SQL_SAGA_BACKENDS: dict[str, str] = {
    f"{engine}_{bug}": rule
    for engine in ENGINES
    for bug, rule in (
        ("gate_keyed_on_command_id", "S-PART-03"),
        ("timer_ignores_fencing", "S-TIMER-02"),
        ("outbox_outside_transaction", "S-ORCH-02"),
    )
}
