"""Capability routes over rows: conversions, selection and the catalog snapshot.

The orchestrator's route transactions (``Orchestrator.register_capability`` and
``renew_capability``) live beside the catalog in ``_orchestrator``; this module holds what they
and the read side share. Selection and the snapshot read definitions, capability rows and the
registry revision in one read transaction, so both halves of a snapshot come from one revision
(S-ROUTE-10). Only pure policies of the model are reused (the transport contract, the ordering
of targets); which rows are live, loadable and routable is decided here from the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from model.saga import (
    AmbiguousRoute,
    CapabilityDescriptor,
    CapabilityKey,
    CapabilityRoute,
    CatalogEntry,
    CatalogSnapshot,
    DefinitionKey,
    Lifecycle,
    NoRoute,
    RouteQuery,
    RouteSet,
    RouteTarget,
    SelectedRoute,
    Transport,
    admits_capability,
    descriptor_violation,
    is_loadable,
    route_target,
)

from ._backend import CapabilityRow


def capability_key_of(row: CapabilityRow) -> CapabilityKey:
    return CapabilityKey(
        DefinitionKey(row.tenant, row.workflow, row.version), row.step_index, row.owner, row.replica
    )


def route_from_row(row: CapabilityRow) -> CapabilityRoute:
    descriptor = CapabilityDescriptor(
        capability_key_of(row), row.transport, row.address, row.base_path, row.credentials_digest
    )
    return CapabilityRoute(descriptor, row.generation, row.lease_expires_ms)


def route_to_row(route: CapabilityRoute) -> CapabilityRow:
    descriptor = route.descriptor
    key = descriptor.key
    return CapabilityRow(
        key.definition.tenant,
        key.definition.workflow,
        key.definition.version,
        key.step_index,
        key.owner,
        key.replica,
        descriptor.transport,
        descriptor.address,
        descriptor.base_path,
        descriptor.credentials_digest,
        route.generation,
        route.lease_expires_ms,
    )


def invalid_route_keys(rows: Iterable[CapabilityRow], definition: DefinitionKey) -> tuple[CapabilityKey, ...]:
    """Registered routes of ``definition`` that break the transport contract (S-ROUTE-04).

    Only a row written around ``register_capability`` can be one; activation refuses while any is.
    """
    bad = [
        route.descriptor.key
        for route in map(route_from_row, rows)
        if route.descriptor.key.definition == definition
        and descriptor_violation(route.descriptor) is not None
    ]
    return tuple(sorted(bad, key=lambda k: (k.step_index, k.owner, k.replica)))


def _routable(row: CapabilityRow, lifecycles: Mapping[DefinitionKey, Lifecycle], now_ms: int) -> bool:
    # A lease is live strictly before its expiry (S-ROUTE-09); a retired definition routes nothing.
    lifecycle = lifecycles.get(DefinitionKey(row.tenant, row.workflow, row.version))
    return now_ms < row.lease_expires_ms and lifecycle is not None and admits_capability(lifecycle)


def step_routes(
    rows: Iterable[CapabilityRow],
    lifecycles: Mapping[DefinitionKey, Lifecycle],
    query: RouteQuery,
    now_ms: int,
) -> tuple[CapabilityRoute, ...]:
    """Live routes of the queried step, by (owner, replica) so every backend lists them alike."""
    found = [
        route_from_row(row)
        for row in rows
        if DefinitionKey(row.tenant, row.workflow, row.version) == query.definition
        and row.step_index == query.step_index
        and _routable(row, lifecycles, now_ms)
    ]
    return tuple(sorted(found, key=lambda r: (r.descriptor.key.owner, r.descriptor.key.replica)))


def _targets(routes: tuple[CapabilityRoute, ...]) -> tuple[RouteTarget, ...]:
    distinct = {route_target(r.descriptor) for r in routes}
    return tuple(sorted(distinct, key=lambda t: (t.transport.value, t.address, t.base_path or "")))


def select_routes(
    query: RouteQuery, routes: tuple[CapabilityRoute, ...]
) -> RouteSet | NoRoute | AmbiguousRoute:
    """Every per-replica route for HTTP/gRPC; one shared target for Kafka/Redis (S-ROUTE-11)."""
    if not routes:
        return NoRoute(query)
    transports = {r.descriptor.transport for r in routes}
    targets = _targets(routes)
    if len(transports) > 1:
        return AmbiguousRoute(query, targets)
    if transports <= {Transport.HTTP, Transport.GRPC} or len(targets) == 1:
        return RouteSet(routes)
    return AmbiguousRoute(query, targets)


def select_route(
    query: RouteQuery, routes: tuple[CapabilityRoute, ...]
) -> SelectedRoute | NoRoute | AmbiguousRoute:
    """Exactly one target, or ``AmbiguousRoute``: replicas are never collapsed (S-ROUTE-12)."""
    if not routes:
        return NoRoute(query)
    targets = _targets(routes)
    if len(targets) > 1:
        return AmbiguousRoute(query, targets)
    return SelectedRoute(routes[0])


def snapshot_of(
    revision: int, entries: Iterable[CatalogEntry], rows: Iterable[CapabilityRow], now_ms: int
) -> CatalogSnapshot:
    """Loadable definitions and live routes of one registry revision (S-ROUTE-10)."""
    entries = tuple(entries)
    lifecycles = {e.key: e.lifecycle for e in entries}
    definitions = tuple(
        sorted(
            (e for e in entries if is_loadable(e.lifecycle)),
            key=lambda e: (e.key.tenant, e.key.workflow, e.key.version),
        )
    )
    live = [route_from_row(row) for row in rows if _routable(row, lifecycles, now_ms)]
    routes = tuple(
        sorted(
            live,
            key=lambda r: (
                r.descriptor.key.definition.tenant,
                r.descriptor.key.definition.workflow,
                r.descriptor.key.definition.version,
                r.descriptor.key.step_index,
                r.descriptor.key.owner,
                r.descriptor.key.replica,
            ),
        )
    )
    return CatalogSnapshot(revision, definitions, routes)
