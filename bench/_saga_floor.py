"""The raw SQL floor: what each SQL engine does for a trivial transaction on one connection, in the
same run as Ratchet's saga units.

A saga unit is one transaction of a dozen or so statements; what a statement costs is the
server's, the driver's and this machine's business. So beside every unit-rate run the bench
measures the fastest the same driver goes, on a connection opened exactly as the backend opens
its own (``impls.sql``'s engine ``connect``: psycopg 3 or PyMySQL, autocommit, the same session
settings; sqlite3 on an in-memory database), each transaction opened with the dialect's own
``BEGIN`` statement (``BEGIN IMMEDIATE``, ``BEGIN ISOLATION LEVEL SERIALIZABLE``,
``START TRANSACTION`` under a SERIALIZABLE session):

* a trivial transaction: BEGIN; ``SELECT 1``; COMMIT (3 statements);
* per unit, a transaction with as many statements as one unit makes: BEGIN, ``SELECT 1`` as many
  times as needed, one ``UPDATE`` of a row of the floor's own table (so that COMMIT has a write to
  make durable, as the unit's has), COMMIT. Ratchet's unit rate is compared with this one.

Every ``SELECT`` result is fetched, as the backend fetches its own. The floor's table,
``ratchet_bench_floor``, holds one row per floor, deleted when the floor closes. A server's name
carries the durability it reported (PostgreSQL's ``fsync`` and ``synchronous_commit``, MariaDB's
``innodb_flush_log_at_trx_commit``): what a COMMIT costs depends on it more than on anything else.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from typing import Any

import attrs

from bench._figures import Spread, Stopwatch

FLOOR_TABLE = "ratchet_bench_floor"
TRIVIAL_STATEMENTS = 3  # BEGIN, SELECT 1, COMMIT


@attrs.frozen
class SqlProbe:
    name: str
    statements: int  # per transaction, BEGIN and COMMIT included
    operation: Callable[[], None]
    shaped_like: str | None = None  # the unit whose statement count it has


@attrs.frozen
class SagaFloorProbe:
    name: str
    statements: int
    per_second: Spread  # transactions per second
    cpu_us_per_op: Spread  # this process's CPU time per transaction: the driver's share
    shaped_like: str | None


@attrs.frozen
class SagaFloor:
    backend: str
    server: str
    probes: tuple[SagaFloorProbe, ...]

    def shaped_like(self, unit: str) -> SagaFloorProbe | None:
        return next((p for p in self.probes if p.shaped_like == unit), None)


def sync_timed_loop(operation: Callable[[], None], seconds: float) -> Stopwatch:
    """``operation`` back to back for ``seconds``; the stopwatch holds count, rate and CPU time."""
    watch = Stopwatch(seconds, minimum=3)
    while watch.running():
        operation()
        watch.tick()
    return watch


class SqlFloor:
    """One raw DB-API connection of a saga backend's driver, and the probes run on it."""

    def __init__(self, connection: Any, begin: str, placeholder: str, server: str) -> None:
        self._connection = connection
        self._cursor = connection.cursor()
        self._begin = begin
        self.server = server
        self._key = f"f{secrets.token_hex(8)}"  # this floor's own row: no lock shared with anyone
        self._placeholder = placeholder
        self._update = f"UPDATE {FLOOR_TABLE} SET v = v + 1 WHERE k = {placeholder}"
        self._execute(f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} (k VARCHAR(64) PRIMARY KEY, v BIGINT)")
        self._execute(f"INSERT INTO {FLOOR_TABLE} (k, v) VALUES ({placeholder}, 0)", (self._key,))

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self._cursor.execute(sql, params)

    def _select_one(self) -> None:
        self._cursor.execute("SELECT 1")
        self._cursor.fetchall()

    def trivial(self) -> None:
        self._execute(self._begin)
        self._select_one()
        self._execute("COMMIT")

    def shaped(self, statements: int) -> Callable[[], None]:
        """BEGIN, ``statements - 3`` x SELECT 1, one UPDATE, COMMIT."""
        selects = max(0, statements - 3)

        def transaction() -> None:
            self._execute(self._begin)
            for _ in range(selects):
                self._select_one()
            self._execute(self._update, (self._key,))
            self._execute("COMMIT")

        return transaction

    def probes(self, unit_statements: dict[str, int]) -> list[SqlProbe]:
        found = [SqlProbe("BEGIN; SELECT 1; COMMIT", TRIVIAL_STATEMENTS, self.trivial)]
        for unit, statements in unit_statements.items():
            n = max(statements, TRIVIAL_STATEMENTS)
            found.append(
                SqlProbe(
                    f"BEGIN; {n - 3} x SELECT 1; UPDATE; COMMIT (a {unit}'s statements)",
                    n,
                    self.shaped(n),
                    unit,
                )
            )
        return found

    def close(self) -> None:
        try:
            self._execute(f"DELETE FROM {FLOOR_TABLE} WHERE k = {self._placeholder}", (self._key,))
        finally:
            self._connection.close()


def _sqlite() -> SqlFloor:
    from impls.sql._sqlite import SQLITE

    connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    return SqlFloor(connection, SQLITE.begin, SQLITE.placeholder, f"SQLite {sqlite3.sqlite_version}")


def _postgres() -> SqlFloor:
    from conformance.services import pg_dsn
    from impls.sql._postgres import POSTGRES, PostgresEngine

    connection = PostgresEngine(pg_dsn()).connect()
    try:

        def show(name: str) -> str:
            row = connection.execute(f"SHOW {name}").fetchone()
            return str(row[0]).split()[0] if row else "?"

        durability = f"fsync {show('fsync')}, synchronous_commit {show('synchronous_commit')}"
        server = f"PostgreSQL {show('server_version')} ({durability})"
        return SqlFloor(connection, POSTGRES.begin, POSTGRES.placeholder, server)
    except BaseException:
        connection.close()
        raise


def _mysql() -> SqlFloor:
    from conformance.services import mysql_params
    from impls.sql._mysql import MYSQL, MysqlEngine

    connection = MysqlEngine(mysql_params()).connect()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit")
            row = cursor.fetchone()
        version = str(row[0]) if row else "?"
        flush = f"innodb_flush_log_at_trx_commit {row[1] if row else '?'}"
        product = "MariaDB" if "mariadb" in version.lower() else "MySQL"
        server = f"{product} {version.split('-')[0]} ({flush})"
        return SqlFloor(connection, MYSQL.begin, MYSQL.placeholder, server)
    except BaseException:
        connection.close()
        raise


SQL_FLOORS: dict[str, Callable[[], SqlFloor]] = {"sqlite": _sqlite, "postgres": _postgres, "mysql": _mysql}


def open_sql_floor(backend: str) -> SqlFloor | None:
    """The raw floor of saga backend ``backend``'s driver; None for the memory backend (no SQL)."""
    opener = SQL_FLOORS.get(backend)
    return opener() if opener is not None else None
