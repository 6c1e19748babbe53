"""The raw floor: what each server does for a trivial request on one connection, in the same run.

Ratchet's commit rate means little alone: a commit is a few server round trips, and a round trip
costs what the server, the driver and this machine make it cost. So the bench measures, beside
every commit-rate run, the fastest the same client library can go:

* Redis (redis.asyncio, the client the store uses, configured by ``impls.redis.redis_client``):
  ``EVALSHA`` of a script that returns 1 and of a script that writes one key (``SET``), each alone
  and made as many times in a row as one fresh commit makes round trips. Every round trip of a
  fresh commit writes (reserve, put_record, the outbox's append, the commit transition), and on a
  durable server (``appendfsync always``) each write is fsynced before its reply; so the writing
  probe is the like-for-like floor Ratchet's commit rate is compared with, and the read-only one,
  which pays no fsync, is printed beside it;
* Cassandra (cassandra-driver, one session, QUORUM/SERIAL like the store, synchronous
  ``Session.execute``, the driver's cheapest path): an ``INSERT ... IF NOT EXISTS`` of a new row
  (a trivial lightweight transaction), a plain ``SELECT`` by primary key, and as many trivial
  LWTs in a row as one fresh commit makes round trips (the floor Ratchet is compared with), and as
  many plain SELECTs. A CQL commit's statements are a mix: Paxos rounds (SERIAL reads, conditional
  writes) and plain writes of side tables, each of which reaches the commit log, so Ratchet's rate
  may exceed the all-LWT floor; the all-SELECT figure (nothing written) bounds it from above.
  The probe table lives in its own keyspace, ``ratchet_bench``, created if missing.

Each floor says the durability its server runs with (``CONFIG GET appendonly`` / ``appendfsync``;
Cassandra's ``commitlog_sync`` from ``system_views.settings``), since a write's cost depends on it
more than on anything Ratchet does: a figure is only ever compared with a floor of the same server
in the same configuration, measured in the same run.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

from bench._figures import Spread, Stopwatch

Operation = Callable[[], Awaitable[None]]
TRIVIAL_SCRIPT = "return 1"
WRITE_SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]) return 1"
BENCH_KEYSPACE = "ratchet_bench"
UNKNOWN_DURABILITY = "durability unknown"

# What a probe is, beside the commit it is compared with (``Probe.shape``).
SINGLE = "single"  # one request
LIKE_FOR_LIKE = "like-for-like"  # a commit's round trips, each writing as a commit's do: the target's floor
READ_ONLY = "read-only"  # a commit's round trips, nothing written (no fsync, no commit log)


@attrs.frozen
class Probe:
    name: str
    round_trips: int  # server round trips per operation
    operation: Operation
    shape: str = SINGLE
    writes: bool = False  # every round trip writes something the server makes durable


@attrs.frozen
class FloorProbe:
    name: str
    round_trips: int
    per_second: Spread
    cpu_us_per_op: Spread  # this process's CPU time per operation: the client library's share
    shape: str
    writes: bool


@attrs.frozen
class Floor:
    backend: str
    server: str
    durability: str  # the server's persistence settings, as it reported them
    probes: tuple[FloorProbe, ...]


class FloorServer(Protocol):
    server: str
    durability: str

    def probes(self, commit_round_trips: int) -> list[Probe]: ...

    async def close(self) -> None: ...


async def timed_loop(operation: Operation, seconds: float) -> Stopwatch:
    """``operation`` back to back for ``seconds``; the stopwatch holds count, rate and CPU time."""
    watch = Stopwatch(seconds, minimum=3)
    while watch.running():
        await operation()
        watch.tick()
    return watch


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def redis_durability(client: Any) -> str:
    """``appendonly yes, appendfsync always`` as the server reports it (``CONFIG GET``); a server
    that refuses CONFIG (renamed or ACL-denied) says so instead of guessing."""
    from redis.exceptions import ResponseError  # NoPermissionError too

    try:  # one round trip: appendonly, appendfsync (and the AOF's file names)
        found = {_text(k): _text(v) for k, v in (await client.config_get("append*")).items()}
    except ResponseError:  # unknown command (renamed away) or denied by an ACL: not known
        return UNKNOWN_DURABILITY
    shown = [f"{name} {found[name]}" for name in ("appendonly", "appendfsync") if name in found]
    return ", ".join(shown) or UNKNOWN_DURABILITY


class RedisFloor:
    def __init__(self, client: Any, shas: tuple[str, str], version: str, durability: str) -> None:
        self._client = client
        self._trivial, self._write = shas
        self._key = f"ratchet-bench:floor:{secrets.token_hex(4)}"  # one key, overwritten, deleted at close
        self.server = f"Redis {version}"
        self.durability = durability

    @classmethod
    async def open(cls) -> RedisFloor:
        from impls.redis import redis_client

        client = redis_client()
        try:
            trivial = _text(await client.script_load(TRIVIAL_SCRIPT))
            write = _text(await client.script_load(WRITE_SCRIPT))
            info = await client.info("server")
            durability = await redis_durability(client)
        except BaseException:
            await client.aclose()
            raise
        return cls(client, (trivial, write), str(info.get("redis_version", "?")), durability)

    # The same raw command path the store's gateway uses, so the floor pays what Ratchet pays.
    async def _evalsha(self) -> None:
        await self._client.execute_command("EVALSHA", self._trivial, 0)

    async def _evalsha_write(self) -> None:
        await self._client.execute_command("EVALSHA", self._write, 1, self._key, "1")

    def probes(self, commit_round_trips: int) -> list[Probe]:
        n = commit_round_trips

        async def writes() -> None:
            for _ in range(n):
                await self._evalsha_write()

        async def reads() -> None:
            for _ in range(n):
                await self._evalsha()

        return [
            Probe("EVALSHA `return 1`", 1, self._evalsha),
            Probe("EVALSHA `SET` of one key", 1, self._evalsha_write, writes=True),
            Probe(
                f"{n} x EVALSHA `SET` (a commit's round trips, each writing)", n, writes, LIKE_FOR_LIKE, True
            ),
            Probe(f"{n} x EVALSHA `return 1` (the same, nothing written)", n, reads, READ_ONLY),
        ]

    async def close(self) -> None:
        try:
            await self._client.delete(self._key)
        finally:
            await self._client.aclose()


class CqlFloor:
    def __init__(self, cluster: Any, session: Any, version: str) -> None:
        self._cluster = cluster
        self._session = session
        self.server = f"Cassandra {version}"
        self.durability = cql_durability(session)
        self._insert = session.prepare(
            f"INSERT INTO {BENCH_KEYSPACE}.floor (k, v) VALUES (?, ?) IF NOT EXISTS"
        )
        self._select = session.prepare(f"SELECT v FROM {BENCH_KEYSPACE}.floor WHERE k = ?")
        self._prefix = secrets.token_hex(4)
        self._serial = itertools.count()
        self._known = self._new_key()
        session.execute(self._insert, (self._known, 1))

    @classmethod
    def open(cls) -> CqlFloor:
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy

        from conformance.services import cql_contact

        host, port = cql_contact()
        profile = ExecutionProfile(
            load_balancing_policy=DCAwareRoundRobinPolicy(),
            consistency_level=ConsistencyLevel.QUORUM,
            serial_consistency_level=ConsistencyLevel.SERIAL,
            request_timeout=10.0,
        )
        cluster = Cluster(
            contact_points=[host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}
        )
        try:
            session = cluster.connect()
            session.execute(
                f"CREATE KEYSPACE IF NOT EXISTS {BENCH_KEYSPACE} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}",
                timeout=60.0,
            )
            session.execute(
                f"CREATE TABLE IF NOT EXISTS {BENCH_KEYSPACE}.floor (k text PRIMARY KEY, v int)", timeout=60.0
            )
            row = session.execute("SELECT release_version FROM system.local").one()
            return cls(cluster, session, str(row[0]) if row is not None else "?")
        except BaseException:
            cluster.shutdown()
            raise

    def _new_key(self) -> str:
        return f"{self._prefix}-{next(self._serial)}"

    async def _lwt(self) -> None:
        self._session.execute(self._insert, (self._new_key(), 1))

    async def _read(self) -> None:
        self._session.execute(self._select, (self._known,))

    def probes(self, commit_round_trips: int) -> list[Probe]:
        async def lwts() -> None:
            for _ in range(commit_round_trips):
                await self._lwt()

        async def reads() -> None:
            for _ in range(commit_round_trips):
                await self._read()

        n = commit_round_trips
        return [
            Probe("LWT INSERT IF NOT EXISTS", 1, self._lwt, writes=True),
            Probe("SELECT by primary key", 1, self._read),
            Probe(f"{n} x LWT (a commit's round trips)", n, lwts, LIKE_FOR_LIKE, True),
            Probe(f"{n} x SELECT (the same, all plain reads)", n, reads, READ_ONLY),
        ]

    async def close(self) -> None:
        self._cluster.shutdown()


def cql_durability(session: Any) -> str:
    """``commitlog_sync batch`` (or ``periodic, every 10000ms``) from the node's own settings table."""
    from cassandra import InvalidRequest, Unauthorized

    try:
        rows = session.execute(
            "SELECT name, value FROM system_views.settings WHERE name IN "
            "('commitlog_sync', 'commitlog_sync_period', 'commitlog_sync_group_window')"
        )
        found = {str(row[0]): str(row[1]) for row in rows}
    except (InvalidRequest, Unauthorized):  # a node without the virtual table, or not ours to read
        return UNKNOWN_DURABILITY
    mode = found.get("commitlog_sync")
    if mode is None:
        return UNKNOWN_DURABILITY
    window = {"periodic": "commitlog_sync_period", "group": "commitlog_sync_group_window"}.get(mode)
    every = f", every {found[window]}" if window is not None and found.get(window) else ""
    return f"commitlog_sync {mode}{every}"


async def open_floor(backend: str) -> FloorServer | None:
    """The raw floor of ``backend``'s server; None for embedded backends (no server to measure)."""
    if backend == "redis":
        return await RedisFloor.open()
    if backend == "cql":
        return CqlFloor.open()
    return None
