"""Saga backends on a database server (PostgreSQL, MariaDB/MySQL): what the two engines share.

Theory of operation
-------------------
The SQL, the row codec and the transaction flow are ``_saga``'s; an engine module
(``_postgres``, ``_mysql``) adds its ``Dialect`` and an ``Engine``: how to connect, how to
create the tables, how to kill a session. This module adds what a shared, networked
database needs on top:

* **One set of tables for every namespace.** Rows carry an ``ns`` column
  (``SqlSagaBackend(namespace=...)``, the value from ``namespace_key``: short plain names as
  they are, any other as a digest); the tables are created once per process and endpoint,
  named ``saga_<digest>_<table>`` where the digest covers ``_saga.SCHEMA`` and the engine's
  DDL, so a changed schema never meets tables an older build created. Nothing is truncated
  between examples: every example works in namespaces of its own.
* **Connections die.** ``begin`` reconnects a connection that broke (the transaction on it
  is already gone on the server); closing a backend parks its idle connection in a small
  per-endpoint pool (``_pool``), so opening a namespace costs no handshake. A transaction that nobody
  ended is rolled back by the next ``begin`` (``_end_abandoned``): left, it poisoned the
  connection for good.
* **The driver door.** ``DriverConnection``/``DriverCursor`` are the only callers of the
  raw driver. They are also the fault seam (``DriverFaults``): the driver's own exception
  classes raised instead of a statement (serialization failure, deadlock, lock timeout) or
  around a *real* COMMIT (connection lost before it was sent: not applied; lost after it
  applied), and a hook run just before COMMIT is sent, which tests use to kill the session
  for real from a second connection (``ServerSagaBackend.kill_session``).
* **Classification is the dialect's** (``Dialect.classify``): a transaction the server
  rolled back (contention, lock timeout, a key taken in a race) is ``ROLLED_BACK``; a
  connection lost while COMMIT was in flight is ``OUTCOME_UNKNOWN`` and never a plain retry
  (S-TX-02): the runtime redelivers and the inbox/gate settle it by reading.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

import attrs

from impls.saga._backend import SagaBackendError, SagaBackendErrorKind, SagaCapabilities

from ._dialect import Dialect
from ._pool import Detached, park, take_idle
from ._saga import COUNTERS, SCHEMA, SqlSagaBackend, SqlTransaction

SERVER_CAPABILITIES = SagaCapabilities(fenced_timers=True, row_locks=True, durable=True)
# What a server that does not flush its commits (fsync=off, innodb-flush-log-at-trx-commit=2) offers.
NON_DURABLE_CAPABILITIES = SagaCapabilities(fenced_timers=True, row_locks=True, durable=False)

# Times opening a namespace writes its counter rows when the database refuses it (contention),
# pausing 5 ms doubling (at most 0.5 s) between tries: about 0.6 s of waiting in all.
OPEN_ATTEMPTS = 8
RETRY_BACKOFF_S = 0.005
RETRY_BACKOFF_CAP_S = 0.5


class Contention(enum.Enum):
    """Ways a server ends a transaction it will not let commit; each is a definite rollback."""

    SERIALIZATION_FAILURE = "serialization-failure"
    DEADLOCK = "deadlock"
    LOCK_TIMEOUT = "lock-timeout"


class CommitLoss(enum.Enum):
    """Where a connection is lost around a real COMMIT (S-TX-02)."""

    #: The connection drops before COMMIT reaches the server, which rolls back: not applied.
    BEFORE_SENT = "before-sent"
    #: COMMIT is sent and applies; the connection drops before its answer arrives: applied.
    AFTER_APPLIED = "after-applied"


@attrs.define
class DriverFaults:
    """Faults waiting at the driver door, each consumed once, in order.

    ``statements``: raised (as the engine's exception for that contention) instead of the
    next statement that is not BEGIN/COMMIT/ROLLBACK. ``commits``: what happens to the next
    COMMITs; a ``Contention`` there is the server refusing the COMMIT, as it does for a
    serialization failure or a deadlock (the transaction is rolled back for real and the error
    raised). ``before_commit``: run once, just before the next COMMIT is sent (real faults:
    kill the session from a second connection, cut the network).
    """

    statements: deque[Contention] = attrs.field(factory=deque)
    commits: deque[CommitLoss | Contention] = attrs.field(factory=deque)
    before_commit: Callable[[], None] | None = None


class Engine(Protocol):
    """One database server product behind a ``Dialect``; every method may raise driver errors."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def endpoint(self) -> str:
        """Where the server is (a DSN); the pool and the once-per-process schema are keyed by it."""
        ...

    def connect(self) -> Any:
        """A new autocommit connection with the session settings the backend relies on."""
        ...

    def usable(self, raw: Any) -> bool:
        """Whether ``raw`` is still open and not known broken (no round trip)."""
        ...

    def in_transaction(self, raw: Any) -> bool:
        """Whether the session on ``raw`` is inside a transaction, as the driver last heard from
        the server (no round trip): open, or failed and waiting for its ROLLBACK."""
        ...

    def session_id(self, raw: Any) -> int:
        """The server's id of the session (PostgreSQL backend pid, MariaDB connection id)."""
        ...

    def kill_session(self, session_id: int) -> None:
        """Terminate that session from a second connection, and wait until it is gone."""
        ...

    def lost_connection(self) -> Exception:
        """The driver's exception for a request whose answer never came back."""
        ...

    def contention(self, kind: Contention) -> Exception:
        """The driver's exception for ``kind``, as the server would have raised it."""
        ...

    def create_tables(self, raw: Any, prefix: str) -> None:
        """Idempotent DDL for every table of ``SCHEMA`` with the ``ns`` key column."""
        ...

    def ddl_fingerprint(self) -> str:
        """Text that changes whenever ``create_tables`` would create different tables."""
        ...

    def check(self, raw_cursor: Any, sql: str) -> None:
        """Engine-specific checks after a statement ran (raise the driver's exception)."""
        ...

    def durable(self, raw: Any) -> bool:
        """Whether the server's *running* configuration keeps a committed transaction through kill -9
        (asked of the server: the launcher may have started it either way)."""
        ...


# Short plain namespaces are stored as they are; any other as a digest marked with "~", which no
# plain namespace contains. Either way the ``ns`` column holds at most 64 ASCII characters.
_PLAIN_NAMESPACE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
NS_CHARS = 64


def namespace_key(namespace: str) -> str:
    """The ``ns`` column value of ``namespace``: one-to-one, ASCII, at most ``NS_CHARS`` long."""
    if _PLAIN_NAMESPACE.fullmatch(namespace):
        return namespace
    return "~" + hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def table_prefix(engine: Engine) -> str:
    """``saga_<digest>_``: a new schema or engine DDL gets new tables, never a stale one."""
    digest = hashlib.sha256(f"{sorted(SCHEMA.items())!r}|{engine.ddl_fingerprint()}".encode()).hexdigest()
    return f"saga_{digest[:10]}_"


# -- the driver door -------------------------------------------------------------------------


class DriverConnection:
    """The raw driver connection behind ``SqlSagaBackend.connection``; replaced on reconnect."""

    def __init__(self, engine: Engine, raw: Any) -> None:
        self.engine = engine
        self.raw = raw
        self.faults = DriverFaults()

    def cursor(self) -> DriverCursor:
        return DriverCursor(self)

    def usable(self) -> bool:
        return self.engine.usable(self.raw)

    def in_transaction(self) -> bool:
        return self.engine.in_transaction(self.raw)

    def roll_back(self) -> bool:
        """ROLLBACK on the session, past the fault seam; False when the session did not answer."""
        try:
            with self.raw.cursor() as cursor:
                cursor.execute("ROLLBACK")
        except Exception:
            return False
        return True

    def drop(self) -> None:
        """Close the socket; the server rolls back whatever transaction was open on it."""
        with suppress(Exception):  # a connection that is already gone has nothing left to close
            self.raw.close()


_TRANSACTION_VERBS = frozenset({"BEGIN", "START", "COMMIT", "ROLLBACK"})


class DriverCursor:
    """A DB-API cursor that passes every statement through the fault seam and the engine check."""

    def __init__(self, connection: DriverConnection) -> None:
        self._connection = connection
        self._raw = connection.raw.cursor()

    @property
    def rowcount(self) -> int:
        return int(self._raw.rowcount)

    def fetchall(self) -> list[Any]:
        return list(self._raw.fetchall())

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        verb = sql.split(None, 1)[0].upper()
        engine, faults = self._connection.engine, self._connection.faults
        if verb == "COMMIT":
            self._commit(sql)
            return
        if verb not in _TRANSACTION_VERBS and faults.statements:
            raise engine.contention(faults.statements.popleft())
        self._raw.execute(sql, params)
        engine.check(self._raw, sql)

    def _commit(self, sql: str) -> None:
        connection = self._connection
        engine, faults = connection.engine, connection.faults
        hook, faults.before_commit = faults.before_commit, None
        if hook is not None:
            hook()
        fault = faults.commits.popleft() if faults.commits else None
        if fault is CommitLoss.BEFORE_SENT:
            connection.drop()
            raise engine.lost_connection()
        if isinstance(fault, Contention):
            self._raw.execute("ROLLBACK")
            raise engine.contention(fault)
        self._raw.execute(sql)
        engine.check(self._raw, sql)
        if fault is CommitLoss.AFTER_APPLIED:
            connection.drop()
            raise engine.lost_connection()


# -- the backend -----------------------------------------------------------------------------

_lock = threading.Lock()
_schemas: set[tuple[str, str]] = set()
_durable: dict[str, bool] = {}  # endpoint -> what the server said, asked once per process


def _forget_after_fork() -> None:
    """A lock a forked child inherits may be held by a thread it does not have."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def server_capabilities(engine: Engine, raw: Any) -> SagaCapabilities:
    """``durable`` only if the server says its running configuration flushes every commit."""
    endpoint = engine.endpoint
    if endpoint not in _durable:
        try:
            durable = engine.durable(raw)
        except Exception:
            return NON_DURABLE_CAPABILITIES  # not known now: claim nothing, ask again next time
        with _lock:
            _durable[endpoint] = durable
    return SERVER_CAPABILITIES if _durable[endpoint] else NON_DURABLE_CAPABILITIES


def _unavailable(what: str) -> SagaBackendError:
    return SagaBackendError(SagaBackendErrorKind.UNAVAILABLE, what)


class ServerSagaBackend(SqlSagaBackend):
    """``SqlSagaBackend`` on a database server, one namespace of shared tables.

    Opening connects (or takes an idle pooled connection), creates the tables once per
    process and endpoint, and adds the namespace's counter rows. ``faults`` is the driver
    seam of the current connection (a reconnect keeps it).
    """

    def __init__(self, engine: Engine, namespace: str) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise SagaBackendError(SagaBackendErrorKind.UNAVAILABLE, "a namespace must be a non-empty string")
        self.engine = engine
        #: the namespace as the caller named it (``namespace`` is its ``ns`` column value)
        self.namespace_name = namespace
        raw = take_idle(engine.endpoint)
        if raw is None:
            raw = self._connect()
        super().__init__(
            DriverConnection(engine, raw),
            engine.dialect,
            table_prefix(engine),
            driver_commits=False,
            capabilities=server_capabilities(engine, raw),
            namespace=namespace_key(namespace),
        )

    connection: DriverConnection
    #: The transaction class ``begin`` opens (a broken example substitutes its own).
    transaction: type[SqlTransaction] = SqlTransaction

    @property
    def faults(self) -> DriverFaults:
        return self.connection.faults

    def _connect(self) -> Any:
        try:
            return self.engine.connect()
        except Exception:
            raise _unavailable("the database could not be reached") from None

    def _reconnect(self) -> None:
        self.connection.drop()
        self.connection.raw = self._connect()

    def create_schema(self) -> None:
        """The shared tables once per process and endpoint; this namespace's counter rows."""
        key = (self.engine.endpoint, self.prefix)
        if key not in _schemas:
            try:
                self.engine.create_tables(self.connection.raw, self.prefix)
            except Exception:
                raise _unavailable("the database schema could not be created") from None
            with _lock:
                _schemas.add(key)

        # Idempotent (insert-ignore), so a definite rollback is run again: other sessions writing
        # the shared tables make serialization failures and deadlocks here too.
        def counter_rows(tx: SqlTransaction) -> None:
            for name in COUNTERS:
                tx._insert("counters", ("name", "value"), (name, 0))

        self.until_applied(counter_rows)

    def until_applied(self, write: Callable[[SqlTransaction], object], attempts: int = OPEN_ATTEMPTS) -> None:
        """``write`` in a transaction of its own, run again while the database refuses it with a
        definite rollback (a refused BEGIN included: nothing had started), at most ``attempts``
        times, pausing ``RETRY_BACKOFF_S`` doubling (capped at ``RETRY_BACKOFF_CAP_S``) between
        tries so a contended write lets the other session finish. Only for a write that may run
        twice (an insert-ignore, a harness's own set-up): a unit of the runtime never comes here.
        Any other failure, and the last refusal, raise."""
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                time.sleep(min(RETRY_BACKOFF_S * 2 ** (attempt - 2), RETRY_BACKOFF_CAP_S))
            try:
                tx = self.begin()
            except SagaBackendError as exc:
                if exc.kind is not SagaBackendErrorKind.ROLLED_BACK or attempt == attempts:
                    raise
                continue
            try:
                write(tx)
                tx.commit()
                return
            except SagaBackendError as exc:
                tx.rollback()
                if exc.kind is not SagaBackendErrorKind.ROLLED_BACK or attempt == attempts:
                    raise
            except BaseException:
                tx.rollback()
                raise

    #: Transactions ``begin`` found still open on the connection (``_end_abandoned``).
    abandoned_transactions = 0

    def begin(self) -> SqlTransaction:
        """BEGIN on a live connection. A connection that broke while idle is replaced once:
        nothing had started on it, so that is no retry of anybody's transaction. So is one whose
        BEGIN was refused, whatever the driver still says of it: no server refuses a BEGIN for
        contention (SSI does not), only a session that ended or is stuck in a failed transaction."""
        if not self.connection.usable():
            self._reconnect()
        elif self.connection.in_transaction():
            self._end_abandoned()
        try:
            return self.transaction(self)
        except SagaBackendError:
            pass
        self._reconnect()
        try:
            return self.transaction(self)
        except SagaBackendError:
            raise _unavailable("the database did not accept a transaction") from None

    def _end_abandoned(self) -> None:
        """A transaction nobody ended is still open on the connection (S-TX-01): its COMMIT was
        never sent, so it is rolled back here. Left, it poisoned every later call: PostgreSQL
        refuses any statement, BEGIN included, of a failed transaction until its ROLLBACK (a
        backend that answered "rolled back" to every call for good), and MariaDB's BEGIN would
        commit it."""
        self.abandoned_transactions += 1
        if not self.connection.roll_back():
            self._reconnect()  # a fresh session has no transaction at all

    def drop_namespace(self) -> None:
        """This namespace's rows of every shared table deleted in one transaction, run again while
        the database refuses it (``until_applied``; a DELETE may run twice): beside another run's
        writes the DELETEs meet serialization failures and lock waits too, and a refused drop left
        the namespace's rows behind for good."""

        def delete(tx: SqlTransaction) -> None:
            for table in SCHEMA:
                tx._exec(f"DELETE FROM {tx._t(table)}{tx._where_ns}", tx._ns)

        self.until_applied(delete)

    def readiness(self) -> None:
        """A real round trip (``SELECT 1``) every call; any failure is UNAVAILABLE."""
        try:
            tx = self.begin()
            try:
                tx._one("SELECT 1")
            finally:
                tx.rollback()
        except SagaBackendError:
            raise _unavailable("the database did not answer") from None

    def session_id(self) -> int:
        """The server's id of this backend's current session (for killing it from outside)."""
        return self.engine.session_id(self.connection.raw)

    def kill_session(self) -> None:
        """Terminate this backend's session from a second connection (a real fault)."""
        self.engine.kill_session(self.session_id())

    def close(self) -> None:
        """Park the connection for the next namespace if it is healthy and idle, else drop it."""
        connection = self.connection
        connection.faults = DriverFaults()
        if not connection.roll_back():  # nothing may leak into the next user of the connection
            connection.drop()
            return
        if connection.usable() and park(self.engine.endpoint, connection.raw):
            # The pool owns it now: a later call on this closed backend must not reach the session
            # of the backend that takes it (it gets a connection of its own), nor park it twice.
            connection.raw = Detached()
        else:
            connection.drop()


__all__ = [
    "NON_DURABLE_CAPABILITIES",
    "SERVER_CAPABILITIES",
    "CommitLoss",
    "Contention",
    "DriverConnection",
    "DriverCursor",
    "DriverFaults",
    "Engine",
    "ServerSagaBackend",
    "namespace_key",
    "table_prefix",
]
