"""Management actions and the business query API of Ratchet's runtime (S-MGT-01..10).

One action is one orchestrator transaction: it reads the instance (row lock), its control row and
the operation's audit row, decides in the model's precedence (``model.saga._management``) and
writes the instance CAS with its journal entry and next command, the control CAS and one audit
row together, or nothing. Reads are read-only transactions.
"""

from __future__ import annotations

import attrs

from model.saga import (
    ACTIVE_CONTROL,
    REQUIRED_PERMISSION,
    AuditRecord,
    AuditTrail,
    Control,
    ControlState,
    GetSaga,
    ListSagas,
    Manage,
    ManagedSagaNotFound,
    ManagementAction,
    ManagementApplied,
    ManagementContextInvalid,
    ManagementPrecondition,
    ManagementProblem,
    ManagementReplayed,
    ManageOutcome,
    OperationConflict,
    Permission,
    PermissionDenied,
    Phase,
    ReadAudit,
    SagaInstance,
    SagaPage,
    SagaView,
    StaleSnapshot,
    authorize,
    context_valid,
    effect_id_for,
    is_loadable,
    plan_recovery,
)

from ._backend import SagaTransaction
from ._convert import instance_from_row, instance_to_row, journal_from_row, journal_to_row
from ._orchestrator import Orchestrator
from ._unit import Discard, Keep, read_only, run_unit
from ._writes import _need, _stage, entry_of, settle_quota


def _find(tx: SagaTransaction, tenant: str, saga_id: str, *, lock: bool) -> SagaInstance | None:
    row = tx.load_instance(saga_id, lock=lock)
    if row is None or row.definition.tenant != tenant:
        return None
    return instance_from_row(row)


def _view(instance: SagaInstance, control: Control) -> SagaView:
    return SagaView(
        instance.saga_id,
        instance.definition,
        instance.business_key,
        instance.status,
        instance.revision,
        control.state,
        control.revision,
    )


@attrs.define
class Management:
    """The operator's side of one orchestrator (same backend, same fates)."""

    orchestrator: Orchestrator

    def manage(self, request: Manage) -> ManageOutcome:
        """S-MGT-01..09, in the model's precedence."""
        refused = authorize(request.context, REQUIRED_PERMISSION[request.action])
        if refused is not None:
            return refused  # before any read (S-MGT-01)
        orch = self.orchestrator

        def body(tx: SagaTransaction) -> Keep[ManageOutcome] | Discard[ManageOutcome]:
            return self._body(tx, request)

        return run_unit(orch.backend, "manage", body, orch.fates)

    def _body(self, tx: SagaTransaction, request: Manage) -> Keep[ManageOutcome] | Discard[ManageOutcome]:
        action = request.action
        instance = _find(tx, request.tenant, request.saga_id, lock=True)
        if instance is None:
            return Discard(ManagedSagaNotFound(request.tenant, request.saga_id))
        control = tx.load_control(instance.saga_id, lock=True) or ACTIVE_CONTROL
        recorded = tx.load_audit(instance.saga_id, request.operation_id)
        if recorded is not None:
            if recorded.action is not action:
                return Discard(OperationConflict(request.operation_id))
            return Discard(ManagementReplayed(instance.saga_id, action, instance.status, control.state))
        if not request.expectation.holds(instance.revision, control.revision):
            return Discard(StaleSnapshot(instance.saga_id, instance.revision, control.revision))
        wanted = ControlState.PAUSED if action is ManagementAction.RESUME else ControlState.ACTIVE
        if control.state is not wanted:
            resume = action is ManagementAction.RESUME
            problem = ManagementProblem.NOT_PAUSED if resume else ManagementProblem.NOT_ACTIVE
            return Discard(ManagementPrecondition(instance.saga_id, problem))
        after, after_control, dispatched = instance, control, None
        if action in (ManagementAction.PAUSE, ManagementAction.RESUME):
            flipped = ControlState.PAUSED if action is ManagementAction.PAUSE else ControlState.ACTIVE
            after_control = Control(flipped, control.revision + 1)
            _need(tx.save_control(instance.saga_id, after_control, control.revision))
        else:
            definition = tx.load_definition(instance.definition)
            if definition is None or not is_loadable(definition.lifecycle):
                problem = ManagementProblem.DEFINITION_NOT_LOADABLE
                return Discard(ManagementPrecondition(instance.saga_id, problem))
            artifact = entry_of(definition).artifact
            highest: dict[str, int] = {}
            for row in tx.list_commands():
                if row.saga_id == instance.saga_id:
                    effect = row.envelope.effect_id
                    highest[effect] = max(highest.get(effect, 0), row.envelope.attempt)
            attempts = {
                effect_id_for(instance.saga_id, i, phase): highest.get(
                    effect_id_for(instance.saga_id, i, phase), 0
                )
                + 1
                for i in range(len(artifact.steps))
                for phase in (Phase.COMPENSATE, Phase.RESOLVE)
            }
            change = plan_recovery(instance, artifact, action, attempts)
            if isinstance(change, ManagementProblem):
                return Discard(ManagementPrecondition(instance.saga_id, change))
            after, entry, command = change
            _need(tx.update_instance(instance_to_row(after), instance.revision))
            _need(tx.append_journal(journal_to_row(entry)))
            settle_quota(tx, self.orchestrator.quota_mode, instance, after)  # a close returns its unit
            if command is not None:
                dispatched = command.command_id
                _stage(tx, command, request.now_ms + artifact.steps[command.step_index].timeout_ms)
        record = AuditRecord(
            seq=tx.next_audit_seq(),
            saga_id=instance.saga_id,
            tenant=request.tenant,
            operation_id=request.operation_id,
            action=action,
            actor=request.context.actor,
            reason=request.context.reason,
            before=(instance.status, control.state),
            after=(after.status, after_control.state),
            dispatched=dispatched,
        )
        _need(tx.append_audit(record))
        return Keep(
            ManagementApplied(
                instance.saga_id,
                action,
                after.status,
                after_control.state,
                after.revision,
                after_control.revision,
                dispatched,
            )
        )

    # -- the business query API (S-MGT-10) ------------------------------------------------

    def get_saga(self, request: GetSaga) -> SagaView | ManagementContextInvalid | ManagedSagaNotFound:
        if not context_valid(request.context):
            return ManagementContextInvalid(request.context.actor)

        def read(tx: SagaTransaction) -> SagaView | ManagedSagaNotFound:
            instance = _find(tx, request.tenant, request.saga_id, lock=False)
            if instance is None:
                return ManagedSagaNotFound(request.tenant, request.saga_id)
            return _view(instance, tx.load_control(instance.saga_id) or ACTIVE_CONTROL)

        return read_only(self.orchestrator.backend, read)

    def list_sagas(self, request: ListSagas) -> SagaPage | ManagementContextInvalid | PermissionDenied:
        refused = authorize(request.context, Permission.LIST_INSTANCES)
        if refused is not None:
            return refused

        def read(tx: SagaTransaction) -> SagaPage:
            chosen = [
                instance_from_row(r)
                for r in tx.list_instances()  # in saga-id order
                if r.definition.tenant == request.tenant
                and (request.statuses is None or r.status in request.statuses)
                and (request.after is None or r.saga_id > request.after)
            ]
            page = chosen[: request.limit]
            views = tuple(_view(i, tx.load_control(i.saga_id) or ACTIVE_CONTROL) for i in page)
            return SagaPage(views, page[-1].saga_id if len(chosen) > request.limit else None)

        return read_only(self.orchestrator.backend, read)

    def read_audit(
        self, request: ReadAudit
    ) -> AuditTrail | ManagementContextInvalid | PermissionDenied | ManagedSagaNotFound:
        refused = authorize(request.context, Permission.READ_AUDIT)
        if refused is not None:
            return refused

        def read(tx: SagaTransaction) -> AuditTrail | ManagedSagaNotFound:
            instance = _find(tx, request.tenant, request.saga_id, lock=False)
            if instance is None:
                return ManagedSagaNotFound(request.tenant, request.saga_id)
            journal = tuple(journal_from_row(r) for r in tx.journal(instance.saga_id))
            return AuditTrail(journal, tx.list_audit(instance.saga_id))

        return read_only(self.orchestrator.backend, read)
