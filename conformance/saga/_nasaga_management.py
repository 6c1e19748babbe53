"""Management on the nasaga port: pause and resume through the host's ``manage`` op (S-MGT-01..05).

The host calls nasaga's ``pause_with_expectation``/``resume_with_expectation``
(``hosts/nasaga/src/ops/manage.rs``). What differs from Ratchet's runtime is translated here:

- the operator's expectation is read from *this* runtime (``expect``: none, the current
  ``version``/``control_version`` of nasaga's instance row, or a stale one), since nasaga numbers
  its own versions (N-17);
- nasaga answers a replayed operation like the first call (``Ok``), so ``ManagementApplied`` and
  ``ManagementReplayed`` both show as ``Seen("managed", (action,))``; the state read back tells
  them apart (nothing changed on a replay);
- refusals are nasaga's closed codes, mapped onto the model's names (``MANAGEMENT_REFUSALS``).

Retries, close and the business query API are not driven here yet (``RuntimeCapabilities``:
``recovery_actions``, ``business_queries``; docs/nasaga-findings.md N-17, N-01).
"""

from __future__ import annotations

from typing import Any, Protocol

from conformance.saga._nasaga_terms import MANAGEMENT_REFUSALS, Seen
from impls.nasaga import NasagaHost, NasagaHostError
from model import saga as m


class _Port(Protocol):
    host: NasagaHost
    ns: str

    def _call(self, body: Any) -> Any: ...


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
            "actor": request.context.actor,
            "reason": request.context.reason,
            "permissions": sorted(p.value for p in request.context.permissions),
        }
        if expect != "none":
            row = self._call(lambda: self.host.load_instance(self.ns, request.tenant, request.saga_id))
            if row is not None:
                stale = 1 if expect == "stale" else 0
                args["expect"] = {
                    "state_version": row.version - stale,
                    "control_version": row.control_version,
                }
        try:
            self._call(lambda: self.host.call("manage", **args))
        except NasagaHostError as exc:
            code = exc.code or "refused"
            return Seen(MANAGEMENT_REFUSALS.get(code, code))
        return Seen("managed", (request.action.value,))
