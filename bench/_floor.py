"""The raw floor: what each server does for a trivial request on one connection, in the same run.

Ratchet's commit rate means little alone: a commit is a few server round trips, and a round trip
costs what the server, the driver and this machine make it cost. So the bench measures, beside
every commit-rate run, the fastest the same client library can go:

* Redis (redis.asyncio, the client the store uses, configured by ``impls.redis.redis_client``):
  ``EVALSHA`` of a script that returns 1, and the same call made as many times in a row as one
  fresh commit makes round trips (the floor Ratchet's commit rate is compared with);
* Cassandra (cassandra-driver, one session, QUORUM/SERIAL like the store, synchronous
  ``Session.execute``, the driver's cheapest path): an ``INSERT ... IF NOT EXISTS`` of a new row
  (a trivial lightweight transaction), a plain ``SELECT`` by primary key, and as many trivial
  LWTs in a row as one fresh commit makes round trips (the floor Ratchet is compared with), and as
  many plain SELECTs. A CQL commit's statements are a mix: Paxos rounds (SERIAL reads, conditional
  writes) and plain writes of side tables, so Ratchet's rate may exceed the all-LWT floor; the
  all-SELECT figure bounds it from above.
  The probe table lives in its own keyspace, ``ratchet_bench``, created if missing.
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
BENCH_KEYSPACE = "ratchet_bench"


@attrs.frozen
class Probe:
    name: str
    round_trips: int  # server round trips per operation
    operation: Operation
    commit_shaped: bool = False  # as many round trips as one fresh commit


@attrs.frozen
class FloorProbe:
    name: str
    round_trips: int
    per_second: Spread
    cpu_us_per_op: Spread  # this process's CPU time per operation: the client library's share
    commit_shaped: bool


@attrs.frozen
class Floor:
    backend: str
    server: str
    probes: tuple[FloorProbe, ...]

    def commit_shaped(self) -> FloorProbe | None:
        return next((p for p in self.probes if p.commit_shaped), None)


class FloorServer(Protocol):
    server: str

    def probes(self, commit_round_trips: int) -> list[Probe]: ...

    async def close(self) -> None: ...


async def timed_loop(operation: Operation, seconds: float) -> Stopwatch:
    """``operation`` back to back for ``seconds``; the stopwatch holds count, rate and CPU time."""
    watch = Stopwatch(seconds, minimum=3)
    while watch.running():
        await operation()
        watch.tick()
    return watch


class RedisFloor:
    def __init__(self, client: Any, sha: str, version: str) -> None:
        self._client = client
        self._sha = sha
        self.server = f"Redis {version}"

    @classmethod
    async def open(cls) -> RedisFloor:
        from impls.redis import redis_client

        client = redis_client()
        try:
            sha = await client.script_load(TRIVIAL_SCRIPT)
            info = await client.info("server")
        except BaseException:
            await client.aclose()
            raise
        sha_text = sha.decode() if isinstance(sha, bytes) else str(sha)
        return cls(client, sha_text, str(info.get("redis_version", "?")))

    async def _evalsha(self) -> None:
        # The same raw command path the store's gateway uses, so the floor pays what Ratchet pays.
        await self._client.execute_command("EVALSHA", self._sha, 0)

    def probes(self, commit_round_trips: int) -> list[Probe]:
        async def commit_shaped() -> None:
            for _ in range(commit_round_trips):
                await self._evalsha()

        return [
            Probe("EVALSHA trivial script", 1, self._evalsha),
            Probe(
                f"{commit_round_trips} x EVALSHA (a commit's round trips)",
                commit_round_trips,
                commit_shaped,
                True,
            ),
        ]

    async def close(self) -> None:
        await self._client.aclose()


class CqlFloor:
    def __init__(self, cluster: Any, session: Any, version: str) -> None:
        self._cluster = cluster
        self._session = session
        self.server = f"Cassandra {version}"
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
        async def commit_shaped() -> None:
            for _ in range(commit_round_trips):
                await self._lwt()

        async def reads() -> None:
            for _ in range(commit_round_trips):
                await self._read()

        return [
            Probe("LWT INSERT IF NOT EXISTS", 1, self._lwt),
            Probe("SELECT by primary key", 1, self._read),
            Probe(
                f"{commit_round_trips} x LWT (a commit's round trips)",
                commit_round_trips,
                commit_shaped,
                True,
            ),
            Probe(f"{commit_round_trips} x SELECT (the same, all plain reads)", commit_round_trips, reads),
        ]

    async def close(self) -> None:
        self._cluster.shutdown()


async def open_floor(backend: str) -> FloorServer | None:
    """The raw floor of ``backend``'s server; None for embedded backends (no server to measure)."""
    if backend == "redis":
        return await RedisFloor.open()
    if backend == "cql":
        return CqlFloor.open()
    return None
