"""The backends Ratchet knows by name, and how to open them: the one registry.

Entries name their factories as ``module:function`` strings so that choosing ``memory`` never
imports a database driver. A third-party store is the same thing given on the command line
(``--store mypkg.store:make_store``).

Everything that lists backends reads them from here: the CLI's groups (``--backend embedded``,
``real``, ``all``; ``BACKEND_GROUPS``), the Makefile (through those groups), and the tests'
parameter lists (``tests/_backends.py``). A new backend is its package plus one entry below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

import attrs

if TYPE_CHECKING:
    from impls.api import OutboxFactory, StoreFactory


@attrs.frozen
class BackendSpec:
    name: str
    store_factory: str  # "module:function" returning a MessageStore for (namespace, membership)
    outbox_factory: str  # "module:function" returning an Outbox for (namespace)
    service: str | None  # the real service it needs (conformance/services/), None if embedded
    description: str
    control: str | None = None  # "module:function" returning a conformance.crash.ServiceControl
    in_process: bool = False  # its state lives in the store object: reopen does not apply
    #: Examples per profile when fewer than the suite's (BackendUnderTest.examples); a
    #: ``"<profile>:<suite>"`` key caps one suite of the profile (conformance._runner.planned_examples).
    examples: Mapping[str, int] = attrs.field(factory=dict)


COMMIT_BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "memory",
            "impls.memory:open_store",
            "impls.memory:open_outbox",
            None,
            "asyncio in-memory store, atomic Recorded+publication->Committed",
            in_process=True,
        ),
        BackendSpec(
            "fakeredis",
            "impls.redis:open_fakeredis_store",
            "impls.redis:open_fakeredis_outbox",
            None,
            "the Redis store's scripts on fakeredis (embedded, Lua via lupa)",
        ),
        BackendSpec(
            "redis",
            "impls.redis:open_redis_store",
            "impls.redis:open_redis_outbox",
            "redis",
            "the Redis store on a real Redis 7 server",
            control="conformance.crash:redis_control",
            # With the wire opening (wire, seam and legacy walks, docs/ci-gate.md) 100 examples
            # predict every target's miss below 1e-3 per run, over the fixed seed and two others.
            examples={"ci": 100},
        ),
        BackendSpec(
            "cql",
            "impls.cql:open_cql_store",
            "impls.cql:open_cql_outbox",
            "cassandra",
            "Cassandra/ScyllaDB with lightweight transactions, default two-step commit",
            control="conformance.crash:cassandra_control",
            # Every call a lightweight transaction (~20 steps/s; 50-56 ms of Cassandra's CPU a step,
            # its wire stalls 1.5 s each): the store and commit suites draw the same programs on
            # every backend, and the embedded ones run the suites' full count. 80 examples reach
            # every target of both suites with the fixed seed; the commit suite's rarest target was
            # reached by 19 of 85 examples (final18), so 40 predict its miss at (1 - 19/85)^40 < 1e-4
            # per run, while the store suite's rarest (8 of 107) keeps its 80 (docs/ci-gate.md,
            # "make test's budget").
            examples={"ci": 80, "ci:commit": 40},
        ),
    )
}


@attrs.frozen
class SagaBackendSpec:
    name: str
    #: "module:function": for role ``backend`` an ``impls.saga.SagaBackend`` for (namespace), which
    #: Ratchet's runtime runs over; for role ``runtime`` a whole runtime under test
    #: (``conformance.saga._port.SagaRuntime``) for (namespace, fates, stats).
    factory: str
    service: str | None
    description: str
    role: str = "backend"
    #: Built before it can run (not part of ``make conformance``): what builds it.
    build: str | None = None
    control: str | None = None  # "module:function" returning a conformance.crash.ServiceControl
    in_process: bool = False  # its state lives in the backend object: reopen does not apply
    #: Examples per profile when fewer than the suite's (BackendUnderTest.examples).
    examples: Mapping[str, int] = attrs.field(factory=dict)


SAGA_BACKENDS: dict[str, SagaBackendSpec] = {
    spec.name: spec
    for spec in (
        SagaBackendSpec(
            "memory",
            "impls.saga.memory:open_memory_saga_backend",
            None,
            "dict tables, copy-on-begin transactions",
            in_process=True,  # close() drops the namespace's tables: a reopen finds none
        ),
        SagaBackendSpec(
            "sqlite",
            "impls.sql:open_sqlite_saga_backend",
            None,
            "the shared SQL saga backend on SQLite (BEGIN IMMEDIATE, in-memory database per namespace)",
            in_process=True,
        ),
        SagaBackendSpec(
            "postgres",
            "impls.sql:open_postgres_saga_backend",
            "postgres",
            "the shared SQL saga backend on PostgreSQL (psycopg 3, SERIALIZABLE + FOR UPDATE, shared tables)",
            control="conformance.crash:postgres_control",
            # With reorder_walk and the wire walk (docs/ci-gate.md) 100 examples predict every
            # target's miss below 1e-3 per run, over the fixed seed and two others.
            examples={"ci": 100},
        ),
        SagaBackendSpec(
            "mysql",
            "impls.sql:open_mysql_saga_backend",
            "mariadb",
            "the shared SQL saga backend on MariaDB/MySQL (PyMySQL, InnoDB SERIALIZABLE + FOR UPDATE)",
            control="conformance.crash:mariadb_control",
            # With reorder_walk and the wire walk (docs/ci-gate.md) 100 examples predict every
            # target's miss below 1e-3 per run, over the fixed seed and two others.
            examples={"ci": 100},
        ),
        SagaBackendSpec(
            "nasaga-pg",
            "conformance.saga._nasaga:open_nasaga_pg",
            "postgres",
            "the real nasaga runtime (nasaga-runtime-pgsql 2.0.2) in its host (hosts/nasaga)",
            role="runtime",
            build="make nasaga-host",
            # ~25 steps/s on a quiet machine (each call one JSON line to the host and its database).
            # Its rare targets (kills, races, wire faults, the non-JSON start) are directed by the
            # opening (conformance/saga/_host_faults.py), so 45 examples reach every applicable
            # target with a predicted miss below 1e-3 per run (docs/ci-gate.md, "reach"); 100 before.
            examples={"ci": 45},
        ),
        SagaBackendSpec(
            "nasaga-mysql",
            "conformance.saga._nasaga:open_nasaga_mysql",
            "mariadb",
            "the real nasaga runtime (nasaga-runtime 2.0.2, MySQL) in its host, on the project's MariaDB",
            role="runtime",
            build="make nasaga-host",
            # ~25 steps/s (each call one JSON line to the host and its database): 60 examples reach
            # every applicable target with the fixed seed in about a minute.
            examples={"ci": 60},
        ),
    )
}


@attrs.frozen
class TransportBackendSpec:
    name: str
    #: Role -> "module:function": ``streams`` (a streams client, impls.transport) for the Redis
    #: Streams connector; ``kafka`` (the bootstrap servers) and ``broker_control`` for Kafka's.
    factories: Mapping[str, str]
    service: str | None
    description: str
    #: Examples per profile when fewer than the suite's (BackendUnderTest.examples).
    examples: Mapping[str, int] = attrs.field(factory=dict)
    #: Steps per example per profile when fewer than the suite's (BackendUnderTest.steps).
    steps: Mapping[str, int] = attrs.field(factory=dict)
    build: str | None = None  # what builds it first (another runtime's connectors, in its host)

    @property
    def streams(self) -> str | None:
        """The streams-client factory, for a Redis Streams backend (None for Kafka)."""
        return self.factories.get("streams")


TRANSPORT_BACKENDS: dict[str, TransportBackendSpec] = {
    spec.name: spec
    for spec in (
        TransportBackendSpec(
            "fakeredis",
            {"streams": "impls.transport:open_fakeredis_client"},
            None,
            "the Redis Streams connector on fakeredis (embedded, Lua via lupa); gRPC over loopback mTLS",
        ),
        TransportBackendSpec(
            "redis",
            # restarted with entries pending in profile deep only (_stream_restart.py)
            {
                "streams": "impls.transport:open_redis_client",
                "stream_control": "conformance.crash:redis_control",
            },
            "redis",
            "the Redis Streams connector on the real Redis 7 server; gRPC over loopback mTLS",
        ),
        TransportBackendSpec(
            "kafka",
            {"kafka": "impls.endpoints:kafka_bootstrap", "broker_control": "conformance.crash:kafka_control"},
            "kafka",
            "the Kafka connector (confluent-kafka) on the project's KRaft broker; broker kill -9 and restart",
            # Every step is broker round trips (and a rebalance half a second): fewer examples.
            examples={"ci": 20},
            steps={"ci": 15},
        ),
        TransportBackendSpec(
            "nasaga-redis-stream",
            {
                "streams": "impls.transport:open_redis_client",
                "target": "conformance.transport._nasaga_target:nasaga_target",
                "stream_control": "conformance.crash:redis_control",  # profile deep only
            },
            "redis",  # and PostgreSQL under the host: its outage is an environment error there too
            "nasaga's Redis Streams connector (feature redis-stream) in its host, on the real Redis 7",
            # Every step is a host round trip and every example a namespace of its own: a CI gate's
            # worth is a dozen examples (about a minute), a soak's a hundred.
            examples={"ci": 12, "deep": 100},
            build="make nasaga-host",
        ),
        TransportBackendSpec(
            "nasaga-grpc",
            {"target": "conformance.transport._nasaga_target:nasaga_grpc_target"},
            "postgres",  # nasaga's runtime under the host's listeners
            "nasaga's gRPC transport (feature grpc-transport) in its host: nagrpc listeners, mutual TLS",
            # Every step is gRPC calls plus host read-backs: 8 examples reach every target with the
            # fixed seed in about 40 s.
            examples={"ci": 8, "deep": 100},
            build="make nasaga-host",
        ),
        TransportBackendSpec(
            "nasaga-kafka",
            {
                "kafka": "impls.endpoints:kafka_bootstrap",
                "target": "conformance.transport._nasaga_kafka_target:nasaga_kafka_target",
                # restarted by the walk in profile deep only (_nasaga_kafka_restart.py)
                "broker_control": "conformance.crash:kafka_control",
            },
            "kafka",  # and PostgreSQL under the host: its outage is an environment error there too
            "nasaga's Kafka command consumer (feature kafka, nafka) in its host, on the project's broker",
            # Every rule publishes and then waits until the consumer settled (a back-off, a host
            # restart and its group join take seconds): a handful of short examples. Each opens
            # with publish_planned and the directed walk (first_start), so swarm testing cannot
            # leave a rule unrun (at 6 and then 10 examples it once did, before that opening).
            examples={"ci": 6, "deep": 40},
            steps={"ci": 10},
            build="make nasaga-host",
        ),
    )
}

#: The Redis Streams backends (a streams-client factory each): the connector tests and the bench.
STREAM_BACKENDS = {name: spec for name, spec in TRANSPORT_BACKENDS.items() if spec.streams is not None}


AnySpec = BackendSpec | SagaBackendSpec | TransportBackendSpec

#: Registry per suite family (conformance/_suites.py's ``Family.name``).
REGISTRIES: Mapping[str, Mapping[str, AnySpec]] = {
    "commit": COMMIT_BACKENDS,
    "saga": SAGA_BACKENDS,
    "transport": TRANSPORT_BACKENDS,
}


def _built(spec: AnySpec) -> bool:
    return not isinstance(spec, BackendSpec) and spec.build is not None


#: ``--backend`` group -> which registered backends it means (in any family).
BACKEND_GROUPS: Mapping[str, Callable[[AnySpec], bool]] = {
    "embedded": lambda spec: spec.service is None and not _built(spec),  # no server, nothing to build
    "real": lambda spec: spec.service is not None and not _built(spec),  # a server `make services` starts
    "built": _built,  # a runtime under test built first (make nasaga-host)
    "all": lambda spec: True,
}


def backend_names(family: str, group: str = "all") -> tuple[str, ...]:
    """The registered backends of ``family`` in ``group`` (``BACKEND_GROUPS``), in registry order."""
    wanted = BACKEND_GROUPS[group]
    return tuple(name for name, spec in REGISTRIES[family].items() if wanted(spec))


def expand_backends(names: Iterable[str], families: Iterable[str]) -> list[str]:
    """``--backend``'s list with each group replaced by its members of ``families``; order kept,
    duplicates dropped; ``-name`` drops one (``embedded,real,-kafka``). A plain name is kept as
    given (the caller says when it is unknown)."""
    families = tuple(families)
    names = list(names)
    dropped = {name[1:] for name in names if name.startswith("-")}
    expanded: list[str] = []
    for name in names:
        if name.startswith("-"):
            continue
        if name in BACKEND_GROUPS:
            expanded.extend(b for family in families for b in backend_names(family, name))
        else:
            expanded.append(name)
    return [name for name in dict.fromkeys(expanded) if name not in dropped]


#: The extra (pyproject.toml) that brings each driver a backend imports.
DRIVER_EXTRAS = {
    "redis": "redis",
    "fakeredis": "redis",
    "lupa": "redis",
    "cassandra": "cql",
    "psycopg": "sql",
    "pymysql": "sql",
    "pytest": "pytest",
    "crosshair": "crosshair",
    "grpc": "transport",
    "grpc_tools": "transport",
    "google": "transport",
    "cryptography": "transport",
    "confluent_kafka": "transport",
}


def load_object(path: str) -> object:
    """Import ``module:attribute``; raises ``ValueError`` with a readable reason."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected MODULE:FACTORY, got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = DRIVER_EXTRAS.get((exc.name or "").partition(".")[0])
        hint = f" (install it with: pip install 'ratchet-conformance[{extra}]')" if extra else ""
        raise ValueError(f"cannot import {module_name!r}: {exc}{hint}") from exc
    try:
        return cast(object, getattr(module, attribute))
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None


def store_factory(spec: BackendSpec) -> StoreFactory:
    return cast("StoreFactory", load_object(spec.store_factory))


def outbox_factory(spec: BackendSpec) -> OutboxFactory:
    return cast("OutboxFactory", load_object(spec.outbox_factory))
