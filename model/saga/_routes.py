"""Capability routes: per-replica descriptors, catalog-allocated generations, transports.

A replica owning a step registers a ``CapabilityDescriptor``; the catalog answers with a
route *generation* it allocates itself under the capability key (S-ROUTE-02). The same
content re-reported (for instance after an unknown outcome) gets the generation already
committed; new content gets the next one. Clocks and caller-claimed generations are
never consulted (S-ROUTE-03).

One transport contract (``validate_transport``) serves registration, candidate
activation and publisher construction (S-ROUTE-04..08). A lease that ran out makes that
replica unroutable and touches nothing else (S-ROUTE-09).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._canonical import is_sha256_hex
from ._catalog import Catalog, CatalogEntry, admits_capability
from ._errors import (
    CapabilityRefused,
    DefinitionNotLoadable,
    LeaseExpired,
    RefusalReason,
    RouteInvalid,
    StaleGeneration,
    UnknownCapability,
    UnknownDefinition,
    UnknownStep,
)
from ._keys import CapabilityKey, TransportViolation
from ._values import DefinitionKey, Transport

_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_KAFKA_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_REDIS_CHARS = _KAFKA_CHARS | frozenset(":{}")


def _is_host(host: str) -> bool:
    if not 0 < len(host) <= 253:
        return False
    for label in host.split("."):
        if not 0 < len(label) <= 63 or label[0] == "-" or label[-1] == "-":
            return False
        if not all(c in _HOST_CHARS for c in label):
            return False
    return True


def _is_port(port: str) -> bool:
    return (
        0 < len(port) <= 5 and all(c in "0123456789" for c in port) and port[0] != "0" and int(port) <= 65535
    )


def is_bare_origin(text: str, schemes: tuple[str, ...]) -> bool:
    """``scheme://host[:port]`` with nothing else: no user info, path, query or fragment.

    Hosts are lower-case DNS names or dotted IPv4 (canonical form); IPv6 literals are
    outside this contract.

    post: (not __return__) or any(text.startswith(s + "://") for s in schemes)
    post: (not __return__) or not text.endswith("/")
    """
    for scheme in schemes:
        prefix = scheme + "://"
        if text.startswith(prefix):
            authority = text[len(prefix) :]
            break
    else:
        return False
    host, sep, port = authority.partition(":")
    if sep and not _is_port(port):
        return False
    return _is_host(host)


def is_canonical_base_path(path: str) -> bool:
    """``/`` or ``/seg(/seg)*`` of unreserved characters, no ``.``/``..``/empty segment.

    post: (not __return__) or path.startswith("/")
    post: (not __return__) or path == "/" or not path.endswith("/")
    """
    if path == "/":
        return True
    if not path.startswith("/") or len(path) > 1024:
        return False
    for segment in path[1:].split("/"):
        if segment in ("", ".", ".."):
            return False
        if not all(c in _PATH_CHARS for c in segment):
            return False
    return True


def is_kafka_topic(name: str) -> bool:
    """Kafka's topic naming rule: 1..249 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``.

    post: (not __return__) or 0 < len(name) <= 249
    """
    return 0 < len(name) <= 249 and name not in (".", "..") and all(c in _KAFKA_CHARS for c in name)


def is_redis_stream_key(name: str) -> bool:
    """The contract's Redis Streams key rule: 1..256 of ``[A-Za-z0-9._:{}-]``.

    No whitespace or control bytes (keys travel in logs and ``XADD`` commands); braces
    stay legal for cluster hash tags.

    post: (not __return__) or 0 < len(name) <= 256
    """
    return 0 < len(name) <= 256 and all(c in _REDIS_CHARS for c in name)


def validate_transport(
    transport: Transport, address: str, base_path: str | None
) -> TransportViolation | None:
    """The one transport contract (S-ROUTE-04..08).

    post: (__return__ is not None) or transport is Transport.HTTP or base_path is None
    post: (__return__ is not None) or transport is not Transport.GRPC or address.startswith("https://")
    post: (__return__ is not None) or transport is not Transport.HTTP or base_path is not None
    """
    if transport is Transport.HTTP:
        if not is_bare_origin(address, ("http", "https")):
            return TransportViolation.HTTP_ORIGIN_NOT_BARE
        if base_path is None or not is_canonical_base_path(base_path):
            return TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL
        return None
    if base_path is not None:
        return TransportViolation.PATH_ON_NON_HTTP
    if transport is Transport.GRPC:
        ok = is_bare_origin(address, ("https",))
        return None if ok else TransportViolation.GRPC_ORIGIN_NOT_BARE_HTTPS
    if transport is Transport.KAFKA:
        return None if is_kafka_topic(address) else TransportViolation.KAFKA_TOPIC_INVALID
    ok = is_redis_stream_key(address)
    return None if ok else TransportViolation.REDIS_STREAM_KEY_INVALID


@attrs.frozen
class CapabilityDescriptor:
    """What one replica of the step owner offers (S-ROUTE-01).

    ``address`` is the origin for HTTP/gRPC, the topic for Kafka and the stream key for
    Redis Streams; ``base_path`` is HTTP's effective saga base path and absent elsewhere.
    ``credentials_digest`` is the SHA-256 of the result credentials or backend secret.
    """

    key: CapabilityKey
    transport: Transport
    address: str
    base_path: str | None
    credentials_digest: str


@attrs.frozen
class RouteTarget:
    """Where messages to a route go; equal targets are one destination."""

    transport: Transport
    address: str
    base_path: str | None


def route_target(descriptor: CapabilityDescriptor) -> RouteTarget:
    return RouteTarget(descriptor.transport, descriptor.address, descriptor.base_path)


def descriptor_violation(descriptor: CapabilityDescriptor) -> TransportViolation | None:
    """The transport contract applied to a whole descriptor (S-ROUTE-04)."""
    if not is_sha256_hex(descriptor.credentials_digest):
        return TransportViolation.CREDENTIALS_DIGEST_INVALID
    return validate_transport(descriptor.transport, descriptor.address, descriptor.base_path)


@attrs.frozen
class CapabilityRoute:
    descriptor: CapabilityDescriptor
    generation: int
    lease_expires_ms: int

    def live_at(self, now_ms: int) -> bool:
        """A route is routable strictly before its lease expiry (S-ROUTE-09)."""
        return now_ms < self.lease_expires_ms


@attrs.frozen
class RouteTable:
    #: Routes are kept after expiry so the last generation is never forgotten.
    routes: Mapping[CapabilityKey, CapabilityRoute] = attrs.field(factory=dict)


def next_generation(previous: int | None, same_content: bool) -> int:
    """Generation for a (re-)registration under one key (S-ROUTE-02, S-ROUTE-03).

    pre: previous is None or previous >= 1
    post: __return__ >= 1
    post: previous is None or __return__ >= previous
    post: previous is None or same_content or __return__ > previous
    post: previous is None or not same_content or __return__ == previous
    """
    if previous is None:
        return 1
    return previous if same_content else previous + 1


@attrs.frozen
class RegisterCapability:
    """A replica's (re-)report. ``claimed_generation`` is carried and ignored (S-ROUTE-03)."""

    descriptor: CapabilityDescriptor
    principal: str
    lease_ms: int = attrs.field(validator=attrs.validators.gt(0))
    now_ms: int
    claimed_generation: int | None = None


@attrs.frozen
class CapabilityRegistered:
    """The receipt: the committed generation and lease expiry (S-ROUTE-02)."""

    key: CapabilityKey
    generation: int
    lease_expires_ms: int
    fresh: bool


RegisterOutcome: TypeAlias = (
    CapabilityRegistered
    | UnknownDefinition
    | DefinitionNotLoadable
    | UnknownStep
    | CapabilityRefused
    | RouteInvalid
)


def _owner_refusal(
    entry: CatalogEntry, key: CapabilityKey, principal: str
) -> CapabilityRefused | UnknownStep | None:
    steps = entry.artifact.steps
    if not 0 <= key.step_index < len(steps):
        return UnknownStep(key.definition, key.step_index)
    if principal != key.owner or key.owner != steps[key.step_index].owner:
        return CapabilityRefused(key, RefusalReason.OWNER_MISMATCH)
    return None


def register_capability(
    table: RouteTable, request: RegisterCapability, entry: CatalogEntry | None
) -> tuple[RouteTable, RegisterOutcome]:
    """Register or re-report a replica's route (S-ROUTE-01..04, S-CAT-09).

    ``entry`` is the catalog entry of the descriptor's definition (``None`` if unknown).
    """
    descriptor = request.descriptor
    key = descriptor.key
    if entry is None:
        return table, UnknownDefinition(key.definition)
    if not admits_capability(entry.lifecycle):
        return table, DefinitionNotLoadable(key.definition, entry.lifecycle)
    refusal = _owner_refusal(entry, key, request.principal)
    if refusal is not None:
        return table, refusal
    violation = descriptor_violation(descriptor)
    if violation is not None:
        return table, RouteInvalid(violation)
    existing = table.routes.get(key)
    same = existing is not None and existing.descriptor == descriptor
    generation = next_generation(None if existing is None else existing.generation, same)
    expires = request.now_ms + request.lease_ms
    if existing is not None:
        # A lease is never shortened by a late or repeated report.
        expires = max(expires, existing.lease_expires_ms)
    route = CapabilityRoute(descriptor, generation, expires)
    return (
        RouteTable({**table.routes, key: route}),
        CapabilityRegistered(key, generation, expires, fresh=not same),
    )


@attrs.frozen
class RenewCapability:
    key: CapabilityKey
    generation: int
    principal: str
    lease_ms: int = attrs.field(validator=attrs.validators.gt(0))
    now_ms: int


@attrs.frozen
class CapabilityRenewed:
    key: CapabilityKey
    generation: int
    lease_expires_ms: int


RenewOutcome: TypeAlias = (
    CapabilityRenewed
    | UnknownCapability
    | UnknownDefinition
    | DefinitionNotLoadable
    | CapabilityRefused
    | StaleGeneration
    | LeaseExpired
)


def renew_capability(
    table: RouteTable, request: RenewCapability, entry: CatalogEntry | None
) -> tuple[RouteTable, RenewOutcome]:
    """Extend a live lease of the current generation (S-ROUTE-02, S-ROUTE-09, S-CAT-09)."""
    route = table.routes.get(request.key)
    if route is None:
        return table, UnknownCapability(request.key)
    if entry is None:
        return table, UnknownDefinition(request.key.definition)
    if not admits_capability(entry.lifecycle):
        return table, DefinitionNotLoadable(request.key.definition, entry.lifecycle)
    if request.principal != request.key.owner:
        return table, CapabilityRefused(request.key, RefusalReason.OWNER_MISMATCH)
    if request.generation != route.generation:
        return table, StaleGeneration(request.key, request.generation, route.generation)
    if not route.live_at(request.now_ms):
        return table, LeaseExpired(request.key, route.lease_expires_ms)
    expires = max(route.lease_expires_ms, request.now_ms + request.lease_ms)
    renewed = attrs.evolve(route, lease_expires_ms=expires)
    return (
        RouteTable({**table.routes, request.key: renewed}),
        CapabilityRenewed(request.key, route.generation, expires),
    )


@attrs.frozen
class RouteQuery:
    definition: DefinitionKey
    step_index: int


@attrs.frozen
class RouteSet:
    """Every live per-replica route of one step (S-ROUTE-11)."""

    routes: tuple[CapabilityRoute, ...]


@attrs.frozen
class SelectedRoute:
    route: CapabilityRoute


@attrs.frozen
class NoRoute:
    query: RouteQuery


@attrs.frozen
class AmbiguousRoute:
    """More than one distinct target where one was required (S-ROUTE-11, S-ROUTE-12)."""

    query: RouteQuery
    targets: tuple[RouteTarget, ...]


def _target_sort_key(target: RouteTarget) -> tuple[str, str, str]:
    return (target.transport.value, target.address, target.base_path or "")


def live_routes(
    table: RouteTable, catalog: Catalog, query: RouteQuery, now_ms: int
) -> tuple[CapabilityRoute, ...]:
    """Routes of the queried step with a live lease on a non-retired definition.

    Sorted by (owner, replica) so every backend lists them in the same order.
    """
    entry = catalog.entries.get(query.definition)
    if entry is None or not admits_capability(entry.lifecycle):
        return ()
    found = [
        route
        for key, route in table.routes.items()
        if key.definition == query.definition and key.step_index == query.step_index and route.live_at(now_ms)
    ]
    return tuple(sorted(found, key=lambda r: (r.descriptor.key.owner, r.descriptor.key.replica)))


def _distinct_targets(routes: tuple[CapabilityRoute, ...]) -> tuple[RouteTarget, ...]:
    return tuple(sorted({route_target(r.descriptor) for r in routes}, key=_target_sort_key))


def select_capability_routes(
    table: RouteTable, catalog: Catalog, query: RouteQuery, now_ms: int
) -> RouteSet | NoRoute | AmbiguousRoute:
    """All live routes of a step (S-ROUTE-11).

    HTTP and gRPC: every per-replica route, never collapsed. Kafka and Redis Streams:
    the replicas must agree on one message target. Mixed transports are ambiguous.
    """
    routes = live_routes(table, catalog, query, now_ms)
    if not routes:
        return NoRoute(query)
    transports = {r.descriptor.transport for r in routes}
    targets = _distinct_targets(routes)
    if len(transports) > 1:
        return AmbiguousRoute(query, targets)
    if transports <= {Transport.HTTP, Transport.GRPC}:
        return RouteSet(routes)
    return RouteSet(routes) if len(targets) == 1 else AmbiguousRoute(query, targets)


def select_capability_route(
    table: RouteTable, catalog: Catalog, query: RouteQuery, now_ms: int
) -> SelectedRoute | NoRoute | AmbiguousRoute:
    """The single route of a step that must have exactly one target (S-ROUTE-12).

    Several replicas with distinct direct addresses are ``AmbiguousRoute``, never
    collapsed into one of them.
    """
    routes = live_routes(table, catalog, query, now_ms)
    if not routes:
        return NoRoute(query)
    targets = _distinct_targets(routes)
    if len(targets) > 1:
        return AmbiguousRoute(query, targets)
    return SelectedRoute(routes[0])


@attrs.frozen
class PublisherTarget:
    """The endpoint a command publisher is built for."""

    transport: Transport
    endpoint: str


def publisher_target(descriptor: CapabilityDescriptor) -> PublisherTarget | RouteInvalid:
    """Build a publisher's endpoint through the shared transport contract (S-ROUTE-04)."""
    violation = descriptor_violation(descriptor)
    if violation is not None:
        return RouteInvalid(violation)
    endpoint = descriptor.address
    if descriptor.transport is Transport.HTTP and descriptor.base_path is not None:
        endpoint += descriptor.base_path
    return PublisherTarget(descriptor.transport, endpoint)


def invalid_routes_of(table: RouteTable, definition: DefinitionKey) -> tuple[CapabilityKey, ...]:
    """Registered routes of ``definition`` that break the transport contract.

    They can only exist if a row was written around ``register_capability``; candidate
    activation refuses while any exists (S-ROUTE-04).
    """
    bad = [
        key
        for key, route in table.routes.items()
        if key.definition == definition and descriptor_violation(route.descriptor) is not None
    ]
    return tuple(sorted(bad, key=lambda k: (k.step_index, k.owner, k.replica)))
