"""One driver ``Cluster``/``Session`` per contact point for the whole process, and the schema.

Opening a cluster costs a control connection, a pool and a schema download (a tenth of a second
at best), so every store and outbox on a contact point shares one session; ``close()`` on a store
leaves it alone and ``shutdown_sessions`` closes them (the driver also closes every cluster at
interpreter exit).

The keyspace and tables are created the first time a process uses a (contact point, keyspace):
``CREATE ... IF NOT EXISTS`` statements under a process-wide lock, then a wait for schema
agreement, then every ``Statement`` is prepared once. Nothing is cached after a failure, so a
process that started before the server did simply tries again on its next call.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

import attrs
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy
from cassandra.query import dict_factory

from impls.cql._boundary import Operation, translate
from impls.cql._schema import TABLES, Statement, keyspace_ddl
from impls.endpoints import CQL_DEFAULT_PORT, SERVICES, endpoint
from model.commit import MessageStoreError, StoreErrorKind

CONTACT_ENV = SERVICES["cassandra"].env_var
DEFAULT_CONTACT = SERVICES["cassandra"].default
DEFAULT_PORT = CQL_DEFAULT_PORT  # for a contact that names only a host


def contact_from_env() -> str:
    return endpoint("cassandra")


def simple_replication(factor: int) -> dict[str, str]:
    """``SimpleStrategy`` with ``factor`` replicas: 1 for the single test node, 3 for a ring."""
    return {"class": "SimpleStrategy", "replication_factor": str(factor)}


@attrs.frozen
class CqlSettings:
    """Where the backend lives and how it talks to it. Defaults suit the local test server.

    ``contact`` is one ``host:port`` or, for a ring, several contact points sharing one port
    (``127.0.0.1:9042,127.0.0.2:9042,127.0.0.3:9042``): the driver starts from any that answers and
    finds the others through the ring's own peer tables, so one node away does not stop a connect.
    """

    contact: str = attrs.field(factory=contact_from_env)  # "host:port[,host:port...]"
    keyspace: str = "ratchet"
    replication: Mapping[str, str] = attrs.field(factory=lambda: simple_replication(1))
    request_timeout_s: float = 10.0  # client-side; past it the driver raises OperationTimedOut
    connect_timeout_s: float = 5.0
    schema_timeout_s: float = 60.0

    @classmethod
    def from_endpoint(cls, endpoint: str | None) -> CqlSettings:
        """Settings for a contact (``host:port``, or a ring's comma-separated contact points),
        optionally with ``?request_timeout_s=S`` (the form the harness's fault proxy hands a store,
        so a stalled answer outlasts the client's timeout) and ``replication_factor=N`` (a ring's
        keyspace: N replicas, so QUORUM and SERIAL need N // 2 + 1 of them)."""
        if endpoint is None:
            return cls()
        contact, _, text = endpoint.partition("?")
        options = parse_qs(text)
        changes: dict[str, Any] = {"contact": contact}
        try:
            if "request_timeout_s" in options:
                changes["request_timeout_s"] = float(options["request_timeout_s"][-1])
            if "replication_factor" in options:
                factor = int(options["replication_factor"][-1])
                if factor < 1:
                    raise ValueError(factor)
                changes["replication"] = simple_replication(factor)
        except ValueError:
            detail = "the request timeout is not a number, or the replication factor not a whole number >= 1"
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, detail) from None
        return cls(**changes)


@attrs.frozen(eq=False)
class Keyspace:
    """A live session whose keyspace and tables exist, with its prepared statements."""

    session: Any
    prepared: Mapping[Statement, Any]
    settings: CqlSettings

    def statement(self, which: Statement) -> Any:
        return self.prepared[which]


@attrs.define(eq=False)
class _Connection:
    cluster: Any
    session: Any
    keyspaces: dict[str, Keyspace] = attrs.field(factory=dict)


_lock = threading.Lock()
_connections: dict[str, _Connection] = {}


def _forget_after_fork() -> None:
    """A forked process cannot use the parent's driver sessions (their I/O threads stay behind)."""
    global _lock
    _lock = threading.Lock()
    _connections.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _split_contact(contact: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` (the forms impls.endpoints accepts)."""
    value = contact.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    else:  # a bare host name or IPv6 address
        host, port = value, ""
    if not host or not (port.isdigit() or port == ""):
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database address is not host:port")
    return host, int(port) if port else DEFAULT_PORT


def _contact_points(contact: str) -> tuple[list[str], int]:
    """The hosts of one or several comma-separated contact points, which must share a port (the
    driver's ``Cluster`` takes one port for all of them)."""
    points = [_split_contact(part) for part in contact.split(",")]
    ports = {port for _, port in points}
    if len(ports) != 1:
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the ring's contact points use different ports")
    return [host for host, _ in points], ports.pop()


def _connect(settings: CqlSettings) -> _Connection:
    hosts, port = _contact_points(settings.contact)
    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(),
        consistency_level=ConsistencyLevel.QUORUM,
        serial_consistency_level=ConsistencyLevel.SERIAL,
        request_timeout=settings.request_timeout_s,
        row_factory=dict_factory,
    )
    cluster = Cluster(
        contact_points=hosts,
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=settings.connect_timeout_s,
        control_connection_timeout=settings.connect_timeout_s,
        # A host marked down after one reset connection comes back within a second, not after the
        # driver's default schedule (1 s doubling up to 10 minutes), which no caller would wait out.
        reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.05, max_delay=1.0),
    )
    try:
        session = cluster.connect()
    except BaseException:
        cluster.shutdown()
        raise
    return _Connection(cluster, session)


def _prepare_keyspace(connection: _Connection, settings: CqlSettings) -> Keyspace:
    try:
        ddl = keyspace_ddl(settings.keyspace, settings.replication)
    except ValueError:
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the keyspace settings are not usable") from None
    session = connection.session
    timeout = settings.schema_timeout_s
    session.execute(ddl, timeout=timeout)
    for table in TABLES:
        session.execute(table.format(ks=settings.keyspace), timeout=timeout)
    # DDL responses already wait for agreement; this makes a missed one an error, not a surprise.
    if not connection.cluster.control_connection.wait_for_schema_agreement(wait_time=timeout):
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database schema did not settle")
    prepared = {which: session.prepare(which.text(settings.keyspace)) for which in Statement}
    return Keyspace(session, prepared, settings)


def _open_blocking(settings: CqlSettings) -> Keyspace:
    with _lock:
        connection = _connections.get(settings.contact)
        if connection is None:
            connection = _connect(settings)
            _connections[settings.contact] = connection
        keyspace = connection.keyspaces.get(settings.keyspace)
        if keyspace is None or keyspace.settings != settings:
            keyspace = _prepare_keyspace(connection, settings)
            connection.keyspaces[settings.keyspace] = keyspace
        return keyspace


def _ready(settings: CqlSettings) -> Keyspace | None:
    connection = _connections.get(settings.contact)
    keyspace = None if connection is None else connection.keyspaces.get(settings.keyspace)
    return keyspace if keyspace is not None and keyspace.settings == settings else None


async def open_keyspace(settings: CqlSettings) -> Keyspace:
    """The shared session for ``settings``, connected and with its schema in place.

    Connecting, DDL and preparing block, so the first call per process runs them in a worker
    thread; later calls return the cached keyspace without leaving the loop.
    """
    keyspace = _ready(settings)
    if keyspace is not None:
        return keyspace
    try:
        return await asyncio.to_thread(_open_blocking, settings)
    except Exception as exc:
        raise translate(exc, Operation.SETUP) from None


def shutdown_sessions(contact: str | None = None) -> None:
    """Close the shared cluster of ``contact`` (default: all of them). A later call reconnects.

    For process exit, and for tests that point a store at a server they are about to take away.
    """
    with _lock:
        if contact is None:
            connections = list(_connections.values())
            _connections.clear()
        else:
            dropped = _connections.pop(contact, None)
            connections = [] if dropped is None else [dropped]
    for connection in connections:
        connection.cluster.shutdown()
