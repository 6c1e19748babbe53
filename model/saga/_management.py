"""Management actions and the business query API (S-MGT-01..10).

An operator (``ManagementContext``) pauses, resumes, retries a compensation or a resolution, or
closes a saga by hand. Precedence of verdicts, so every runtime reports the same one:

1. the context (actor, reason) and the action's own permission, before anything is read
   (S-MGT-01: no existence oracle for a principal without the permission);
2. the saga, within the authorized tenant (S-MGT-02);
3. the operation id, within its saga: a committed operation is replayed (current state, nothing
   written), an id bound to another action conflicts (S-MGT-03);
4. the operator's expected revisions (S-MGT-04);
5. the control state (S-MGT-05), then the status and its evidence (S-MGT-06..08).

An applied action writes, in one transaction, the instance change (its journal entry and next
command with its timer, for the retries and the close), the control change (pause, resume) and
one audit record with actor, reason, operation id and the before/after (status, control) pair
(S-MGT-09). A refused action writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

import attrs

from ._audit import (
    ACTIVE_CONTROL,
    NO_EXPECTATION,
    REQUIRED_PERMISSION,
    AuditRecord,
    Control,
    ControlState,
    Expectation,
    ManagementAction,
    ManagementContext,
    Permission,
    context_valid,
    same_ledger,
)
from ._catalog import is_loadable
from ._definition import DefinitionArtifact
from ._errors import (
    ManagedSagaNotFound,
    ManagementContextInvalid,
    ManagementPrecondition,
    ManagementProblem,
    OperationConflict,
    PermissionDenied,
    StaleSnapshot,
)
from ._instance import Awaiting, Cause, JournalEntry, SagaInstance, StepStatus, make_command
from ._keys import SagaStatus
from ._messages import CommandEnvelope, effect_id_for
from ._store import OrchestratorStore, settle_quota, stage_command
from ._transaction import OutcomeUnknown, RolledBack, settle
from ._values import CommitFate, Phase, UncertainPolicy


@attrs.frozen
class Manage:
    action: ManagementAction
    context: ManagementContext
    tenant: str
    saga_id: str
    operation_id: str
    expectation: Expectation = NO_EXPECTATION
    now_ms: int = 0
    commit: CommitFate = CommitFate.COMMITTED


@attrs.frozen
class ManagementApplied:
    saga_id: str
    action: ManagementAction
    status: SagaStatus
    control: ControlState
    revision: int
    control_revision: int
    dispatched: str | None


@attrs.frozen
class ManagementReplayed:
    """The operation was committed before: the current state, nothing written (S-MGT-03)."""

    saga_id: str
    action: ManagementAction
    status: SagaStatus
    control: ControlState


ManageOutcome: TypeAlias = (
    ManagementApplied
    | ManagementReplayed
    | ManagementContextInvalid
    | PermissionDenied
    | ManagedSagaNotFound
    | OperationConflict
    | StaleSnapshot
    | ManagementPrecondition
    | RolledBack
    | OutcomeUnknown
)


def control_of(store: OrchestratorStore, saga_id: str) -> Control:
    return store.controls.get(saga_id, ACTIVE_CONTROL)


def is_paused(store: OrchestratorStore, saga_id: str) -> bool:
    """A paused instance takes no automatic transition (S-MGT-05)."""
    return control_of(store, saga_id).state is ControlState.PAUSED


def authorize(
    context: ManagementContext, permission: Permission
) -> ManagementContextInvalid | PermissionDenied | None:
    """The context and one permission, checked before anything is read (S-MGT-01)."""
    if not context_valid(context):
        return ManagementContextInvalid(context.actor)
    if permission not in context.permissions:
        return PermissionDenied(permission.value)
    return None


def find_instance(store: OrchestratorStore, tenant: str, saga_id: str) -> SagaInstance | ManagedSagaNotFound:
    """The saga if it belongs to the authorized tenant; absent and foreign look alike (S-MGT-02)."""
    instance = store.instances.get(saga_id)
    if instance is None or instance.definition.tenant != tenant:
        return ManagedSagaNotFound(tenant, saga_id)
    return instance


def next_attempt(store: OrchestratorStore, effect_id: str) -> int:
    """One past the highest attempt of ``effect_id`` ever dispatched (S-ID-02: a new command id)."""
    attempts = [e.command.attempt for e in store.outbox.values() if e.command.effect_id == effect_id]
    return max(attempts, default=0) + 1


def manual_step(steps: Iterable[StepStatus]) -> tuple[int, StepStatus] | None:
    """The step that put an instance in manual intervention: uncertain or unconfirmed."""
    for index, status in enumerate(steps):
        if status in (StepStatus.UNCERTAIN, StepStatus.COMPENSATION_UNCONFIRMED):
            return index, status
    return None


def plan_recovery(
    instance: SagaInstance, artifact: DefinitionArtifact, action: ManagementAction, attempt_of: dict[str, int]
) -> tuple[SagaInstance, JournalEntry, CommandEnvelope | None] | ManagementProblem:
    """The instance change of a retry or a close (S-MGT-06..08), or why it cannot be made."""
    if instance.status is not SagaStatus.AWAITING_MANUAL_INTERVENTION:
        return ManagementProblem.NOT_IN_MANUAL_INTERVENTION
    found = manual_step(instance.steps)
    if found is None:
        return ManagementProblem.NOT_IN_MANUAL_INTERVENTION
    index, step_status = found
    revision = instance.revision + 1
    before = instance.status
    if action is ManagementAction.MANUAL_CLOSE:
        closed = attrs.evolve(instance, status=SagaStatus.MANUALLY_CLOSED, revision=revision)
        phase = Phase.COMPENSATE if step_status is StepStatus.COMPENSATION_UNCONFIRMED else Phase.EXECUTE
        entry = JournalEntry(
            instance.saga_id, revision, before, closed.status, index, phase, Cause.MANAGED, None
        )
        return closed, entry, None
    if action is ManagementAction.RETRY_COMPENSATION:
        if step_status is not StepStatus.COMPENSATION_UNCONFIRMED:
            return ManagementProblem.NO_UNCONFIRMED_COMPENSATION
        phase, status = Phase.COMPENSATE, SagaStatus.COMPENSATING
        steps = (*instance.steps[:index], StepStatus.COMPENSATING, *instance.steps[index + 1 :])
    else:
        if step_status is not StepStatus.UNCERTAIN:
            return ManagementProblem.NO_UNRESOLVED_EFFECT
        if artifact.steps[index].uncertain_policy is not UncertainPolicy.RESOLVE:
            return ManagementProblem.NO_UNRESOLVED_EFFECT  # nothing to poll: the step has no resolver
        phase, status, steps = Phase.RESOLVE, SagaStatus.RESOLVING, instance.steps
    draft = attrs.evolve(instance, status=status, steps=steps, revision=revision)
    attempt = attempt_of[effect_id_for(instance.saga_id, index, phase)]
    command = make_command(draft, artifact, phase, index, attempt)
    awaiting = Awaiting(phase, index, attempt, command.effect_id, command.command_id)
    moved = attrs.evolve(draft, awaiting=awaiting)
    entry = JournalEntry(
        instance.saga_id, revision, before, status, index, phase, Cause.MANAGED, command.command_id
    )
    return moved, entry, command


def manage(store: OrchestratorStore, request: Manage) -> tuple[OrchestratorStore, ManageOutcome]:
    """Apply, replay or refuse one management action (S-MGT-01..09).

    post: isinstance(__return__[1], ManagementApplied | OutcomeUnknown) or __return__[0] is store
    """
    action = request.action
    refused = authorize(request.context, REQUIRED_PERMISSION[action])
    if refused is not None:
        return store, refused
    instance = find_instance(store, request.tenant, request.saga_id)
    if isinstance(instance, ManagedSagaNotFound):
        return store, instance
    control = control_of(store, instance.saga_id)
    recorded = next(
        (
            r
            for r in store.audit
            if (r.saga_id, r.operation_id) == (instance.saga_id, request.operation_id)
            and same_ledger(store.operation_scope, r.action, action)
        ),
        None,
    )
    if recorded is not None:
        if recorded.action is not action:
            return store, OperationConflict(request.operation_id)
        return store, ManagementReplayed(instance.saga_id, action, instance.status, control.state)
    if not request.expectation.holds(instance.revision, control.revision):
        return store, StaleSnapshot(instance.saga_id, instance.revision, control.revision)
    wanted = ControlState.PAUSED if action is ManagementAction.RESUME else ControlState.ACTIVE
    if control.state is not wanted:
        problem = (
            ManagementProblem.NOT_PAUSED
            if action is ManagementAction.RESUME
            else ManagementProblem.NOT_ACTIVE
        )
        return store, ManagementPrecondition(instance.saga_id, problem)
    written = store
    after_instance, after_control, dispatched = instance, control, None
    if action in (ManagementAction.PAUSE, ManagementAction.RESUME):
        flipped = ControlState.PAUSED if action is ManagementAction.PAUSE else ControlState.ACTIVE
        after_control = Control(flipped, control.revision + 1)
        written = attrs.evolve(store, controls={**store.controls, instance.saga_id: after_control})
    else:
        entry_of = store.catalog.entries.get(instance.definition)
        if entry_of is None or not is_loadable(entry_of.lifecycle):
            return store, ManagementPrecondition(instance.saga_id, ManagementProblem.DEFINITION_NOT_LOADABLE)
        artifact = entry_of.artifact
        attempts = {
            effect_id_for(instance.saga_id, i, phase): next_attempt(
                store, effect_id_for(instance.saga_id, i, phase)
            )
            for i in range(len(artifact.steps))
            for phase in (Phase.COMPENSATE, Phase.RESOLVE)
        }
        change = plan_recovery(instance, artifact, action, attempts)
        if isinstance(change, ManagementProblem):
            return store, ManagementPrecondition(instance.saga_id, change)
        after_instance, entry, command = change
        written = attrs.evolve(
            store,
            instances={**store.instances, instance.saga_id: after_instance},
            journal=(*store.journal, entry),
        )
        written = settle_quota(written, instance, after_instance)  # a close returns its unit
        if command is not None:
            dispatched = command.command_id
            written = stage_command(
                written, command, request.now_ms + artifact.steps[command.step_index].timeout_ms
            )
    record = AuditRecord(
        seq=len(store.audit) + 1,
        saga_id=instance.saga_id,
        tenant=request.tenant,
        operation_id=request.operation_id,
        action=action,
        actor=request.context.actor,
        reason=request.context.reason,
        before=(instance.status, control.state),
        after=(after_instance.status, after_control.state),
        dispatched=dispatched,
    )
    written = attrs.evolve(written, audit=(*written.audit, record))
    applied = ManagementApplied(
        instance.saga_id,
        action,
        after_instance.status,
        after_control.state,
        after_instance.revision,
        after_control.revision,
        dispatched,
    )
    return settle(store, written, request.commit, applied)
