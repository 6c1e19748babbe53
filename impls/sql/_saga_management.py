"""The management rows of the SQL saga backend: control state and audit trail (S-MGT-05, S-MGT-09).

``controls`` (PK saga_id) holds the control state of instances that were ever paused (no row:
active at revision 1); ``audit`` (PK (saga_id, operation_id): an operation id is taken once per
saga, S-MGT-03)
holds one row per committed management action, numbered by the ``audit_seq`` counter. Both are
created with every other table (``CREATE TABLE IF NOT EXISTS``), so a database created before
them gains them on the next open.
"""

from __future__ import annotations

from typing import Any, Protocol

from impls.saga._backend import SagaBackendError, SagaBackendErrorKind
from model.saga import AuditRecord, Control, ControlState, ManagementAction, SagaStatus

#: Table -> (columns with roles, primary key), merged into ``impls.sql._saga.SCHEMA``.
MANAGEMENT_SCHEMA: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "controls": ((("saga_id", "K"), ("state", "T"), ("revision", "I")), ("saga_id",)),
    "audit": (
        (("operation_id", "K"), ("seq", "I"), ("saga_id", "K"), ("tenant", "T"), ("action", "T"),
         ("actor", "T"), ("reason", "T"), ("before_status", "T"), ("before_control", "T"),
         ("after_status", "T"), ("after_control", "T"), ("dispatched", "T")),
        ("saga_id", "operation_id"),
    ),
}  # fmt: skip

AUDIT_COLUMNS = tuple(name for name, _ in MANAGEMENT_SCHEMA["audit"][0])


class _Statements(Protocol):
    _ns: tuple[Any, ...]
    _and_ns: str

    def _t(self, table: str) -> str: ...
    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> int: ...
    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any | None: ...
    def _insert(self, table: str, columns: tuple[str, ...], values: tuple[Any, ...]) -> bool: ...
    def _bump(self, name: str) -> int: ...
    def _lock(self, lock: bool) -> str: ...


def _audit_from_row(r: Any) -> AuditRecord:
    try:
        return AuditRecord(
            seq=int(r[1]),
            saga_id=r[2],
            tenant=r[3],
            operation_id=r[0],
            action=ManagementAction(r[4]),
            actor=r[5],
            reason=r[6],
            before=(SagaStatus(r[7]), ControlState(r[8])),
            after=(SagaStatus(r[9]), ControlState(r[10])),
            dispatched=r[11],
        )
    except (ValueError, TypeError):
        raise SagaBackendError(SagaBackendErrorKind.CORRUPT, "corrupt audit row") from None


class ManagementRows:
    """``SagaTransaction``'s management methods over the dialect's statements (a mixin)."""

    def load_control(self: _Statements, saga_id: str, *, lock: bool = False) -> Control | None:
        row = self._one(
            f"SELECT state, revision FROM {self._t('controls')} WHERE saga_id = ?{self._and_ns}"
            + self._lock(lock),
            (saga_id, *self._ns),
        )
        if row is None:
            return None
        try:
            return Control(ControlState(row[0]), int(row[1]))
        except (ValueError, TypeError):
            raise SagaBackendError(SagaBackendErrorKind.CORRUPT, "corrupt control row") from None

    def save_control(self: _Statements, saga_id: str, control: Control, expected_revision: int) -> bool:
        updated = self._exec(
            f"UPDATE {self._t('controls')} SET state = ?, revision = ? "
            f"WHERE saga_id = ? AND revision = ?{self._and_ns}",
            (control.state.value, control.revision, saga_id, expected_revision, *self._ns),
        )
        if updated == 1:
            return True
        if expected_revision != 1:
            return False
        columns = ("saga_id", "state", "revision")
        return self._insert("controls", columns, (saga_id, control.state.value, control.revision))

    def next_audit_seq(self: _Statements) -> int:
        return self._bump("audit_seq")

    def append_audit(self: _Statements, record: AuditRecord) -> bool:
        values = (
            record.operation_id, record.seq, record.saga_id, record.tenant, record.action.value,
            record.actor, record.reason, record.before[0].value, record.before[1].value,
            record.after[0].value, record.after[1].value, record.dispatched,
        )  # fmt: skip
        return self._insert("audit", AUDIT_COLUMNS, values)

    def load_audit(self: _Statements, saga_id: str, operation_id: str) -> AuditRecord | None:
        row = self._one(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM {self._t('audit')} "
            f"WHERE saga_id = ? AND operation_id = ?{self._and_ns}",
            (saga_id, operation_id, *self._ns),
        )
        return None if row is None else _audit_from_row(row)

    def list_audit(self: _Statements, saga_id: str | None = None) -> tuple[AuditRecord, ...]:
        where, params = ("WHERE saga_id = ?", (saga_id,)) if saga_id is not None else ("WHERE 1 = 1", ())
        rows = self._all(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM {self._t('audit')} {where}{self._and_ns} ORDER BY seq",
            (*params, *self._ns),
        )
        return tuple(_audit_from_row(r) for r in rows)
