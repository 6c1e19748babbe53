"""Ratchet's runtime: management actions, audit rows and the query API on every saga backend (S-MGT-*)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from impls.saga import Management
from impls.sql._saga import SCHEMA
from impls.sql._saga_management import MANAGEMENT_SCHEMA
from impls.sql._sqlite import open_sqlite_saga_backend
from model.saga import (
    AuditRecord,
    AuditTrail,
    Control,
    ControlState,
    Decision,
    Expectation,
    GetSaga,
    ListSagas,
    Manage,
    ManagementAction,
    ManagementApplied,
    ManagementContext,
    ManagementPrecondition,
    ManagementProblem,
    ManagementReplayed,
    OperationConflict,
    PermissionDenied,
    ReadAudit,
    ResultApplied,
    ResultDeferred,
    SagaPage,
    SagaStatus,
    SagaView,
    StaleSnapshot,
)

from .conftest import KEY, Rig

OPERATOR = ManagementContext("ops-1", "INC-7")


def manual(rig: Rig) -> str:
    """reserve and hold succeed, charge stays unknown: its policy is manual intervention."""
    saga_id = rig.start().saga_id
    rig.drive(lambda c: Decision.UNKNOWN if c.step_index == 2 else Decision.SUCCEED)
    instance = rig.orch.instance(saga_id)
    assert instance is not None and instance.status is SagaStatus.AWAITING_MANUAL_INTERVENTION
    return saga_id


def test_close_is_audited_replayed_and_bound_to_its_operation(rig: Rig) -> None:
    ops = Management(rig.orch)
    saga_id = manual(rig)
    revision = rig.orch.instance(saga_id).revision  # type: ignore[union-attr]
    act = ManagementAction.MANUAL_CLOSE
    stale = ops.manage(Manage(act, OPERATOR, KEY.tenant, saga_id, "c1", Expectation(revision - 1)))
    assert stale == StaleSnapshot(saga_id, revision, 1)
    blind = ManagementContext("ops-2", "look", frozenset())
    assert ops.manage(Manage(act, blind, KEY.tenant, "absent", "c1")) == PermissionDenied("saga.manual_close")
    retry = ops.manage(Manage(ManagementAction.RETRY_RESOLUTION, OPERATOR, KEY.tenant, saga_id, "r1"))
    assert retry == ManagementPrecondition(saga_id, ManagementProblem.NO_UNRESOLVED_EFFECT)  # manual policy
    closed = ops.manage(Manage(act, OPERATOR, KEY.tenant, saga_id, "c1", Expectation(revision, 1)))
    assert closed == ManagementApplied(
        saga_id, act, SagaStatus.MANUALLY_CLOSED, ControlState.ACTIVE, revision + 1, 1, None
    )
    assert ops.manage(Manage(act, OPERATOR, KEY.tenant, saga_id, "c1")) == ManagementReplayed(
        saga_id, act, SagaStatus.MANUALLY_CLOSED, ControlState.ACTIVE
    )
    assert ops.manage(
        Manage(ManagementAction.PAUSE, OPERATOR, KEY.tenant, saga_id, "c1")
    ) == OperationConflict("c1")
    trail = ops.read_audit(ReadAudit(OPERATOR, KEY.tenant, saga_id))
    assert isinstance(trail, AuditTrail)
    ((record),) = trail.management
    assert (record.seq, record.operation_id, record.actor, record.reason) == (1, "c1", "ops-1", "INC-7")
    assert record.before == (SagaStatus.AWAITING_MANUAL_INTERVENTION, ControlState.ACTIVE)
    assert record.after == (SagaStatus.MANUALLY_CLOSED, ControlState.ACTIVE)
    assert trail.transitions[-1].after is SagaStatus.MANUALLY_CLOSED


def test_a_paused_saga_defers_its_result_until_resumed(rig: Rig) -> None:
    ops = Management(rig.orch)
    saga_id = rig.start().saga_id
    paused = ops.manage(Manage(ManagementAction.PAUSE, OPERATOR, KEY.tenant, saga_id, "p1"))
    assert isinstance(paused, ManagementApplied) and paused.control_revision == 2
    command, _ = rig.command()
    envelope, deferred = rig.result(command.owner)
    assert deferred == ResultDeferred(envelope.message_id, saga_id)
    expect = Expectation(control_revision=2)
    resumed = ops.manage(Manage(ManagementAction.RESUME, OPERATOR, KEY.tenant, saga_id, "p2", expect))
    assert isinstance(resumed, ManagementApplied) and resumed.control is ControlState.ACTIVE
    assert isinstance(rig.orch.handle_result(envelope, command.owner, rig.now), ResultApplied)
    view = ops.get_saga(GetSaga(OPERATOR, KEY.tenant, saga_id))
    assert isinstance(view, SagaView) and (view.control, view.control_revision) == (ControlState.ACTIVE, 3)
    page = ops.list_sagas(ListSagas(OPERATOR, KEY.tenant, frozenset({SagaStatus.RUNNING})))
    assert isinstance(page, SagaPage) and [v.saga_id for v in page.items] == [saga_id]


def test_a_database_made_before_the_management_tables_gains_them(tmp_path: Path) -> None:
    """Migration safety: tables of an older schema (no ``controls``/``audit``, no ``audit_seq``
    counter, a NULL-able payload) are kept; opening adds the missing ones and rows work."""
    path = str(tmp_path / "old.db")
    old = sqlite3.connect(path)
    for table, (columns, key) in SCHEMA.items():
        if table in MANAGEMENT_SCHEMA:
            continue
        cols = ", ".join(
            f"{name} {'INTEGER' if role == 'I' else 'BLOB' if role == 'B' else 'TEXT'}"
            for name, role in columns
        )
        old.execute(f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({', '.join(key)}))")
    for name in ("fencing_token", "registry_revision", "seq"):
        old.execute("INSERT INTO counters (name, value) VALUES (?, 0)", (name,))
    old.commit()
    old.close()
    backend = open_sqlite_saga_backend("old", path)
    tx = backend.begin()
    record = AuditRecord(
        tx.next_audit_seq(), "s1", "t", "op", ManagementAction.PAUSE, "ops", "why",
        (SagaStatus.RUNNING, ControlState.ACTIVE), (SagaStatus.RUNNING, ControlState.PAUSED), None,
    )  # fmt: skip
    assert record.seq == 1 and tx.append_audit(record) and not tx.append_audit(record)
    assert tx.save_control("s1", Control(ControlState.PAUSED, 2), 1)
    tx.commit()
    tx = backend.begin()
    assert tx.load_control("s1") == Control(ControlState.PAUSED, 2) and tx.list_audit("s1") == (record,)
    tx.rollback()
    backend.close()
