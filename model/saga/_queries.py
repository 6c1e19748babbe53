"""The business query API: get one saga, list a tenant's sagas, read a saga's audit trail (S-MGT-10).

Reads are authorized like actions (S-MGT-01, S-MGT-02): the tenant is the target, the context
the identity; listing needs ``saga.instance.list``, the audit trail ``saga.audit.read``, and a
saga of another tenant is not found. Views carry no business payload.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from ._audit import AuditRecord, ControlState, ManagementContext, Permission, context_valid
from ._errors import ManagedSagaNotFound, ManagementContextInvalid, PermissionDenied
from ._instance import JournalEntry, SagaInstance
from ._keys import SagaStatus
from ._management import authorize, control_of, find_instance
from ._store import OrchestratorStore
from ._values import DefinitionKey

#: Refusals of a read.
ReadRefusal: TypeAlias = ManagementContextInvalid | PermissionDenied | ManagedSagaNotFound


@attrs.frozen
class SagaView:
    """What the business API shows of a saga: no payload, no awaited command."""

    saga_id: str
    definition: DefinitionKey
    business_key: str
    status: SagaStatus
    revision: int
    control: ControlState
    control_revision: int


def view_of(store: OrchestratorStore, instance: SagaInstance) -> SagaView:
    control = control_of(store, instance.saga_id)
    return SagaView(
        instance.saga_id,
        instance.definition,
        instance.business_key,
        instance.status,
        instance.revision,
        control.state,
        control.revision,
    )


@attrs.frozen
class GetSaga:
    context: ManagementContext
    tenant: str
    saga_id: str


def get_saga(store: OrchestratorStore, request: GetSaga) -> SagaView | ReadRefusal:
    """One saga of the authorized tenant (S-MGT-10). Needs a valid context, no extra permission."""
    if not context_valid(request.context):
        return ManagementContextInvalid(request.context.actor)
    instance = find_instance(store, request.tenant, request.saga_id)
    if isinstance(instance, ManagedSagaNotFound):
        return instance
    return view_of(store, instance)


@attrs.frozen
class ListSagas:
    """Keyset pagination by saga id: ``after`` is the last id of the previous page."""

    context: ManagementContext
    tenant: str
    statuses: frozenset[SagaStatus] | None = None
    after: str | None = None
    limit: int = attrs.field(default=50, validator=attrs.validators.ge(1))


@attrs.frozen
class SagaPage:
    items: tuple[SagaView, ...]
    #: The cursor of the next page; ``None`` when this one is the last.
    next_after: str | None


def list_sagas(
    store: OrchestratorStore, request: ListSagas
) -> SagaPage | ManagementContextInvalid | PermissionDenied:
    """A tenant's sagas in saga-id order, filtered by status, one page at a time (S-MGT-10).

    post: isinstance(_, ManagementContextInvalid | PermissionDenied) or len(_.items) <= request.limit
    """
    refused = authorize(request.context, Permission.LIST_INSTANCES)
    if refused is not None:
        return refused
    chosen = sorted(
        (
            i
            for i in store.instances.values()
            if i.definition.tenant == request.tenant
            and (request.statuses is None or i.status in request.statuses)
            and (request.after is None or i.saga_id > request.after)
        ),
        key=lambda i: i.saga_id,
    )
    page = chosen[: request.limit]
    more = len(chosen) > request.limit
    return SagaPage(tuple(view_of(store, i) for i in page), page[-1].saga_id if more else None)


@attrs.frozen
class ReadAudit:
    context: ManagementContext
    tenant: str
    saga_id: str


@attrs.frozen
class AuditTrail:
    """A saga's transitions and its management records, each in commit order (S-MGT-09)."""

    transitions: tuple[JournalEntry, ...]
    management: tuple[AuditRecord, ...]


def read_audit(store: OrchestratorStore, request: ReadAudit) -> AuditTrail | ReadRefusal:
    """S-MGT-09, S-MGT-10."""
    refused = authorize(request.context, Permission.READ_AUDIT)
    if refused is not None:
        return refused
    instance = find_instance(store, request.tenant, request.saga_id)
    if isinstance(instance, ManagedSagaNotFound):
        return instance
    saga_id = instance.saga_id
    return AuditTrail(
        tuple(e for e in store.journal if e.saga_id == saga_id),
        tuple(r for r in store.audit if r.saga_id == saga_id),
    )
