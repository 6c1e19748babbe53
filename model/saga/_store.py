"""The orchestrator's database as one value, and its catalog/route/timer transactions.

``OrchestratorStore`` holds everything the orchestrator commits: the catalog and its
routes, instances with their start receipts, the transition journal, the result inbox,
timers, the command outbox and quota. Starts live in ``_start``, result and timer
transitions in ``_orchestrator``; this module lifts the catalog, route and timer
operations to the store and answers the queries a harness compares against.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from ._audit import AuditRecord, Control, OperationScope
from ._catalog import (
    Catalog,
    CatalogEntry,
    ChangeLifecycle,
    LifecycleChanged,
    LifecycleOutcome,
    PublishDefinition,
    Published,
    PublishOutcome,
    admits_capability,
    is_loadable,
)
from ._catalog import change_lifecycle as _change_lifecycle
from ._catalog import load_definition as _load_definition
from ._catalog import publish as _publish
from ._catalog import query_definition as _query_definition
from ._errors import (
    DefinitionNotLoadable,
    InstanceNotReleasable,
    NoSuchTimer,
    StaleFencingToken,
    UnknownCommand,
    UnknownDefinition,
    UnknownReference,
    UnknownSaga,
)
from ._instance import TERMINAL_STATUSES, JournalEntry, SagaInstance
from ._keys import DefinitionReference, ReferenceKind
from ._messages import CommandEnvelope
from ._routes import (
    AmbiguousRoute,
    CapabilityRegistered,
    CapabilityRenewed,
    CapabilityRoute,
    NoRoute,
    RegisterCapability,
    RegisterOutcome,
    RenewCapability,
    RenewOutcome,
    RouteQuery,
    RouteSet,
    RouteTable,
    SelectedRoute,
    invalid_routes_of,
)
from ._routes import register_capability as _register_capability
from ._routes import renew_capability as _renew_capability
from ._routes import select_capability_route as _select_capability_route
from ._routes import select_capability_routes as _select_capability_routes
from ._timers import (
    ClaimOutcome,
    ClaimTimer,
    ReleaseTimer,
    RenewTimer,
    Timer,
    TimerReleased,
    TimerRenewed,
    TimerTable,
    schedule_timer,
    timer_id_for,
)
from ._timers import claim_timer as _claim_timer
from ._timers import release_timer as _release_timer
from ._timers import renew_timer as _renew_timer
from ._values import DefinitionKey


@attrs.frozen
class StartReceipt:
    """The idempotency record of a committed start; outlives instance release."""

    saga_id: str
    definition: DefinitionKey
    start_digest: str


@attrs.frozen
class OutboxedCommand:
    command: CommandEnvelope
    published: bool = False


class QuotaMode(enum.Enum):
    """What a tenant's quota counts (S-START-13; the seed is silent on release, N-10)."""

    #: Every start ever admitted: a unit is never returned.
    ADMITTED = "admitted"
    #: Instances not yet terminal: the transition that makes an instance terminal returns its unit.
    IN_FLIGHT = "in_flight"


@attrs.frozen
class OrchestratorStore:
    catalog: Catalog = attrs.field(factory=Catalog)
    routes: RouteTable = attrs.field(factory=RouteTable)
    instances: Mapping[str, SagaInstance] = attrs.field(factory=dict)
    receipts: Mapping[str, StartReceipt] = attrs.field(factory=dict)
    #: Every instance's transitions in commit order.
    journal: tuple[JournalEntry, ...] = ()
    #: Claimed result message ids (the orchestrator's dedupe keys).
    inbox: frozenset[str] = frozenset()
    timers: TimerTable = attrs.field(factory=TimerTable)
    #: Command outbox by command id, in commit order.
    outbox: Mapping[str, OutboxedCommand] = attrs.field(factory=dict)
    #: Quota units held per tenant: starts admitted, or instances in flight (``quota_mode``).
    quota_used: Mapping[str, int] = attrs.field(factory=dict)
    quota_limit: int | None = None
    quota_mode: QuotaMode = QuotaMode.ADMITTED
    #: Transport principals whose results are trusted at all.
    trusted_producers: frozenset[str] = frozenset()
    #: Migration and audit references (the other kinds are derived from facts).
    references: frozenset[DefinitionReference] = frozenset()
    #: Bumped by every catalog or route change; names a consistent snapshot.
    registry_revision: int = 0
    #: Control state of instances that were ever paused (absent: active, revision 1; S-MGT-05).
    controls: Mapping[str, Control] = attrs.field(factory=dict)
    #: Committed management actions, in commit order (S-MGT-09).
    audit: tuple[AuditRecord, ...] = ()
    #: Where an operation id is bound (S-MGT-03): the saga, or the saga and the action's family.
    operation_scope: OperationScope = OperationScope.SAGA


def settle_quota(store: OrchestratorStore, before: SagaInstance, after: SagaInstance) -> OrchestratorStore:
    """The quota unit an instance returns in the transition that makes it terminal, when the
    quota counts instances in flight (S-START-13); the same transaction as the transition."""
    if (
        store.quota_mode is not QuotaMode.IN_FLIGHT
        or before.status in TERMINAL_STATUSES
        or after.status not in TERMINAL_STATUSES
    ):
        return store
    tenant = after.definition.tenant
    held = store.quota_used.get(tenant, 0)
    return attrs.evolve(store, quota_used={**store.quota_used, tenant: max(held - 1, 0)})


def stage_command(store: OrchestratorStore, command: CommandEnvelope, due_ms: int) -> OrchestratorStore:
    """Outbox entry plus timeout timer of a dispatched command (same transaction)."""
    timer = Timer(timer_id_for(command.command_id), command.saga_id, command.command_id, due_ms)
    return attrs.evolve(
        store,
        outbox={**store.outbox, command.command_id: OutboxedCommand(command)},
        timers=schedule_timer(store.timers, timer),
    )


# -- catalog ---------------------------------------------------------------------------


def publish_definition(
    store: OrchestratorStore, request: PublishDefinition
) -> tuple[OrchestratorStore, PublishOutcome]:
    """Publish a definition version (S-DEF-01, S-CAT-01..03)."""
    catalog, outcome = _publish(store.catalog, request)
    if not isinstance(outcome, Published):
        return store, outcome
    return attrs.evolve(store, catalog=catalog, registry_revision=store.registry_revision + 1), outcome


def definition_references(
    store: OrchestratorStore, key: DefinitionKey, now_ms: int
) -> frozenset[DefinitionReference]:
    """Every fact still naming ``key`` (S-CAT-07).

    Retained instances (terminal ones too, until released), command outbox entries (published
    or not: a published one is a retained message until released with its instance), live
    capability leases, and recorded migration and audit references.
    """
    found = {r for r in store.references if r.key == key}
    found |= {
        DefinitionReference(ReferenceKind.INSTANCE, key, saga_id)
        for saga_id, instance in store.instances.items()
        if instance.definition == key
    }
    found |= {
        DefinitionReference(ReferenceKind.OUTBOX, key, command_id)
        for command_id, entry in store.outbox.items()
        if entry.command.definition == key
    }
    found |= {
        DefinitionReference(
            ReferenceKind.CAPABILITY_LEASE, key, f"{cap.owner}/{cap.replica}/{cap.step_index}"
        )
        for cap, route in store.routes.routes.items()
        if cap.definition == key and route.live_at(now_ms)
    }
    return frozenset(found)


def change_lifecycle(
    store: OrchestratorStore, request: ChangeLifecycle, now_ms: int
) -> tuple[OrchestratorStore, LifecycleOutcome]:
    """A lifecycle move in the catalog's serial transaction (S-CAT-04, S-CAT-07, S-ROUTE-04).

    Retirement is checked against ``definition_references`` at ``now_ms``; activation
    against the transport contract of the candidate's registered routes.
    """
    references = definition_references(store, request.key, now_ms)
    invalid = invalid_routes_of(store.routes, request.key)
    catalog, outcome = _change_lifecycle(store.catalog, request, references, invalid)
    if not isinstance(outcome, LifecycleChanged):
        return store, outcome
    return attrs.evolve(store, catalog=catalog, registry_revision=store.registry_revision + 1), outcome


def load_definition(
    store: OrchestratorStore, key: DefinitionKey
) -> CatalogEntry | UnknownDefinition | DefinitionNotLoadable:
    """S-CAT-06, S-CAT-08: see ``model.saga._catalog.load_definition``."""
    return _load_definition(store.catalog, key)


def query_definition(store: OrchestratorStore, key: DefinitionKey) -> CatalogEntry | UnknownDefinition:
    """S-CAT-10: see ``model.saga._catalog.query_definition``."""
    return _query_definition(store.catalog, key)


def _external_kind(_instance: object, _attribute: object, reference: DefinitionReference) -> None:
    if reference.kind not in (ReferenceKind.MIGRATION, ReferenceKind.AUDIT):
        raise ValueError("only migration and audit references are recorded; others are facts")


@attrs.frozen
class RecordReference:
    reference: DefinitionReference = attrs.field(validator=_external_kind)


@attrs.frozen
class ReferenceRecorded:
    reference: DefinitionReference


def record_reference(
    store: OrchestratorStore, request: RecordReference
) -> tuple[OrchestratorStore, ReferenceRecorded | UnknownDefinition]:
    """Record a migration or audit reference to a definition (S-CAT-07)."""
    ref = request.reference
    if ref.key not in store.catalog.entries:
        return store, UnknownDefinition(ref.key)
    return attrs.evolve(store, references=store.references | {ref}), ReferenceRecorded(ref)


@attrs.frozen
class ReferenceReleased:
    reference: DefinitionReference


def release_reference(
    store: OrchestratorStore, reference: DefinitionReference
) -> tuple[OrchestratorStore, ReferenceReleased | UnknownReference]:
    """Release a recorded migration or audit reference (S-CAT-07, S-CAT-11)."""
    if reference not in store.references:
        return store, UnknownReference(reference)
    return attrs.evolve(store, references=store.references - {reference}), ReferenceReleased(reference)


@attrs.frozen
class InstanceReleased:
    saga_id: str


def release_instance(
    store: OrchestratorStore, saga_id: str
) -> tuple[OrchestratorStore, InstanceReleased | UnknownSaga | InstanceNotReleasable]:
    """Drop a finished instance's row under the retention policy (S-CAT-07, S-CAT-11).

    Only a terminal instance with no unpublished command may go; its published commands go
    with it (message retention follows the same policy, S-CAT-07). Its start receipt and
    journal stay: replays keep their verdict and history is not rewritten.
    """
    instance = store.instances.get(saga_id)
    if instance is None:
        return store, UnknownSaga(saga_id)
    pending = sum(1 for e in store.outbox.values() if e.command.saga_id == saga_id and not e.published)
    if instance.status not in TERMINAL_STATUSES or pending:
        return store, InstanceNotReleasable(saga_id, instance.status, pending)
    remaining = {k: v for k, v in store.instances.items() if k != saga_id}
    outbox = {k: e for k, e in store.outbox.items() if e.command.saga_id != saga_id}
    return attrs.evolve(store, instances=remaining, outbox=outbox), InstanceReleased(saga_id)


@attrs.frozen
class CommandPublished:
    command_id: str
    already: bool


def mark_command_published(
    store: OrchestratorStore, command_id: str
) -> tuple[OrchestratorStore, CommandPublished | UnknownCommand]:
    """The outbox relay's durable acknowledgement of a command (idempotent)."""
    entry = store.outbox.get(command_id)
    if entry is None:
        return store, UnknownCommand(command_id)
    if entry.published:
        return store, CommandPublished(command_id, already=True)
    outbox = {**store.outbox, command_id: attrs.evolve(entry, published=True)}
    return attrs.evolve(store, outbox=outbox), CommandPublished(command_id, already=False)


# -- capability routes -----------------------------------------------------------------


def register_capability(
    store: OrchestratorStore, request: RegisterCapability
) -> tuple[OrchestratorStore, RegisterOutcome]:
    """S-ROUTE-01..08, S-CAT-09: see ``model.saga._routes.register_capability``."""
    entry = store.catalog.entries.get(request.descriptor.key.definition)
    routes, outcome = _register_capability(store.routes, request, entry)
    if not isinstance(outcome, CapabilityRegistered):
        return store, outcome
    return attrs.evolve(store, routes=routes, registry_revision=store.registry_revision + 1), outcome


def renew_capability(
    store: OrchestratorStore, request: RenewCapability
) -> tuple[OrchestratorStore, RenewOutcome]:
    """S-ROUTE-02, S-ROUTE-09, S-CAT-09: see ``model.saga._routes.renew_capability``."""
    entry = store.catalog.entries.get(request.key.definition)
    routes, outcome = _renew_capability(store.routes, request, entry)
    if not isinstance(outcome, CapabilityRenewed):
        return store, outcome
    return attrs.evolve(store, routes=routes, registry_revision=store.registry_revision + 1), outcome


def select_capability_routes(
    store: OrchestratorStore, query: RouteQuery, now_ms: int
) -> RouteSet | NoRoute | AmbiguousRoute:
    """S-ROUTE-11: see ``model.saga._routes.select_capability_routes``."""
    return _select_capability_routes(store.routes, store.catalog, query, now_ms)


def select_capability_route(
    store: OrchestratorStore, query: RouteQuery, now_ms: int
) -> SelectedRoute | NoRoute | AmbiguousRoute:
    """S-ROUTE-12: see ``model.saga._routes.select_capability_route``."""
    return _select_capability_route(store.routes, store.catalog, query, now_ms)


@attrs.frozen
class CatalogSnapshot:
    """Loadable definitions and live routes as of one registry revision (S-ROUTE-10)."""

    registry_revision: int
    definitions: tuple[CatalogEntry, ...]
    routes: tuple[CapabilityRoute, ...]


def catalog_snapshot(store: OrchestratorStore, now_ms: int) -> CatalogSnapshot:
    """The registry and its effective capabilities, read together (S-ROUTE-10).

    Both halves come from one store value, so they always share a revision; retired
    definitions and their routes are absent, as are expired leases.
    """
    entries = store.catalog.entries
    definitions = tuple(
        sorted(
            (e for e in entries.values() if is_loadable(e.lifecycle)),
            key=lambda e: (e.key.tenant, e.key.workflow, e.key.version),
        )
    )
    live = [
        route
        for cap, route in store.routes.routes.items()
        if route.live_at(now_ms)
        and cap.definition in entries
        and admits_capability(entries[cap.definition].lifecycle)
    ]
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
    return CatalogSnapshot(store.registry_revision, definitions, routes)


# -- timers ----------------------------------------------------------------------------


def claim_timer(store: OrchestratorStore, request: ClaimTimer) -> tuple[OrchestratorStore, ClaimOutcome]:
    """S-TIMER-01, S-TIMER-03: see ``model.saga._timers.claim_timer``."""
    timers, outcome = _claim_timer(store.timers, request)
    return _with_timers(store, timers), outcome


def _with_timers(store: OrchestratorStore, timers: TimerTable) -> OrchestratorStore:
    # A refused timer operation hands back the very same store value.
    return store if timers is store.timers else attrs.evolve(store, timers=timers)


def renew_timer(
    store: OrchestratorStore, request: RenewTimer
) -> tuple[OrchestratorStore, TimerRenewed | NoSuchTimer | StaleFencingToken]:
    """S-TIMER-01, S-TIMER-02: see ``model.saga._timers.renew_timer``."""
    timers, outcome = _renew_timer(store.timers, request)
    return _with_timers(store, timers), outcome


def release_timer(
    store: OrchestratorStore, request: ReleaseTimer
) -> tuple[OrchestratorStore, TimerReleased | NoSuchTimer | StaleFencingToken]:
    """S-TIMER-01, S-TIMER-02: see ``model.saga._timers.release_timer``."""
    timers, outcome = _release_timer(store.timers, request)
    return _with_timers(store, timers), outcome


# -- queries ---------------------------------------------------------------------------


def journal_of(store: OrchestratorStore, saga_id: str) -> tuple[JournalEntry, ...]:
    return tuple(e for e in store.journal if e.saga_id == saga_id)


def pending_commands(store: OrchestratorStore) -> tuple[CommandEnvelope, ...]:
    """Unpublished outbox commands in commit order (what the relay publishes next)."""
    return tuple(e.command for e in store.outbox.values() if not e.published)


def drop_namespace(store: OrchestratorStore) -> OrchestratorStore:
    """S-TX-04: a namespace whose drop reported success holds no row at all — no catalog entry,
    instance, journal, inbox, timer, command, control or audit record — as if never written; what
    the deployment configured (quota, trusted producers) is not stored data and stays."""
    return OrchestratorStore(
        quota_limit=store.quota_limit,
        quota_mode=store.quota_mode,
        trusted_producers=store.trusted_producers,
    )
