"""The fault proxy on its own: request classification per protocol (no server needed), each
action against a real Redis, where redis-py's own retry shows what a lost answer means, and a
lost COMMIT answer on a real PostgreSQL whose driver prepares COMMIT first."""

from __future__ import annotations

import uuid

import psycopg
import pytest
import redis.exceptions

from conformance.wire import WireAction, route
from conformance.wire._protocols import (
    cql_refused,
    cql_request,
    mysql_refused,
    mysql_request,
    postgres_refused,
    postgres_request,
    redis_refused,
    redis_request,
)
from impls.endpoints import pg_dsn
from impls.redis import redis_client


def test_requests_are_told_from_housekeeping() -> None:
    assert redis_request(b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n", {}) == "EVALSHA"
    assert redis_request(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", {}) is None
    assert postgres_request(b"\x00\x00\x00\x08\x04\xd2\x16\x2f", {}) is None  # SSLRequest
    assert postgres_request(b"\x00\x00\x00\x54\x00\x03\x00\x00user\x00", {}) is None  # startup
    assert postgres_request(b"Q\x00\x00\x00\x0bCOMMIT\x00", {}) == "COMMIT"
    parse = b"_pg3_0\x00COMMIT\x00\x00\x00"
    notes: dict[str, str] = {}
    assert postgres_request(b"P" + (4 + len(parse)).to_bytes(4, "big") + parse, notes) == "COMMIT"
    bind = b"\x00_pg3_0\x00\x00\x00\x00\x00\x00\x00"
    assert postgres_request(b"B" + (4 + len(bind)).to_bytes(4, "big") + bind, notes) == "COMMIT"
    # psycopg's round trip that only prepares (Parse, Sync) runs nothing: counted, never armed.
    prepare = b"_pg3_5\x00COMMIT\x00\x00\x00"
    sync = b"S\x00\x00\x00\x04"
    prepared: dict[str, str] = {}
    only_prepare = b"P" + (4 + len(prepare)).to_bytes(4, "big") + prepare + sync
    assert postgres_request(only_prepare, prepared) == "PREPARE"
    assert prepared == {"_pg3_5": "COMMIT"}
    assert mysql_request(b"\x07\x00\x00\x00\x03COMMIT", {}) == "COMMIT"
    assert mysql_request(b"\x20\x00\x00\x01\x85\xa6", {}) is None  # the handshake answer
    assert cql_request(bytes([0x04, 0, 0, 1, 0x0A]) + b"\x00\x00\x00\x00", {}) == "EXECUTE"
    assert cql_request(bytes([0x04, 0, 0, 1, 0x05]) + b"\x00\x00\x00\x00", {}) is None  # heartbeat


def test_refusals_are_told_from_work_done() -> None:
    """A reply-lost fault drops only the answer of work done (_protocols.REFUSALS)."""
    assert postgres_refused(b"C\x00\x00\x00\x0dROLLBACK\x00Z\x00\x00\x00\x05I")
    assert not postgres_refused(b"C\x00\x00\x00\x0bCOMMIT\x00Z\x00\x00\x00\x05I")
    error = b"SERROR\x00C40001\x00Mcould not serialize access\x00\x00"
    assert postgres_refused(b"2\x00\x00\x00\x04E" + (4 + len(error)).to_bytes(4, "big") + error)
    assert mysql_refused(b"\x17\x00\x00\x01\xff\xbd\x04#40001Deadlock")
    assert not mysql_refused(b"\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00")
    assert redis_refused(b"-ERR value is not an integer\r\n") and redis_refused(b"*-1\r\n")
    assert not redis_refused(b":3\r\n") and not redis_refused(b"*2\r\n:1\r\n:2\r\n")
    assert cql_refused(bytes([0x84, 0, 0, 1, 0x00]) + b"\x00\x00\x00\x06\x00\x00\x11\x00")
    assert not cql_refused(bytes([0x84, 0, 0, 1, 0x08]) + b"\x00\x00\x00\x04\x00\x00\x00\x01")


@pytest.mark.service("redis")
async def test_a_refused_request_keeps_the_reply_lost_fault_for_the_next() -> None:
    """The server refused the first request (did nothing): its error passes, and the next one,
    which does the work, is the one whose answer is lost."""
    wire = route("redis")
    client = redis_client(wire.endpoint)
    key = f"ratchet-wire-test-{uuid.uuid4().hex}"
    try:
        await client.set(key, "not a number")
        wire.proxy.arm(WireAction.REPLY_LOST)
        with pytest.raises(redis.exceptions.ResponseError):
            await client.execute_command("INCR", key)
        assert wire.proxy.met() == ()
        await client.set(key, "1")  # redis-py re-sends the lost SET: still "1"
        (hit,) = wire.proxy.disarm()
        assert hit.request == "SET"
        assert await client.get(key) == b"1"
    finally:
        wire.proxy.disarm()
        await client.delete(key)
        await client.aclose()


@pytest.mark.service("redis")
async def test_each_action_against_redis() -> None:
    wire = route("redis")
    client = redis_client(wire.endpoint)
    key = f"ratchet-wire-test-{uuid.uuid4().hex}"
    try:
        assert await client.execute_command("INCR", key) == 1
        # The answer is lost after the server applied: redis-py re-sends, so INCR runs twice.
        wire.proxy.arm(WireAction.REPLY_LOST)
        assert await client.execute_command("INCR", key) == 3
        (hit,) = wire.proxy.disarm()
        assert hit.request == "INCR" and hit.action is WireAction.REPLY_LOST
        # Reset before it left: the server never saw the first try; the re-send applies once.
        wire.proxy.arm(WireAction.RESET_BEFORE)
        assert await client.execute_command("INCR", key) == 4
        assert len(wire.proxy.disarm()) == 1
        # Three lost answers exhaust redis-py's two retries: the caller sees the error, yet all
        # three applied.
        wire.proxy.arm(WireAction.REPLY_LOST, requests=3)
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.execute_command("INCR", key)
        assert len(wire.proxy.disarm()) == 3
        assert await client.execute_command("GET", key) == b"7"
        wire.proxy.partition(True)
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.execute_command("INCR", key)
        wire.proxy.partition(False)
        assert await client.execute_command("INCR", key) == 8
    finally:
        wire.proxy.disarm()
        wire.proxy.partition(False)
        await client.delete(key)
        await client.aclose()


@pytest.mark.service("redis")
async def test_a_lost_request_never_runs_and_the_client_times_out() -> None:
    """``REQUEST_LOST``: the request never reaches the server and nothing answers it; redis-py
    times out (the route's ``socket_timeout``), re-sends it on a new connection, and it runs once."""
    wire = route("redis")
    client = redis_client(wire.endpoint)
    key = f"ratchet-wire-test-{uuid.uuid4().hex}"
    try:
        wire.proxy.arm(WireAction.REQUEST_LOST)
        assert await client.execute_command("INCR", key) == 1  # the lost one never ran
        (hit,) = wire.proxy.disarm()
        assert hit.request == "INCR" and hit.action is WireAction.REQUEST_LOST
        assert await client.execute_command("INCR", key) == 2
    finally:
        wire.proxy.disarm()
        await client.delete(key)
        await client.aclose()


@pytest.mark.service("redis")
async def test_a_fault_may_let_the_first_requests_through() -> None:
    """``skip``: the first requests pass untouched and the fault meets the one after them."""
    wire = route("redis")
    client = redis_client(wire.endpoint)
    key = f"ratchet-wire-test-{uuid.uuid4().hex}"
    try:
        wire.proxy.arm(WireAction.REPLY_LOST, skip=2)
        assert await client.execute_command("INCR", key) == 1
        assert await client.execute_command("INCR", key) == 2
        assert wire.proxy.met() == ()
        assert await client.execute_command("INCR", key) == 4  # lost, re-sent by redis-py: twice
        (hit,) = wire.proxy.disarm()
        assert hit.request == "INCR"
    finally:
        wire.proxy.disarm()
        await client.delete(key)
        await client.aclose()


@pytest.mark.service("cassandra")
async def test_a_cql_stall_outlasts_the_client_timeout_and_keeps_the_connection() -> None:
    """On Cassandra the store gets a client timeout below the stall (``?request_timeout_s=``):
    cassandra-driver gives up on the lightweight transaction (OperationTimedOut: its outcome is
    unknown), the connection lives on, and the next statement is answered once the stall ends,
    which shows the write applied. A lost request (``REQUEST_LOST``) times out alike, unapplied."""
    from cassandra import ConsistencyLevel, OperationTimedOut
    from cassandra.query import SimpleStatement

    from impls.cql import CqlSettings
    from impls.cql._bridge import execute
    from impls.cql._session import open_keyspace

    wire = route("cassandra")
    settings = CqlSettings.from_endpoint(wire.endpoint)
    assert settings.request_timeout_s < wire.proxy.stall_s and wire.proxy.release_stalls
    session = (await open_keyspace(settings)).session
    key = uuid.uuid4().hex
    table = f"{settings.keyspace}.ratchet_wire_probe"
    await execute(
        session, SimpleStatement(f"CREATE TABLE IF NOT EXISTS {table} (k text PRIMARY KEY)"), timeout=60
    )

    async def timed_out_insert(action: WireAction, value: str) -> None:
        wire.proxy.arm(action)
        with pytest.raises(OperationTimedOut):
            insert = SimpleStatement(f"INSERT INTO {table} (k) VALUES ('{value}') IF NOT EXISTS")
            await execute(session, insert, timeout=settings.request_timeout_s)
        (hit,) = wire.proxy.disarm()
        assert hit.action is action

    try:
        await timed_out_insert(WireAction.STALL, key)
        select = SimpleStatement(f"SELECT k FROM {table} WHERE k = '{key}'")
        page = await execute(session, select, timeout=settings.request_timeout_s)
        assert [row["k"] for row in page.rows] == [key]
        # A lost request times out the same way, but never ran: the SERIAL read finds nothing, and
        # the connection serves the next statement at once.
        lost = uuid.uuid4().hex
        await timed_out_insert(WireAction.REQUEST_LOST, lost)
        serial = SimpleStatement(f"SELECT k FROM {table} WHERE k = '{lost}'")
        serial.consistency_level = ConsistencyLevel.SERIAL
        page = await execute(session, serial, timeout=settings.request_timeout_s)
        assert list(page.rows) == []
    finally:
        wire.proxy.disarm()


@pytest.mark.service("postgres")
def test_a_lost_commit_answer_is_the_answer_of_the_commit_run_not_of_its_prepare() -> None:
    """psycopg prepares a statement in a round trip of its own (Parse, Sync; at once with
    ``prepare_threshold=0``, at its fifth run by default) and runs it in the next (Bind). A
    reply-lost COMMIT fault must meet the run: the transaction commits and only the answer is
    lost. Spent on the prepare, it reset the connection before COMMIT ran, so nothing committed
    while the suite's model took the fate "unknown, applied" (S-ROUTE-03 on PostgreSQL, seeds
    1511222201 and 3141592653; docs/faults.md)."""
    wire = route("postgres")
    table = f"ratchet_wire_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn(), autocommit=True) as direct:
        direct.execute(f"CREATE TABLE {table} (n int)")
        try:
            with psycopg.connect(wire.endpoint, autocommit=True, prepare_threshold=0) as client:
                client.execute("BEGIN")
                client.execute(f"INSERT INTO {table} VALUES (1)")
                wire.proxy.arm(WireAction.REPLY_LOST, 1, match="COMMIT")
                with pytest.raises(psycopg.OperationalError):
                    client.execute("COMMIT")
            (hit,) = wire.proxy.disarm()
            assert (hit.action, hit.request) == (WireAction.REPLY_LOST, "COMMIT")
            assert direct.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)
        finally:
            wire.proxy.disarm()
            direct.execute(f"DROP TABLE {table}")
