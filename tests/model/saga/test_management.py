"""Management actions and the business query API (S-MGT-01..10, S-STEP-07)."""

from __future__ import annotations

import attrs

from model.saga import (
    ALL_PERMISSIONS,
    SETTLED_STATUSES,
    TERMINAL_STATUSES,
    AuditTrail,
    ClaimTimer,
    CommandDelivery,
    CommandProcessed,
    ControlState,
    Decision,
    Expectation,
    FireTimer,
    GetSaga,
    ListSagas,
    Manage,
    ManagedSagaNotFound,
    ManagementAction,
    ManagementApplied,
    ManagementContext,
    ManagementContextInvalid,
    ManagementPrecondition,
    ManagementProblem,
    ManagementReplayed,
    OperationConflict,
    OperationScope,
    OrchestratorStore,
    Permission,
    PermissionDenied,
    Phase,
    ReadAudit,
    ResultDeferred,
    ResultDelivery,
    SagaPage,
    SagaStatus,
    SagaView,
    StaleSnapshot,
    StepStatus,
    TimerClaimed,
    TimerDeferred,
    claim_timer,
    fire_timer,
    get_saga,
    handle_command,
    handle_result,
    list_sagas,
    manage,
    pending_commands,
    read_audit,
    timer_id_for,
)
from tests.model.saga.builders import (
    ORCHESTRATOR,
    TENANT,
    Driver,
    always,
    participants,
    started,
    store_with,
    three_steps,
)

ART = three_steps()
OPERATOR = ManagementContext("ops-1", "INC-42: payment provider confirmed")


def in_manual(decide: Decision = Decision.UNKNOWN) -> tuple[Driver, str]:
    """A saga whose first effect stays unknown through its resolve budget: manual intervention."""
    store, saga_id = started(store_with(ART), ART.key)
    driver = Driver(store, participants(store))
    driver.run(always(decide))
    assert driver.store.instances[saga_id].status is SagaStatus.AWAITING_MANUAL_INTERVENTION
    return driver, saga_id


def act(
    store: OrchestratorStore, action: ManagementAction, saga_id: str, op: str = "op-1", **kw: object
) -> tuple[OrchestratorStore, object]:
    return manage(
        store, Manage(action, kw.pop("context", OPERATOR), kw.pop("tenant", TENANT), saga_id, op, **kw)
    )  # type: ignore[arg-type]


def test_s_step_07_manual_intervention_is_settled_not_terminal() -> None:
    assert SagaStatus.AWAITING_MANUAL_INTERVENTION in SETTLED_STATUSES - TERMINAL_STATUSES
    assert {SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.MANUALLY_CLOSED} == TERMINAL_STATUSES


def test_s_mgt_01_context_and_permission_come_before_any_read() -> None:
    driver, saga_id = in_manual()
    store = driver.store
    blind = ManagementContext("ops-1", "look", frozenset(ALL_PERMISSIONS - {Permission.MANUAL_CLOSE}))
    for target in (saga_id, "no-such-saga"):
        after, denied = act(store, ManagementAction.MANUAL_CLOSE, target, context=blind)
        assert denied == PermissionDenied("saga.manual_close") and after is store
    after, invalid = act(store, ManagementAction.PAUSE, saga_id, context=ManagementContext("ops-1", ""))
    assert invalid == ManagementContextInvalid("ops-1") and after is store


def test_s_mgt_02_another_tenants_saga_is_not_found() -> None:
    driver, saga_id = in_manual()
    after, outcome = act(driver.store, ManagementAction.PAUSE, saga_id, tenant="t2")
    assert outcome == ManagedSagaNotFound("t2", saga_id) and after is driver.store
    assert get_saga(driver.store, GetSaga(OPERATOR, "t2", saga_id)) == ManagedSagaNotFound("t2", saga_id)


def test_s_mgt_03_an_operation_is_replayed_never_redone_and_bound_to_its_action() -> None:
    driver, saga_id = in_manual()
    store, first = act(driver.store, ManagementAction.RETRY_RESOLUTION, saga_id)
    assert isinstance(first, ManagementApplied)
    again, replay = act(store, ManagementAction.RETRY_RESOLUTION, saga_id)
    assert replay == ManagementReplayed(
        saga_id, ManagementAction.RETRY_RESOLUTION, SagaStatus.RESOLVING, ControlState.ACTIVE
    )
    assert again is store
    other, conflict = act(store, ManagementAction.PAUSE, saga_id)
    assert conflict == OperationConflict("op-1") and other is store
    # another saga's operation of the same id is another operation
    store, second = started(store, ART.key, "order-2")
    _, paused = act(store, ManagementAction.PAUSE, second)
    assert isinstance(paused, ManagementApplied)


def test_s_mgt_03_a_family_scope_binds_control_and_recovery_operations_apart() -> None:
    """N-22: with ``OperationScope.FAMILY`` an id bound to a retry is unbound for a pause (and
    back), while within a family it still replays or conflicts."""
    driver, saga_id = in_manual()
    store = attrs.evolve(driver.store, operation_scope=OperationScope.FAMILY)
    store, first = act(store, ManagementAction.RETRY_RESOLUTION, saga_id)
    assert isinstance(first, ManagementApplied)
    store, paused = act(store, ManagementAction.PAUSE, saga_id)
    assert isinstance(paused, ManagementApplied)  # the control ledger has no op-1 yet
    again, replay = act(store, ManagementAction.PAUSE, saga_id)
    assert isinstance(replay, ManagementReplayed) and again is store
    other, conflict = act(store, ManagementAction.MANUAL_CLOSE, saga_id)
    assert conflict == OperationConflict("op-1") and other is store  # same family as the retry


def test_s_mgt_04_a_stale_expectation_writes_nothing() -> None:
    driver, saga_id = in_manual()
    instance = driver.store.instances[saga_id]
    stale = Expectation(revision=instance.revision - 1)
    after, outcome = act(driver.store, ManagementAction.MANUAL_CLOSE, saga_id, expectation=stale)
    assert outcome == StaleSnapshot(saga_id, instance.revision, 1) and after is driver.store
    fresh = Expectation(revision=instance.revision, control_revision=1)
    _, closed = act(driver.store, ManagementAction.MANUAL_CLOSE, saga_id, expectation=fresh)
    assert isinstance(closed, ManagementApplied) and closed.status is SagaStatus.MANUALLY_CLOSED


def test_s_mgt_05_a_paused_saga_defers_results_and_timers_until_resumed() -> None:
    store, saga_id = started(store_with(ART), ART.key)
    parts = participants(store)
    store, paused = act(store, ManagementAction.PAUSE, saga_id)
    assert isinstance(paused, ManagementApplied) and (paused.control, paused.control_revision) == (
        ControlState.PAUSED,
        2,
    )
    _, again = act(store, ManagementAction.PAUSE, saga_id, op="op-2")
    assert again == ManagementPrecondition(saga_id, ManagementProblem.NOT_ACTIVE)
    (command,) = pending_commands(store)
    _, processed = handle_command(
        parts[command.owner], CommandDelivery(command, ORCHESTRATOR, Decision.SUCCEED)
    )
    assert isinstance(processed, CommandProcessed)
    delivery = ResultDelivery(processed.result, command.owner, 0)
    after, deferred = handle_result(store, delivery)
    assert deferred == ResultDeferred(processed.result.message_id, saga_id) and after is store
    timer_id = timer_id_for(command.command_id)
    late = ART.steps[0].timeout_ms
    leased, claim = claim_timer(store, ClaimTimer(timer_id, "w1", late, 100))
    assert isinstance(claim, TimerClaimed)
    kept, skipped = fire_timer(leased, FireTimer(timer_id, claim.token, late))
    assert skipped == TimerDeferred(timer_id) and kept is leased
    store, resumed = act(
        store, ManagementAction.RESUME, saga_id, op="op-3", expectation=Expectation(control_revision=2)
    )
    assert isinstance(resumed, ManagementApplied) and resumed.control is ControlState.ACTIVE
    _, applied = handle_result(store, delivery)
    assert not isinstance(applied, ResultDeferred)


def test_s_mgt_06_retry_resolution_polls_once_more_under_a_new_command() -> None:
    driver, saga_id = in_manual()
    before = driver.store.instances[saga_id]
    store, outcome = act(driver.store, ManagementAction.RETRY_RESOLUTION, saga_id, now_ms=driver.now_ms)
    assert isinstance(outcome, ManagementApplied) and outcome.status is SagaStatus.RESOLVING
    (command,) = pending_commands(store)
    assert command.command_id == outcome.dispatched and command.phase is Phase.RESOLVE
    assert command.attempt == ART.steps[0].resolve_budget + 1  # a new attempt of the same poll
    assert store.instances[saga_id].revision == before.revision + 1
    driver.store = store
    driver.run(always(Decision.SUCCEED))
    assert driver.store.instances[saga_id].status is SagaStatus.COMPLETED


def test_s_mgt_07_retry_compensation_needs_an_unconfirmed_compensation() -> None:
    driver, saga_id = in_manual()
    _, refused = act(driver.store, ManagementAction.RETRY_COMPENSATION, saga_id)
    assert refused == ManagementPrecondition(saga_id, ManagementProblem.NO_UNCONFIRMED_COMPENSATION)
    store, saga_id = started(store_with(ART), ART.key)
    comp = Driver(store, participants(store))
    # reserve succeeds, charge is rejected, the compensation of reserve times out twice: manual
    comp.run(
        lambda c: (
            Decision.SUCCEED
            if c.phase is Phase.EXECUTE and c.step_index == 0
            else (Decision.REJECT if c.phase is Phase.EXECUTE else Decision.TRANSIENT_FAILURE)
        )
    )
    instance = comp.store.instances[saga_id]
    assert instance.status is SagaStatus.AWAITING_MANUAL_INTERVENTION
    assert instance.steps[0] is StepStatus.COMPENSATION_UNCONFIRMED
    store, retried = act(comp.store, ManagementAction.RETRY_COMPENSATION, saga_id)
    assert isinstance(retried, ManagementApplied) and retried.status is SagaStatus.COMPENSATING
    assert store.instances[saga_id].steps[0] is StepStatus.COMPENSATING
    comp.store = store
    comp.parts = {
        k: attrs.evolve(p, delivery_failures={}, dead_letters=frozenset()) for k, p in comp.parts.items()
    }
    comp.run(always(Decision.SUCCEED))
    assert comp.store.instances[saga_id].status is SagaStatus.COMPENSATED


def test_s_mgt_08_manual_close_only_from_manual_intervention_and_terminal() -> None:
    store, saga_id = started(store_with(ART), ART.key)
    _, refused = act(store, ManagementAction.MANUAL_CLOSE, saga_id)
    assert refused == ManagementPrecondition(saga_id, ManagementProblem.NOT_IN_MANUAL_INTERVENTION)
    driver, saga_id = in_manual()
    store, closed = act(driver.store, ManagementAction.MANUAL_CLOSE, saga_id)
    assert isinstance(closed, ManagementApplied) and closed.status in TERMINAL_STATUSES
    assert closed.dispatched is None and not pending_commands(store)
    _, again = act(store, ManagementAction.RETRY_RESOLUTION, saga_id, op="op-2")
    assert again == ManagementPrecondition(saga_id, ManagementProblem.NOT_IN_MANUAL_INTERVENTION)


def test_s_mgt_09_each_applied_action_leaves_one_audit_record() -> None:
    driver, saga_id = in_manual()
    store, _ = act(driver.store, ManagementAction.PAUSE, saga_id, op="p")
    store, _ = act(store, ManagementAction.RESUME, saga_id, op="r")
    store, _ = act(store, ManagementAction.MANUAL_CLOSE, saga_id, op="c")
    refused, _ = act(store, ManagementAction.MANUAL_CLOSE, saga_id, op="d")
    assert refused is store
    trail = read_audit(store, ReadAudit(OPERATOR, TENANT, saga_id))
    assert isinstance(trail, AuditTrail)
    manual = SagaStatus.AWAITING_MANUAL_INTERVENTION
    assert [(r.seq, r.operation_id, r.action, r.actor, r.before, r.after) for r in trail.management] == [
        (
            1,
            "p",
            ManagementAction.PAUSE,
            "ops-1",
            (manual, ControlState.ACTIVE),
            (manual, ControlState.PAUSED),
        ),
        (
            2,
            "r",
            ManagementAction.RESUME,
            "ops-1",
            (manual, ControlState.PAUSED),
            (manual, ControlState.ACTIVE),
        ),
        (
            3,
            "c",
            ManagementAction.MANUAL_CLOSE,
            "ops-1",
            (manual, ControlState.ACTIVE),
            (SagaStatus.MANUALLY_CLOSED, ControlState.ACTIVE),
        ),
    ]
    assert trail.transitions[-1].after is SagaStatus.MANUALLY_CLOSED
    reader = ManagementContext("ops-2", "review", frozenset({Permission.LIST_INSTANCES}))
    assert read_audit(store, ReadAudit(reader, TENANT, saga_id)) == PermissionDenied("saga.audit.read")


def test_s_mgt_10_list_pages_by_saga_id_and_filters_by_status() -> None:
    store = store_with(ART)
    ids = []
    for key in ("k1", "k2", "k3"):
        store, saga_id = started(store, ART.key, key)
        ids.append(saga_id)
    ids.sort()
    page = list_sagas(store, ListSagas(OPERATOR, TENANT, limit=2))
    assert isinstance(page, SagaPage) and [v.saga_id for v in page.items] == ids[:2]
    rest = list_sagas(store, ListSagas(OPERATOR, TENANT, after=page.next_after, limit=2))
    assert (
        isinstance(rest, SagaPage) and [v.saga_id for v in rest.items] == ids[2:] and rest.next_after is None
    )
    none = list_sagas(store, ListSagas(OPERATOR, TENANT, statuses=frozenset({SagaStatus.COMPLETED})))
    assert none == SagaPage((), None)
    assert list_sagas(store, ListSagas(OPERATOR, "t2")) == SagaPage((), None)
    view = get_saga(store, GetSaga(OPERATOR, TENANT, ids[0]))
    assert (
        isinstance(view, SagaView)
        and view.status is SagaStatus.RUNNING
        and view.control is ControlState.ACTIVE
    )
