"""Management and the business query API on the nasaga port (S-MGT-01..10).

The host calls nasaga's ``*_with_expectation`` entry points for the five actions and its read
APIs (``hosts/nasaga/src/ops/manage.rs``). What differs from Ratchet's runtime is translated here:

- the operator's expectation is read from *this* runtime (``expect``: none, the current
  ``version``/``control_version`` of nasaga's instance row, or a stale one), since nasaga numbers
  its own versions (N-17);
- nasaga answers a replayed operation like the first call (``Ok``), so ``ManagementApplied`` and
  ``ManagementReplayed`` both show as ``Seen("managed", (action,))``; the state read back tells
  them apart (nothing changed on a replay);
- refusals are nasaga's closed codes, mapped onto the model's names (``MANAGEMENT_REFUSALS``);
- an action is one unit: its COMMIT may meet the wire fault (``OutcomeUnknown``, S-TX-02);
- views compare saga, definition, business key, status and control state, not nasaga's own
  revision numbers; the audit trail compares the management records (nasaga keeps control
  changes and recovery operations in two streams, each in commit order: ``audit_detail``), not
  the transitions (a blind spot, like the journal); a page asks one row more than its limit to
  know whether a next one exists (nasaga returns no cursor).

A manual close cannot commit on PostgreSQL (finding N-01): the capability ``manual_close`` is off
there, so a close the model would apply is asked for with the model told it rolls back; nasaga's
``backend.retryable`` answer is the model's ``RolledBack`` (``Seen("not-committed")``) and the
read-back must show nothing changed. Every refusal of a close is drawn as well
(docs/nasaga-findings.md N-01, N-17, N-21).
"""

from __future__ import annotations

from typing import Any, Protocol

from conformance._violations import Violation
from conformance.saga._nasaga_terms import MANAGEMENT_REFUSALS, STATUS, STATUS_NAMES, Seen
from impls.nasaga import NasagaHost, NasagaHostError
from model import saga as m

#: A recovery action as nasaga names it in its management audit, where it differs from the model.
AUDITED_AS = {
    "retry_frozen_compensation": m.ManagementAction.RETRY_COMPENSATION.value
}  # rt/orchestrator.rs:2016


class _Port(Protocol):
    host: NasagaHost
    ns: str

    def _call(self, body: Any) -> Any: ...

    def _unit(self, unit: str, body: Any) -> tuple[Any, str | None]: ...


class NasagaManagement:
    """``SagaRuntime.manage`` for the nasaga port (a mixin of ``NasagaRuntime``)."""

    def manage(self: _Port, request: m.Manage, expect: str = "none") -> object:
        args: dict[str, Any] = {
            "namespace": self.ns,
            "action": request.action.value,
            "tenant": request.tenant,
            "saga_id": request.saga_id,
            "operation_id": request.operation_id,
            "now_ms": request.now_ms,
            **_context(request.context),
        }
        if expect != "none":
            row = self._call(lambda: self.host.load_instance(self.ns, request.tenant, request.saga_id))
            if row is not None:
                stale = 1 if expect == "stale" else 0
                args["expect"] = {
                    "state_version": row.version - stale,
                    "control_version": row.control_version,
                }
        # One unit: its COMMIT may meet the wire (an uncertain answer is ``OutcomeUnknown``).
        _, refused = self._unit(
            f"manage {request.action.value} {request.saga_id}",
            lambda extra: self.host.call("manage", **args, **extra),
        )
        if refused == "backend.retryable":
            # nasaga's ``SagaBackendError::Retryable``: the action's transaction rolled back and
            # nothing of it applied — the model's ``RolledBack``, which it expects of a close only
            # where that close cannot commit (N-01); anywhere else the names differ.
            return Seen("not-committed")
        if refused is not None:
            return Seen(MANAGEMENT_REFUSALS.get(refused, refused))
        return Seen("managed", (request.action.value,))

    # -- the business query API (S-MGT-09, S-MGT-10) ------------------------------------------

    def get_saga(self: _Port, request: m.GetSaga) -> object:
        """``Orchestrator::load_instance``: the tenant filters, a foreign saga is absent. It takes
        no context (the harness draws none that is invalid for a get, ``_management_rules``)."""
        body = self._call(
            lambda: self.host.call(
                "load_instance", namespace=self.ns, tenant=request.tenant, saga_id=request.saga_id
            )
        )
        row = body.get("instance")
        if row is None:
            return Seen("ManagedSagaNotFound")
        return Seen("view", _view(row))

    def list_sagas(self: _Port, request: m.ListSagas) -> object:
        """``Orchestrator::list_instances`` by saga id (no time window: keyset on the id,
        ``pg/instance.rs:276-303``); one row more than the page says whether a next page exists."""
        args: dict[str, Any] = {"tenant": request.tenant, "limit": request.limit + 1}
        if request.statuses is not None:
            args["statuses"] = sorted(n for s in request.statuses for n in STATUS_NAMES[s])
            if not args["statuses"]:
                return Seen("page", ("next=None",))
        if request.after is not None:
            args["after"] = request.after
        body, refused = _read(self, "list_instances", request.context, **args)
        if refused is not None:
            return refused
        rows = body["instances"]
        page = rows[: request.limit]
        after = str(page[-1]["saga_id"]) if len(rows) > request.limit else None
        return Seen("page", (*("|".join(_view(r)) for r in page), f"next={after}"))

    def read_audit(self: _Port, request: m.ReadAudit) -> object:
        """``Orchestrator::load_audit_trail``: control changes and management operations."""
        body, refused = _read(
            self, "load_audit_trail", request.context, tenant=request.tenant, saga_id=request.saga_id
        )
        if refused is not None:
            return refused
        shown = [
            f"{'pause' if c['to'] == 'PAUSED' else 'resume'} {c['operation_id']} {c['actor']} {c['reason']}"
            for c in sorted(body["controls"], key=lambda c: int(c["control_seq"]))
        ] + [
            f"{AUDITED_AS.get(o['action'], o['action'])} {o['operation_id']} {o['actor']} {o['reason']}"
            for o in body["management_operations"]
        ]
        return Seen("audit", tuple(shown))


def _read(port: _Port, op: str, context: m.ManagementContext, **args: Any) -> tuple[Any, Seen | None]:
    try:
        body = port._call(lambda: port.host.call(op, namespace=port.ns, **_context(context), **args))
    except NasagaHostError as exc:
        code = exc.code or "refused"
        return None, Seen(MANAGEMENT_REFUSALS.get(code, code))
    return body, None


def _context(context: m.ManagementContext) -> dict[str, Any]:
    return {
        "actor": context.actor,
        "reason": context.reason,
        "permissions": sorted(p.value for p in context.permissions),
    }


def _view(row: Any) -> tuple[str, ...]:
    """nasaga's instance row as ``view_detail`` shows the model's view."""
    status = STATUS.get(str(row["status"]))
    if status is None:
        raise Violation(
            "S-MGT-10", "a saga in a status the model has no name for", {"status": str(row["status"])}
        )
    key = m.DefinitionKey(str(row["tenant"]), str(row["workflow"]), int(row["definition_version"]))
    control = m.ControlState.PAUSED if row["control_state"] == "PAUSED" else m.ControlState.ACTIVE
    return (str(row["saga_id"]), repr(key), str(row["business_key"]), status.value, control.value)
