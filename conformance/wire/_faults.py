"""The wire fault kinds: faults on the network between a driver and its real server.

Each is one ``FaultKind`` whose hooks drive the backend's ``FaultProxy`` around one backend call
(``conformance._faults.CallHooks``): ``before`` arms the proxy, ``after_backend`` disarms it as
soon as the call returns, so nothing the harness reads back afterwards meets the fault. A kind
counts as injected only when the proxy really met a request (an armed call that sent nothing to
the server is noted, not counted). What happens next is the driver's own doing: redis-py re-sends
the command on a new connection (its ``Retry``), cassandra-driver reports a timed-out or
failed lightweight transaction, psycopg and PyMySQL lose the answer to COMMIT; the store turns it
into a success, UNAVAILABLE or OUTCOME_UNKNOWN, and the oracle settles an uncertain one by reading
the key back, as for any uncertain outcome (C-POST-08).

All need ``requires="wire"``: a backend with no network (memory, fakeredis, SQLite) cannot
suffer them, and the coverage gate says so rather than demanding them.
"""

from __future__ import annotations

from conformance._faults import CallHooks, CallSite, FaultKind, register_fault_kind
from conformance.wire._proxy import FaultProxy, WireAction

WIRE = "wire"  # the capability (SuiteStats.details["wire"] == "True") the kinds require


def _proxy(call: CallSite) -> FaultProxy:
    if not isinstance(call.wire, FaultProxy):
        raise RuntimeError(f"a wire fault was armed for {call.label} on a backend without a proxy")
    return call.wire


class _OnRequests(CallHooks):
    """Arm the proxy for the call's next ``requests`` payload requests (optionally only COMMITs)."""

    def __init__(self, action: WireAction, match: str | None = None) -> None:
        self.action = action
        self.match = match

    def taken(self, kind: FaultKind, call: CallSite) -> None:
        """Counted in ``after_backend``, once the proxy says it met a request."""

    def before(self, kind: FaultKind, call: CallSite) -> None:
        _proxy(call).arm(self.action, call.requests, self.match, call.skip)

    def after_backend(self, kind: FaultKind, call: CallSite) -> None:
        hits = _proxy(call).disarm()
        if not hits:
            past = f" past its first {call.skip}" if call.skip else ""
            call.note(f"{call.label} -> {kind.name} armed, but the call sent no request{past} to the server")
            return
        call.inject(kind.name)
        passed = f" (after {call.skip} request(s) passed)" if call.skip else ""
        call.note(f"{call.label} -> injected {kind.name}{passed}: " + "; ".join(hit.render() for hit in hits))


class _Partition(CallHooks):
    """Every connection is reset and every new one refused while the call runs; healed after it."""

    def before(self, kind: FaultKind, call: CallSite) -> None:
        call.note(f"{call.label} -> injected partition: every connection refused")
        _proxy(call).partition(True)

    def after_backend(self, kind: FaultKind, call: CallSite) -> None:
        _proxy(call).partition(False)


WIRE_REPLY_LOST = register_fault_kind(
    FaultKind(
        "wire-reply-lost",
        "a request reached the server; its answer was dropped and the connection reset",
        _OnRequests(WireAction.REPLY_LOST),
        requires=WIRE,
    )
)
WIRE_RESET_BEFORE = register_fault_kind(
    FaultKind(
        "wire-reset-before",
        "the connection was reset before a request was forwarded; the server saw nothing",
        _OnRequests(WireAction.RESET_BEFORE),
        requires=WIRE,
    )
)
WIRE_STALL = register_fault_kind(
    FaultKind(
        "wire-stall",
        "a request reached the server; its answer was held past the client's timeout, then reset",
        _OnRequests(WireAction.STALL),
        requires=WIRE,
    )
)
WIRE_REQUEST_LOST = register_fault_kind(
    FaultKind(
        "wire-request-lost",
        "a request was lost before the server: it never ran, nothing answered, the client timed out",
        _OnRequests(WireAction.REQUEST_LOST),
        requires=WIRE,
        # met only by an outbox on the wire (conformance/commit/_outbox.py, publish_on_wire)
        applies_per="outbox_on_wire_kinds",
    )
)
PARTITION = register_fault_kind(
    FaultKind(
        "partition",
        "every connection to the server reset and refused for a drawn number of calls, then healed",
        _Partition(),
        requires=WIRE,
    )
)
WIRE_COMMIT_REPLY_LOST = register_fault_kind(
    FaultKind(
        "wire-commit-reply-lost",
        "a transaction's COMMIT reached the server; its answer was dropped and the connection reset",
        _OnRequests(WireAction.REPLY_LOST, match="COMMIT"),
        requires=WIRE,
    )
)

WIRE_COMMIT_RESET_BEFORE = register_fault_kind(
    FaultKind(
        "wire-commit-reset-before",
        "a transaction's connection was reset as its COMMIT was sent; the server never saw it",
        _OnRequests(WireAction.RESET_BEFORE, match="COMMIT"),
        requires=WIRE,
    )
)

#: The kinds the saga suite draws (``conformance/saga/_wire.py``), by name.
SAGA_WIRE_FAULTS = {k.name: k for k in (WIRE_COMMIT_REPLY_LOST, WIRE_COMMIT_RESET_BEFORE)}

#: The kinds the commit-family suites draw (``arm_wire_fault``), by name.
STORE_WIRE_FAULTS = {k.name: k for k in (WIRE_REPLY_LOST, WIRE_RESET_BEFORE, WIRE_STALL, PARTITION)}
