"""The saga backends on PostgreSQL and MariaDB: the driver door, real faults, and the runtime converging.

Three layers of evidence, each on both engines:

* the dialect classifies the drivers' *genuine* exceptions, provoked on the real server
  (serialization failure / deadlock, lock timeout, a unique key taken, a session killed while
  COMMIT is in flight);
* the backend keeps every driver exception behind its door, under faults injected at the driver
  boundary (``DriverFaults``), faults made real (the session killed from a second connection, a
  TCP link cut after COMMIT reached the server) and real concurrency between threads;
* the runtime converges: an unknown commit outcome is settled by redelivery against the inbox
  and the gate, never by a plain retry, and every effect applies exactly once.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from operator import methodcaller
from typing import Any
from urllib.parse import urlsplit

import attrs
import psycopg
import pytest

from conformance.services import mysql_dsn, pg_dsn
from impls.endpoints import mysql_params
from impls.saga import (
    LeaseRow,
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaTransaction,
    TimerRow,
)
from impls.saga._backend import CapabilityRow
from impls.saga._unit import MAX_ATTEMPTS
from impls.sql._mysql import MYSQL, MysqlEngine, open_mysql_saga_backend
from impls.sql._postgres import POSTGRES, PostgresEngine, open_postgres_saga_backend
from impls.sql._saga import SqlTransaction
from impls.sql._server import CommitLoss, Contention, Engine, ServerSagaBackend
from model.saga import (
    AlreadyExists,
    CommandProcessed,
    Decision,
    DefinitionReference,
    DuplicateCommand,
    DuplicateResult,
    OutcomeUnknown,
    ReferenceKind,
    ResultApplied,
    RolledBack,
    SagaStatus,
    Started,
    StartSaga,
    Transport,
    journal_violations,
)

from .conftest import KEY, ORCHESTRATOR, Rig

ENGINES = [
    pytest.param("postgres", id="postgres", marks=pytest.mark.service("postgres")),
    pytest.param("mysql", id="mysql", marks=pytest.mark.service("mariadb")),
]

SUCCEED = Decision.SUCCEED
UNKNOWN = SagaBackendErrorKind.OUTCOME_UNKNOWN
ROLLED = SagaBackendErrorKind.ROLLED_BACK


def _open(
    engine: str, namespace: str, port: int | None = None, lock_timeout_s: float = 1.0
) -> ServerSagaBackend:
    """A backend with a short lock timeout, optionally through a ``Link`` listening on ``port``."""
    if engine == "postgres":
        return open_postgres_saga_backend(
            namespace, _with_port(pg_dsn(), port), lock_timeout_ms=int(lock_timeout_s * 1000)
        )
    return open_mysql_saga_backend(
        namespace, _with_port(mysql_dsn(), port), lock_wait_timeout_s=max(1, round(lock_timeout_s))
    )


def _with_port(dsn: str, port: int | None) -> str:
    if port is None:
        return dsn
    parts = urlsplit(dsn)
    return parts._replace(netloc=f"{parts.netloc.rsplit(':', 1)[0]}:{port}").geturl()


def _target(engine: str) -> tuple[str, int]:
    parts = urlsplit(pg_dsn() if engine == "postgres" else mysql_dsn())
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


# The conftest's rig and runtime tests run on the backend this fixture names: here only the servers.
@pytest.fixture(params=ENGINES)
def saga_backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def engine(saga_backend: str) -> str:
    return saga_backend


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:16]}"


@pytest.fixture
def opener(engine: str) -> Iterator[Callable[..., ServerSagaBackend]]:
    """Opens server backends (``opener(namespace, port=None, lock_timeout_s=1.0)``), closes them after."""
    opened: list[ServerSagaBackend] = []

    def open_(name: str, port: int | None = None, lock_timeout_s: float = 1.0) -> ServerSagaBackend:
        backend = _open(engine, name, port, lock_timeout_s)
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.close()


def _commit(backend: SagaBackend, body: Callable[[SagaTransaction], Any]) -> Any:
    tx = backend.begin()
    try:
        result = body(tx)
    except BaseException:
        tx.rollback()
        raise
    tx.commit()
    return result


def _read(backend: SagaBackend, body: Callable[[SagaTransaction], Any]) -> Any:
    tx = backend.begin()
    try:
        return body(tx)
    finally:
        tx.rollback()


def _kind(call: Callable[[], Any]) -> SagaBackendErrorKind:
    with pytest.raises(SagaBackendError) as caught:
        call()
    return caught.value.kind


def _timer(timer_id: str, due_ms: int = 0) -> TimerRow:
    return TimerRow(timer_id, "saga-1", f"cmd-{timer_id}", due_ms)


# -- a TCP link that can lose a request or an answer (a real network fault) ---------------------


@attrs.define
class Link:
    """A loopback TCP relay to the server. ``cut_next(lose_answer)`` arms it: the next bytes the
    client sends are dropped (the server never sees them) or delivered and the server's answer
    dropped; either way both sockets are then closed, exactly as a failing network would."""

    target: tuple[str, int]
    listener: socket.socket = attrs.field(init=False)
    armed: bool | None = None  # None: pass through; False: lose the request; True: lose the answer
    _sockets: list[socket.socket] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def cut_next(self, lose_answer: bool) -> None:
        self.armed = lose_answer

    def close(self) -> None:
        for sock in [self.listener, *self._sockets]:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            answered = threading.Event()
            threading.Thread(target=self._up, args=(client, server, answered), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, answered), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, sent_armed: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                armed = self.armed
                if armed is False:
                    break
                if armed is True:  # before sending: the server may answer before this thread runs on
                    sent_armed.set()
                server.sendall(data)
        except OSError:
            pass
        _shut(client, server)

    def _down(self, server: socket.socket, client: socket.socket, sent_armed: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if sent_armed.is_set():  # the server answered the armed request: lose the answer
                    self.armed = None
                    break
                client.sendall(data)
        except OSError:
            pass
        _shut(client, server)


def _shut(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):  # the other pump may have closed it already
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@pytest.fixture
def link(engine: str) -> Iterator[Link]:
    relay = Link(_target(engine))
    yield relay
    relay.close()


# == 1. the dialect classifies genuine driver exceptions ======================================


def _raw_pair(engine: str, lock_timeout_s: float = 5.0) -> tuple[Any, Any, str, Callable[[], None]]:
    """Two raw sessions (the backend's session settings) on a scratch table ``(k, v)`` with rows
    a=0, b=0, and its cleanup. The lock timeout outlasts PostgreSQL's 1 s deadlock check."""
    backend = _open(engine, "scratch", lock_timeout_s=lock_timeout_s)
    table = f"scratch_{uuid.uuid4().hex[:12]}"
    key_type = "VARCHAR(20)" if engine == "mysql" else "TEXT"
    admin = backend.engine.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (k {key_type} PRIMARY KEY, v BIGINT)")
        cursor.execute(f"INSERT INTO {table} VALUES ('a', 0), ('b', 0)")
    first, second = backend.engine.connect(), backend.engine.connect()

    def cleanup() -> None:
        for raw in (first, second):
            raw.close()
        with admin.cursor() as cursor:
            cursor.execute(f"DROP TABLE {table}")
        admin.close()
        backend.close()

    return first, second, table, cleanup


def _run(raw: Any, *statements: str) -> None:
    with raw.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _begin(engine: str) -> str:
    return POSTGRES.begin if engine == "postgres" else MYSQL.begin


def _raises(call: Callable[[], None]) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the server did not refuse")


def _code(error: BaseException) -> str | int:
    """PostgreSQL's SQLSTATE, or MariaDB's error number."""
    if isinstance(error, psycopg.Error):
        return error.sqlstate or ""
    return int(error.args[0])


def _classify(engine: str, error: BaseException, *, during_commit: bool) -> SagaBackendErrorKind:
    dialect = POSTGRES if engine == "postgres" else MYSQL
    return dialect.classify(error, during_commit=during_commit)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_real_serialization_conflict_is_a_definite_rollback(engine: str) -> None:
    """Write skew under SERIALIZABLE: PostgreSQL refuses with 40001, InnoDB with a 1213 deadlock."""
    first, second, table, cleanup = _raw_pair(engine)
    try:
        begin = _begin(engine)
        _run(first, begin, f"SELECT v FROM {table} WHERE k = 'a'")
        _run(second, begin, f"SELECT v FROM {table} WHERE k = 'b'")
        errors: list[BaseException] = []

        def write(raw: Any, key: str) -> None:
            try:
                _run(raw, f"UPDATE {table} SET v = v + 1 WHERE k = '{key}'", "COMMIT")
            except Exception as exc:
                errors.append(exc)
                _run(raw, "ROLLBACK")

        other = threading.Thread(target=write, args=(first, "b"))
        other.start()
        time.sleep(0.2)  # InnoDB: the first writer now waits on the second's shared lock
        write(second, "a")
        other.join(10)
        assert len(errors) == 1, errors
        (error,) = errors
        state = _code(error)
        assert state in ("40001", 1213)
        assert _classify(engine, error, during_commit=False) is ROLLED
        assert _classify(engine, error, during_commit=True) is ROLLED  # the server answered: rolled back
    finally:
        cleanup()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_real_deadlock_is_a_definite_rollback(engine: str) -> None:
    first, second, table, cleanup = _raw_pair(engine)
    try:
        begin = _begin(engine)
        _run(first, begin, f"SELECT v FROM {table} WHERE k = 'a' FOR UPDATE")
        _run(second, begin, f"SELECT v FROM {table} WHERE k = 'b' FOR UPDATE")
        errors: list[BaseException] = []

        def lock(raw: Any, key: str) -> None:
            try:
                _run(raw, f"SELECT v FROM {table} WHERE k = '{key}' FOR UPDATE")
            except Exception as exc:
                errors.append(exc)
            _run(raw, "ROLLBACK")

        other = threading.Thread(target=lock, args=(first, "b"))
        other.start()
        time.sleep(0.2)
        lock(second, "a")
        other.join(10)
        (error,) = errors
        assert _code(error) in ("40P01", 1213)
        assert _classify(engine, error, during_commit=False) is ROLLED
    finally:
        cleanup()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_real_lock_timeout_and_a_taken_key_are_definite_rollbacks(engine: str) -> None:
    first, second, table, cleanup = _raw_pair(engine, lock_timeout_s=0.3)
    try:
        begin = _begin(engine)
        _run(first, begin, f"SELECT v FROM {table} WHERE k = 'a' FOR UPDATE")
        _run(second, begin)
        timeout = _raises(lambda: _run(second, f"SELECT v FROM {table} WHERE k = 'a' FOR UPDATE"))
        assert _code(timeout) in ("55P03", 1205)
        assert _classify(engine, timeout, during_commit=False) is ROLLED
        _run(second, "ROLLBACK")
        _run(first, "ROLLBACK")
        taken = _raises(lambda: _run(second, begin, f"INSERT INTO {table} VALUES ('a', 1)"))
        assert _code(taken) in ("23505", 1062)
        assert _classify(engine, taken, during_commit=False) is ROLLED
        _run(second, "ROLLBACK")
    finally:
        cleanup()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_session_killed_under_a_commit_is_an_unknown_outcome(engine: str) -> None:
    """The genuine exception of a COMMIT on a session terminated from outside: unknown, not rolled back."""
    first, _second, table, cleanup = _raw_pair(engine)
    backend = _open(engine, "scratch")
    try:
        _run(first, _begin(engine), f"UPDATE {table} SET v = 7 WHERE k = 'a'")
        backend.engine.kill_session(backend.engine.session_id(first))
        error = _raises(lambda: _run(first, "COMMIT"))
        assert _classify(engine, error, during_commit=True) is UNKNOWN
        assert _classify(engine, error, during_commit=False) is ROLLED
    finally:
        backend.close()
        cleanup()


# == 2. the backend: faults at the driver door, made real, and concurrent ======================


def test_namespaces_share_tables_but_never_rows(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    one, other = opener(namespace), opener(namespace + "x")
    _commit(
        one, lambda tx: (tx.claim_result("m1"), tx.insert_timer(_timer("t1")), tx.allocate_fencing_token())
    )
    assert _read(other, lambda tx: (tx.result_claimed("m1"), tx.list_timers())) == (False, ())
    assert _commit(other, lambda tx: tx.allocate_fencing_token()) == 1  # counters are per namespace
    one.close()
    again = opener(namespace)  # durable: a reopened namespace sees its committed rows
    assert _read(again, lambda tx: (tx.result_claimed("m1"), len(tx.list_timers()))) == (True, 1)
    assert again.capabilities.row_locks and again.capabilities.durable and again.capabilities.fenced_timers


def test_any_namespace_string_is_its_own_namespace(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    odd = opener(f"{namespace}/participant ü {'x' * 80}")
    plain = opener(namespace)
    _commit(odd, lambda tx: tx.claim_command("c1"))
    assert _read(plain, lambda tx: tx.command_claimed("c1")) is False
    assert _read(odd, lambda tx: tx.command_claimed("c1")) is True


def test_orderings_are_code_point_orderings(opener: Callable[..., ServerSagaBackend], namespace: str) -> None:
    """``ORDER BY`` on keys matches Python's ordering (binary collations), as the model orders."""
    backend = opener(namespace)
    ids = ["b", "B", "é", "a", "Z", "a ", "ä", "𝔘"]
    _commit(backend, lambda tx: [tx.insert_timer(_timer(timer_id, 5)) for timer_id in ids])
    listed = _read(backend, lambda tx: [row.timer_id for row in tx.list_timers()])
    assert listed == sorted(ids)


def test_longest_names_fit_every_key(opener: Callable[..., ServerSagaBackend], namespace: str) -> None:
    """Four 200-character names of 4-byte characters make one capability key (hashed on InnoDB)."""
    backend = opener(namespace)
    name = "𝔘" * 200
    row = CapabilityRow(
        name, name, 1, 0, name, name, Transport.HTTP, "https://a.example", None, "d" * 64, 1, 10
    )
    _commit(backend, lambda tx: tx.upsert_capability(row))
    _commit(backend, lambda tx: tx.upsert_capability(attrs.evolve(row, generation=2)))
    loaded = _read(backend, lambda tx: tx.load_capability(name, name, 1, 0, name, name, lock=True))
    assert loaded == attrs.evolve(row, generation=2)
    assert _read(backend, lambda tx: tx.list_capabilities()) == (loaded,)
    near = "𝔘" * 199 + "x"  # differs only in the last character: a different key
    assert _read(backend, lambda tx: tx.load_capability(name, name, 1, 0, name, near)) is None
    reference = DefinitionReference(ReferenceKind.AUDIT, KEY, "r" * 5000)  # reference ids are unbounded
    assert _commit(backend, lambda tx: (tx.insert_reference(reference), tx.insert_reference(reference))) == (
        True,
        False,
    )


def test_guarded_update_with_an_unchanged_value_still_counts(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    """Renewing to the same expiry matches the row: the fence held (InnoDB: CLIENT.FOUND_ROWS)."""
    backend = opener(namespace)
    _commit(backend, lambda tx: tx.insert_timer(_timer("t1")))
    token = _commit(backend, lambda tx: tx.allocate_fencing_token())
    assert _commit(backend, lambda tx: tx.lease_timer("t1", None, LeaseRow("w1", token, 50)))
    assert _commit(backend, lambda tx: tx.renew_timer("t1", token, 10, 50)) is True
    assert _commit(backend, lambda tx: tx.renew_timer("t1", token + 1, 10, 60)) is False
    # S-TIMER-04: the lease ran out at 50; the holder lost its authority, nobody took over.
    assert _commit(backend, lambda tx: tx.renew_timer("t1", token, 50, 90)) is False
    assert _commit(backend, lambda tx: tx.release_timer("t1", token, 50)) is False
    assert _commit(backend, lambda tx: tx.complete_timer("t1", token, 50)) is False


@pytest.mark.parametrize("loss", list(CommitLoss))
def test_connection_lost_around_commit_is_unknown_and_the_truth_is_read_back(
    opener: Callable[..., ServerSagaBackend], namespace: str, loss: CommitLoss
) -> None:
    """S-TX-02 at the driver door: the driver's own exception around a real COMMIT."""
    backend = opener(namespace)
    tx = backend.begin()
    assert tx.claim_result("m1")
    backend.faults.commits.append(loss)
    assert _kind(tx.commit) is UNKNOWN
    tx.rollback()
    # The next unit reconnects by itself and reads what really happened.
    assert _read(backend, lambda t: t.result_claimed("m1")) is (loss is CommitLoss.AFTER_APPLIED)


@pytest.mark.parametrize("kind", list(Contention))
def test_contention_at_a_statement_or_at_commit_rolls_back(
    opener: Callable[..., ServerSagaBackend], namespace: str, kind: Contention
) -> None:
    backend = opener(namespace)
    tx = backend.begin()
    assert tx.claim_result("m1")
    backend.faults.statements.append(kind)
    assert _kind(lambda: tx.claim_result("m2")) is ROLLED
    tx.rollback()
    tx = backend.begin()
    assert tx.claim_result("m3")
    if kind is not Contention.LOCK_TIMEOUT:  # a server refuses a COMMIT for conflicts, never for a lock wait
        backend.faults.commits.append(kind)
        assert _kind(tx.commit) is ROLLED
    tx.rollback()
    claimed = _read(backend, lambda t: [t.result_claimed(m) for m in ("m1", "m2", "m3")])
    assert claimed == [False, False, False]


def test_a_session_killed_before_commit_is_unknown_and_did_not_apply(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    backend = opener(namespace)
    victim = backend.session_id()
    tx = backend.begin()
    assert tx.claim_command("c1")
    backend.faults.before_commit = backend.kill_session  # from a second connection, for real
    assert _kind(tx.commit) is UNKNOWN
    tx.rollback()
    assert _read(backend, lambda t: t.command_claimed("c1")) is False
    assert backend.session_id() != victim


def test_a_session_killed_mid_transaction_rolls_back(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    backend = opener(namespace)
    tx = backend.begin()
    assert tx.claim_command("c1")
    backend.kill_session()
    assert _kind(lambda: tx.claim_command("c2")) is ROLLED
    tx.rollback()
    assert _read(backend, lambda t: (t.command_claimed("c1"), t.command_claimed("c2"))) == (False, False)


def test_a_session_killed_while_idle_is_replaced_unnoticed(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    backend = opener(namespace)
    backend.kill_session()
    assert _commit(backend, lambda tx: tx.claim_command("c1")) is True  # nothing had started: no error
    backend.kill_session()
    backend.readiness()


@pytest.mark.parametrize("failed", [True, False], ids=["failed", "open"])
def test_a_transaction_left_unended_is_rolled_back_by_the_next_begin(
    opener: Callable[..., ServerSagaBackend], namespace: str, failed: bool
) -> None:
    """S-TX-01: a transaction nobody ended (its owner gone without COMMIT or ROLLBACK) never sent
    COMMIT, so it did not apply; the next BEGIN rolls it back. Before, one failed statement left
    behind made PostgreSQL refuse every later statement of the connection, BEGIN included, as
    "rolled back" for good (CI at 11f538a: a postgres/saga run ended with "the database answered
    rolled_back (statement failed) on every attempt"), and MariaDB's BEGIN committed it."""
    backend = opener(namespace)
    left = backend.begin()
    assert left.claim_command("c1")
    if failed:
        with pytest.raises(SagaBackendError) as raised:
            left._exec("SELECT no_such_column")
        assert "no_such_column" not in raised.value.detail and raised.value.detail.startswith(
            "statement failed ("
        )
    # ``left`` is dropped here without rollback or commit.
    assert _commit(backend, lambda tx: tx.claim_command("c2")) is True
    assert backend.abandoned_transactions == 1
    assert _read(backend, lambda t: (t.command_claimed("c1"), t.command_claimed("c2"))) == (False, True)
    backend.readiness()


def test_a_closed_backend_never_shares_the_session_it_parked(engine: str, namespace: str) -> None:
    """Closing parks the session in the pool for the next backend opened; the closed backend, if
    called again, connects afresh instead of running its transactions inside the next owner's
    session (a BEGIN of one joined to, or rolling back, the other's), and a second close parks
    nothing twice."""
    closed = _open(engine, namespace)
    parked = closed.session_id()
    closed.close()
    owner = _open(engine, namespace)
    try:
        assert owner.session_id() == parked  # the pool handed the session on
        tx = owner.begin()
        assert tx.claim_command("c1")
        closed.readiness()  # a transaction of its own, in a session of its own
        assert closed.session_id() != parked
        tx.commit()
        assert _read(owner, lambda t: t.command_claimed("c1")) is True  # nothing rolled it back
        closed.close()
        closed.close()
        again, other = _open(engine, namespace), _open(engine, namespace)
        try:
            assert again.session_id() != other.session_id()
        finally:
            again.close()
            other.close()
    finally:
        owner.close()


@pytest.mark.parametrize("lose_answer", [True, False], ids=["answer-lost", "request-lost"])
def test_a_real_network_cut_around_commit_is_unknown(
    opener: Callable[..., ServerSagaBackend], namespace: str, link: Link, lose_answer: bool
) -> None:
    """The TCP link dies after COMMIT reached the server (applied) or before (not applied)."""
    backend = opener(namespace, port=link.port)
    tx = backend.begin()
    assert tx.claim_result("m1")
    backend.faults.before_commit = lambda: link.cut_next(lose_answer)
    assert _kind(tx.commit) is UNKNOWN
    tx.rollback()
    witness = opener(namespace)
    assert _read(witness, lambda t: t.result_claimed("m1")) is lose_answer


def test_readiness_round_trips_and_an_unreachable_server_is_unavailable(
    engine: str, opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    opener(namespace).readiness()
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(SagaBackendError) as caught:
        _open(engine, namespace, port=port)
    assert caught.value.kind is SagaBackendErrorKind.UNAVAILABLE
    assert "127.0.0.1" not in caught.value.detail and "saga_" not in caught.value.detail


def test_a_lock_wait_times_out_as_a_rollback(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    holder, waiter = opener(namespace), opener(namespace, lock_timeout_s=0.3)
    _commit(holder, lambda tx: tx.insert_timer(_timer("t1")))
    held = holder.begin()
    assert held.load_timer("t1", lock=True) is not None
    tx = waiter.begin()
    assert _kind(lambda: tx.load_timer("t1", lock=True)) is ROLLED
    tx.rollback()
    held.rollback()


def test_a_failed_statement_never_commits(
    engine: str, opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    """PostgreSQL answers COMMIT of a failed transaction with ROLLBACK; InnoDB's IGNORE would
    truncate an over-long key. Both end as ROLLED_BACK with nothing written."""
    backend = opener(namespace)
    tx = backend.begin()
    assert tx.claim_result("m1")
    if engine == "postgres":
        assert _kind(lambda: tx._one("SELECT 1 / 0")) is ROLLED
        assert _kind(tx.commit) is ROLLED
    else:
        assert _kind(lambda: tx.claim_result("m" * 300)) is ROLLED  # IGNORE would have truncated it
        tx.rollback()
    assert _read(backend, lambda t: t.result_claimed("m1")) is False


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` in threads released together; each result or the SagaBackendError it raised."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(10)
        try:
            results[index] = calls[index]()
        except SagaBackendError as exc:
            results[index] = exc.kind

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_racing_claims_of_one_key_take_it_once(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    """A key taken by a concurrent unit is the duplicate path (False) or a rollback, never twice."""
    for round_ in range(5):
        backends = [opener(namespace, lock_timeout_s=5) for _ in range(3)]
        claim = methodcaller("claim_result", f"m{round_}")
        outcomes = _race(*(partial(_commit, backend, claim) for backend in backends))
        assert outcomes.count(True) == 1, outcomes
        assert all(o in (False, ROLLED) for o in outcomes if o is not True), outcomes
        assert _commit(backends[0], claim) is False


def test_write_skew_between_units_is_refused(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    """Each unit reads one tenant's quota and bumps the other's: serializable, so one must roll back."""
    first, second = opener(namespace, lock_timeout_s=5), opener(namespace, lock_timeout_s=5)
    _commit(first, lambda tx: (tx.add_quota("a", 0), tx.add_quota("b", 0)))

    def skew(backend: SagaBackend, read: str, write: str) -> Callable[[], Any]:
        def unit(tx: SagaTransaction) -> int:
            seen = tx.quota_used(read)
            time.sleep(0.2)  # both have read before either writes
            return tx.add_quota(write, seen + 1)

        return lambda: _commit(backend, unit)

    outcomes = _race(skew(first, "a", "b"), skew(second, "b", "a"))
    assert sorted(map(str, outcomes)) == sorted(["1", str(ROLLED)]), outcomes
    assert _read(first, lambda tx: tx.quota_used("a") + tx.quota_used("b")) == 1


def test_opposite_row_locks_deadlock_into_one_rollback(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    first, second = opener(namespace, lock_timeout_s=5), opener(namespace, lock_timeout_s=5)
    _commit(first, lambda tx: (tx.insert_timer(_timer("t1")), tx.insert_timer(_timer("t2"))))

    def crossing(backend: SagaBackend, one: str, two: str) -> Callable[[], Any]:
        def unit(tx: SagaTransaction) -> bool:
            tx.load_timer(one, lock=True)
            time.sleep(0.2)
            return tx.load_timer(two, lock=True) is not None

        return lambda: _commit(backend, unit)

    outcomes = _race(crossing(first, "t1", "t2"), crossing(second, "t2", "t1"))
    assert sorted(map(str, outcomes)) == sorted(["True", str(ROLLED)]), outcomes


# == 3. the runtime converges on these engines ================================================


def _server(backend: SagaBackend) -> ServerSagaBackend:
    assert isinstance(backend, ServerSagaBackend)
    return backend


def _settle_result(rig: Rig, owner: str, first: Any) -> Any:
    """Redeliver the result the orchestrator did not acknowledge until it is (S-DLV-02)."""
    envelope = rig.parts[owner].pending_results()[0]
    outcome = first
    for _ in range(3):
        if not isinstance(outcome, OutcomeUnknown | RolledBack):
            break
        outcome = rig.orch.handle_result(envelope, owner, rig.now)
    rig.parts[owner].mark_result_published(envelope.message_id)
    return outcome


@pytest.mark.parametrize(
    ("loss", "settled"),
    [(CommitLoss.AFTER_APPLIED, DuplicateResult), (CommitLoss.BEFORE_SENT, ResultApplied)],
)
def test_an_unknown_orchestrator_commit_is_settled_by_redelivery(
    rig: Rig, loss: CommitLoss, settled: type[Any]
) -> None:
    started = rig.start()
    command, outcome = rig.command()
    assert isinstance(outcome, CommandProcessed)
    envelope = rig.parts[command.owner].pending_results()[0]
    _server(rig.orch.backend).faults.commits.append(loss)
    first = rig.orch.handle_result(envelope, command.owner, rig.now)
    assert isinstance(first, OutcomeUnknown)  # never relabelled a rollback, never retried blindly
    again = rig.orch.handle_result(envelope, command.owner, rig.now)
    assert isinstance(again, settled), again
    rig.parts[command.owner].mark_result_published(envelope.message_id)
    rig.drive()
    instance = rig.orch.instance(started.saga_id)
    assert instance is not None and instance.status is SagaStatus.COMPLETED
    assert journal_violations(rig.orch.journal(started.saga_id)) == ()


def test_an_unknown_participant_commit_applies_the_effect_once(rig: Rig) -> None:
    rig.start()
    command = rig.orch.pending_commands()[0]
    rig.orch.mark_command_published(command.command_id)
    part = rig.parts[command.owner]
    _server(part.backend).faults.commits.append(CommitLoss.AFTER_APPLIED)
    assert isinstance(part.handle_command(command, ORCHESTRATOR, SUCCEED), OutcomeUnknown)
    assert isinstance(part.handle_command(command, ORCHESTRATOR, SUCCEED), DuplicateCommand)
    assert [e.effect_id for e in part.effects()] == [command.effect_id]
    assert [r.command_id for r in part.pending_results()] == [command.command_id]


def test_contention_in_a_participant_unit_is_redelivered_and_changes_nothing(rig: Rig) -> None:
    rig.start()
    command = rig.orch.pending_commands()[0]
    part = rig.parts[command.owner]
    # The unit retries a database rollback MAX_ATTEMPTS times; past that it reports RolledBack.
    _server(part.backend).faults.statements.extend([Contention.DEADLOCK] * MAX_ATTEMPTS)
    assert isinstance(part.handle_command(command, ORCHESTRATOR, SUCCEED), RolledBack)
    assert part.effects() == () and part.pending_results() == ()
    assert isinstance(part.handle_command(command, ORCHESTRATOR, SUCCEED), CommandProcessed)
    assert len(part.effects()) == 1


def test_one_deadlock_is_retried_inside_the_unit(rig: Rig) -> None:
    rig.start()
    command = rig.orch.pending_commands()[0]
    part = rig.parts[command.owner]
    _server(part.backend).faults.statements.append(Contention.DEADLOCK)
    assert isinstance(part.handle_command(command, ORCHESTRATOR, SUCCEED), CommandProcessed)
    assert len(part.effects()) == 1


def test_a_start_whose_session_was_killed_at_commit_is_settled_by_its_replay(rig: Rig) -> None:
    orch = _server(rig.orch.backend)
    orch.faults.before_commit = orch.kill_session
    request = StartSaga(KEY, "k9", json_payload=b'{"qty":9}')
    assert isinstance(rig.orch.start_saga(request, rig.now), OutcomeUnknown)
    replayed = rig.orch.start_saga(request, rig.now)
    assert isinstance(replayed, Started)  # the killed COMMIT never applied; the replay starts it
    assert isinstance(rig.orch.start_saga(request, rig.now), AlreadyExists)


def test_a_participant_answer_lost_on_the_wire_is_absorbed_by_the_inbox(
    engine: str, rig: Rig, link: Link
) -> None:
    rig.start()
    command = rig.orch.pending_commands()[0]
    part = rig.parts[command.owner]
    # The same participant database, reached through a TCP link that loses the COMMIT's answer.
    relayed = attrs.evolve(part, backend=_open(engine, _server(part.backend).namespace_name, port=link.port))
    try:
        _server(relayed.backend).faults.before_commit = lambda: link.cut_next(lose_answer=True)
        assert isinstance(relayed.handle_command(command, ORCHESTRATOR, SUCCEED), OutcomeUnknown)
        # The COMMIT really applied: the redelivered copy is a duplicate, the effect applied once.
        assert isinstance(relayed.handle_command(command, ORCHESTRATOR, SUCCEED), DuplicateCommand)
        assert [e.command_id for e in relayed.effects()] == [command.command_id]
    finally:
        relayed.backend.close()


@pytest.mark.parametrize(
    ("seed", "real"), [(1, False), (2, False), (3, True)], ids=["driver-1", "driver-2", "kill-3"]
)
def test_sagas_converge_when_any_commit_may_be_lost(rig: Rig, seed: int, real: bool) -> None:
    """Chaos around COMMIT: before each unit, every database's next COMMIT is lost with
    probability 0.3 -- at the driver door (before or after it applied), or for real (``real``:
    the session is killed from a second connection just before COMMIT is sent). A delivery or
    relay mark is repeated until acknowledged. Every saga completes, every effect applies
    exactly once, every journal is legal, and nothing is left to relay."""
    chance = random.Random(seed)
    backends = [_server(rig.orch.backend), *(_server(p.backend) for p in rig.parts.values())]
    unknown = 0

    def until_acknowledged(call: Callable[[], Any]) -> Any:
        nonlocal unknown
        for _ in range(30):
            for backend in backends:
                backend.faults.commits.clear()
                backend.faults.before_commit = None
                if chance.random() < 0.3:
                    if real:
                        backend.faults.before_commit = backend.kill_session
                    else:
                        backend.faults.commits.append(chance.choice(list(CommitLoss)))
            outcome = call()
            if not isinstance(outcome, OutcomeUnknown | RolledBack):
                return outcome
            unknown += 1
        raise AssertionError("never acknowledged")

    sagas = []
    for key in ("k1", "k2", "k3"):
        request = StartSaga(KEY, key, json_payload=b'{"qty":1}')
        started = until_acknowledged(partial(rig.orch.start_saga, request, rig.now))
        assert isinstance(started, Started | AlreadyExists)
        sagas.append(started.saga_id)
    for _ in range(100):
        pending = rig.orch.pending_commands()
        if not pending:
            break
        command = pending[0]
        part = rig.parts[command.owner]
        until_acknowledged(partial(part.handle_command, command, ORCHESTRATOR, SUCCEED))
        while command in rig.orch.pending_commands():  # an unknown mark is simply marked again
            until_acknowledged(partial(rig.orch.mark_command_published, command.command_id))
        for envelope in part.pending_results():
            until_acknowledged(partial(rig.orch.handle_result, envelope, command.owner, rig.now))
            while envelope in part.pending_results():
                part.mark_result_published(envelope.message_id)
    for backend in backends:
        backend.faults.commits.clear()
        backend.faults.before_commit = None
    assert unknown >= 5  # the storm really hit: units came back unknown and were redelivered
    assert rig.orch.pending_commands() == ()
    for saga_id in sagas:
        instance = rig.orch.instance(saga_id)
        assert instance is not None and instance.status is SagaStatus.COMPLETED, instance
        assert journal_violations(rig.orch.journal(saga_id)) == ()
    for part in rig.parts.values():
        applied = [e.effect_id for e in part.effects()]
        assert len(applied) == len(set(applied)) == len(sagas)
        assert part.pending_results() == ()


def test_two_workers_racing_on_each_command_apply_it_once(
    rig: Rig, opener: Callable[..., ServerSagaBackend]
) -> None:
    """Real concurrency: two participant workers share one database and race on every command."""
    for key in ("k1", "k2", "k3"):
        rig.start(key)
    commands = rig.orch.pending_commands()
    part = rig.parts[commands[0].owner]
    for command in commands:
        workers = [
            attrs.evolve(part, backend=opener(_server(part.backend).namespace_name, lock_timeout_s=5))
            for _ in range(2)
        ]
        outcomes = _race(*(partial(w.handle_command, command, ORCHESTRATOR, SUCCEED) for w in workers))
        assert sum(isinstance(o, CommandProcessed) for o in outcomes) <= 1, outcomes
        if not any(isinstance(o, CommandProcessed | DuplicateCommand) for o in outcomes):
            # Both lost the race to each other (rolled back): the redelivery settles it.
            assert isinstance(workers[0].handle_command(command, ORCHESTRATOR, SUCCEED), CommandProcessed)
    effects = [e.effect_id for e in part.effects()]
    assert sorted(effects) == sorted({c.effect_id for c in commands})


def test_opening_a_namespace_runs_its_refused_counter_rows_again(engine: str, namespace: str) -> None:
    """Two saga runs side by side on one PostgreSQL: opening a backend ended the run in a
    ``BackendFactoryError`` when the COMMIT of the namespace's counter rows met a serialization
    failure. Those rows are insert-ignore, so a definite rollback is run again (docs/faults.md,
    "Runs side by side on the shared SQL saga tables")."""
    refused = [2]

    class RefusedOnOpen(ServerSagaBackend):
        def begin(self) -> SqlTransaction:
            if refused[0]:
                refused[0] -= 1
                self.connection.faults.commits.append(Contention.SERIALIZATION_FAILURE)
            return super().begin()

    _open_then_commit(RefusedOnOpen, engine, namespace, refused)


def test_opening_a_namespace_whose_begin_was_refused_begins_again(engine: str, namespace: str) -> None:
    """A BEGIN the database refused started nothing: opening begins again, backing off, instead of
    ending the run (``ServerSagaBackend.until_applied``; route03's contended PostgreSQL run ended
    in ``FlakyStrategyDefinition`` on a refused BEGIN)."""
    refused = [2]

    class BeginRefused(ServerSagaBackend):
        def begin(self) -> SqlTransaction:
            if refused[0]:
                refused[0] -= 1
                raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "statement failed")
            return super().begin()

    _open_then_commit(BeginRefused, engine, namespace, refused)


def test_a_namespace_drop_the_database_refused_is_run_again(
    opener: Callable[..., ServerSagaBackend], namespace: str
) -> None:
    """Dropping a namespace (the harness's clean-up) deletes its rows in one transaction; a COMMIT
    the database refused (another run writing the shared tables) runs it again instead of leaving
    the rows behind."""
    backend = opener(namespace)
    assert _commit(backend, lambda tx: tx.allocate_fencing_token()) == 1
    assert namespace in backend.namespaces()
    backend.faults.commits.append(Contention.SERIALIZATION_FAILURE)
    backend.drop_namespace()
    assert not backend.faults.commits  # the refusal was met
    assert namespace not in backend.namespaces()


def _open_then_commit(
    backend_class: type[ServerSagaBackend], engine: str, namespace: str, refused: list[int]
) -> None:
    """Open ``backend_class`` on a short-lock engine: every planted refusal was met while opening,
    and the opened namespace then commits."""
    server: Engine = (
        PostgresEngine(pg_dsn(), lock_timeout_ms=1000)
        if engine == "postgres"
        else MysqlEngine(mysql_params(mysql_dsn()), lock_wait_timeout_s=1)
    )
    backend = backend_class(server, namespace)
    try:
        assert refused == [0]
        assert _commit(backend, lambda tx: tx.allocate_fencing_token()) == 1
    finally:
        backend.drop_namespace()
        backend.close()
