"""MariaDB/MySQL dialect and saga backend (PyMySQL, InnoDB), on the shared tables of ``_server``.

Sessions run ``SERIALIZABLE``: InnoDB then reads with shared locks, so a unit that reads
without ``lock=True`` (the quota, the retirement reference check) still conflicts with a
writer instead of deciding on a stale snapshot; conflicts end as a deadlock (1213), which
InnoDB resolves by rolling one transaction back. ``lock=True`` reads are
``SELECT ... FOR UPDATE``. ``innodb_lock_wait_timeout`` bounds every wait; InnoDB rolls back
only the *statement* on a lock timeout, and the runtime then rolls back the transaction.

Text keys are ``utf8mb4`` with the binary, no-pad collation (``utf8mb4_nopad_bin``; MySQL 8:
``utf8mb4_0900_bin``): case, accents and trailing spaces all count, and ``ORDER BY`` is code
point order, as in the model. InnoDB keys are at most 3072 bytes; a table whose declared key
is wider (four 200-character names) is keyed by a stored SHA-256 of its key columns instead,
and its key columns past the lookup index are unbounded text (a reference id has no limit).
The connection reports *matched* rows (``CLIENT.FOUND_ROWS``), so a guarded ``UPDATE`` that
rewrites a value unchanged still counts; ``INSERT IGNORE`` reports a taken key as 0 rows, and
any warning other than a duplicate key (a value coerced by IGNORE) fails the statement.

Error codes, decided here and only here: 1213 deadlock, 1205 lock wait timeout, 1062/1586 a
key taken in a race, 1020 a changed record -> ``ROLLED_BACK``; anything else while COMMIT was
in flight (2013 lost connection, 2006 gone away, 1927 killed, ``InterfaceError``) ->
``OUTCOME_UNKNOWN``; anything else before COMMIT -> ``ROLLED_BACK``.
"""

from __future__ import annotations

import time
from typing import Any

import pymysql
from pymysql.constants import CLIENT, SERVER_STATUS

from impls.endpoints import MysqlParams, mysql_dsn, mysql_params
from impls.saga._backend import SagaBackendErrorKind

from ._saga import SCHEMA
from ._server import NS_CHARS, Contention, ServerSagaBackend

CONNECT_TIMEOUT_S = 5
# A COMMIT that gets no answer at all must end as OUTCOME_UNKNOWN, not hang the worker.
READ_TIMEOUT_S = 30
LOCK_WAIT_TIMEOUT_S = 2
MAX_KEY_BYTES = 3072  # InnoDB, DYNAMIC row format

_REFUSED_CODES = frozenset({1213, 1205, 1062, 1586, 1020})
_DUPLICATE_KEY = 1062

NS_TYPE = f"VARCHAR({NS_CHARS}) CHARACTER SET ascii COLLATE ascii_bin"
NAME_CHARS = 200  # the model's longest name (model.saga._values.name_validator)


def error_code(error: BaseException) -> int | None:
    if isinstance(error, pymysql.err.MySQLError) and error.args and isinstance(error.args[0], int):
        return int(error.args[0])
    return None


def operational_error(code: int, message: str) -> Exception:
    """PyMySQL's own exception for ``code``, as the server would send it (the fault seam)."""
    error: Exception = pymysql.err.OperationalError(code, message)
    return error


class MysqlDialect:
    placeholder = "%s"
    key_type = f"VARCHAR({NAME_CHARS}) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
    text_type = "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
    blob_type = "LONGBLOB"
    int_type = "BIGINT"
    for_update = " FOR UPDATE"
    begin = "START TRANSACTION"
    update_returning = False

    def insert_ignore(self, table: str, columns: tuple[str, ...]) -> str:
        marks = ", ".join("%s" for _ in columns)
        return f"INSERT IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})"

    def classify(self, error: BaseException, *, during_commit: bool) -> SagaBackendErrorKind:
        """S-TX-01/S-TX-02: definite rollback, or unknown outcome once COMMIT was sent."""
        if error_code(error) in _REFUSED_CODES:
            return SagaBackendErrorKind.ROLLED_BACK
        if during_commit:
            return SagaBackendErrorKind.OUTCOME_UNKNOWN
        return SagaBackendErrorKind.ROLLED_BACK

    def error_code(self, error: BaseException) -> str | None:
        code = error_code(error)
        return None if code is None else f"error {code}"

    def create_table_suffix(self) -> str:
        return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


MYSQL = MysqlDialect()


def _types(collation: str) -> dict[str, str]:
    return {
        "K": f"VARCHAR({NAME_CHARS}) CHARACTER SET utf8mb4 COLLATE {collation}",
        "T": f"LONGTEXT CHARACTER SET utf8mb4 COLLATE {collation}",
        "B": MYSQL.blob_type,
        "I": MYSQL.int_type,
    }


_KEY_BYTES = {"K": NAME_CHARS * 4, "I": 8}


def create_table_statements(prefix: str, collation: str) -> list[str]:
    types = _types(collation)
    statements = []
    for table, (columns, key) in SCHEMA.items():
        roles = dict(columns)
        hashed = NS_CHARS + sum(_KEY_BYTES[roles[name]] for name in key) > MAX_KEY_BYTES
        if hashed:
            # Key columns outside the lookup index need no bound at all (a reference id has none).
            roles.update({name: "T" for name in key[3:] if roles[name] == "K"})
        cols = ", ".join(
            f"{name} {types[roles[name]]}{' NOT NULL' if name in key else ''}" for name, _ in columns
        )
        if not hashed:
            keys = f"PRIMARY KEY (ns, {', '.join(key)})"
        else:
            # Too wide for an InnoDB key: unique on a digest of the key (names hold no NUL, and
            # only the last part may, so the separator keeps the parts apart), looked up
            # through a prefix index on the leading key columns.
            parts = ", ".join(("ns", *key))
            lookup = ", ".join(("ns", *(f"{name}(50)" if roles[name] == "K" else name for name in key[:3])))
            cols += f", row_key BINARY(32) AS (UNHEX(SHA2(CONCAT_WS(CHAR(0), {parts}), 256))) STORED"
            keys = f"UNIQUE KEY row_key (row_key), KEY lookup ({lookup})"
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {prefix}{table} (ns {NS_TYPE} NOT NULL, {cols}, {keys})"
            + MYSQL.create_table_suffix()
        )
    return statements


class MysqlEngine:
    def __init__(self, params: MysqlParams, lock_wait_timeout_s: int = LOCK_WAIT_TIMEOUT_S) -> None:
        self._params = params
        self._lock_wait_timeout_s = lock_wait_timeout_s
        # Pooled sessions are only shared between backends with the same session settings.
        self._endpoint = (
            f"mysql://{params.user}@{params.host}:{params.port}/{params.database}"
            f"#lock_wait_timeout={lock_wait_timeout_s}"
        )

    @property
    def dialect(self) -> MysqlDialect:
        return MYSQL

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def _connect(self, **options: Any) -> Any:
        p = self._params
        return pymysql.connect(
            host=p.host,
            port=p.port,
            user=p.user,
            password=p.password,
            database=p.database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            **options,
        )

    def connect(self) -> Any:
        raw = self._connect(
            client_flag=CLIENT.FOUND_ROWS,
            read_timeout=READ_TIMEOUT_S,
            write_timeout=READ_TIMEOUT_S,
            init_command="SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        )
        with raw.cursor() as cursor:
            cursor.execute(
                f"SET SESSION innodb_lock_wait_timeout = {int(self._lock_wait_timeout_s)}, "
                "sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
            )
        return raw

    def usable(self, raw: Any) -> bool:
        return bool(raw.open)

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS)

    def session_id(self, raw: Any) -> int:
        return int(raw.thread_id())

    def kill_session(self, session_id: int) -> None:
        admin = self._connect()
        try:
            with admin.cursor() as cursor:
                cursor.execute("KILL CONNECTION %s", (session_id,))
                # KILL marks the session; wait until the server has really let it go.
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    cursor.execute(
                        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (session_id,)
                    )
                    if cursor.fetchone() == (0,):
                        return
                    time.sleep(0.01)
        finally:
            admin.close()

    def lost_connection(self) -> Exception:
        return operational_error(2013, "Lost connection to MySQL server during query")

    def contention(self, kind: Contention) -> Exception:
        if kind is Contention.LOCK_TIMEOUT:
            return operational_error(1205, "Lock wait timeout exceeded; try restarting transaction")
        # InnoDB has no serialization-failure error: under SERIALIZABLE a conflict is a deadlock.
        return operational_error(1213, "Deadlock found when trying to get lock; try restarting transaction")

    def _collation(self, raw: Any) -> str:
        with raw.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
        return "utf8mb4_nopad_bin" if row and "mariadb" in str(row[0]).lower() else "utf8mb4_0900_bin"

    def create_tables(self, raw: Any, prefix: str) -> None:
        with raw.cursor() as cursor:
            for statement in create_table_statements(prefix, self._collation(raw)):
                cursor.execute(statement)

    def ddl_fingerprint(self) -> str:
        return "\n".join(create_table_statements("", "?"))

    def durable(self, raw: Any) -> bool:
        with raw.cursor() as cursor:
            cursor.execute("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")
            row = cursor.fetchone()
        # 1: the redo log is written and flushed at every COMMIT; 0 and 2 lose up to a second.
        return row is not None and int(row[0]) == 1

    def check(self, raw_cursor: Any, sql: str) -> None:
        if sql.startswith("INSERT IGNORE") and raw_cursor.warning_count:
            # IGNORE also turns coerced values into warnings; only a taken key may pass.
            for _level, code, message in raw_cursor.connection.show_warnings():
                if code != _DUPLICATE_KEY:
                    raise pymysql.err.DataError(code, message)


def open_mysql_saga_backend(
    namespace: str, endpoint: str | None = None, *, lock_wait_timeout_s: int = LOCK_WAIT_TIMEOUT_S
) -> ServerSagaBackend:
    """The saga backend for ``namespace`` on MariaDB/MySQL (``RATCHET_MYSQL_DSN`` or the DSN ``endpoint``)."""
    return ServerSagaBackend(
        MysqlEngine(mysql_params(endpoint or mysql_dsn()), lock_wait_timeout_s), namespace
    )


__all__ = ["MYSQL", "MysqlDialect", "MysqlEngine", "open_mysql_saga_backend"]
