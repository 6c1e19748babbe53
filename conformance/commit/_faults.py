"""Fault kinds of the commit suites that hit the outbox (registered in conformance/_faults.py's catalog).

The store's own faults are the generic ``response-lost`` and ``failed-before``; these three hit
``Outbox.publish`` (and, for an outage, ``Outbox.readiness``) the same way, so the coverage gate can
ask for each of them apart from the store's.
"""

from conformance._faults import FaultKind, register_fault_kind

OUTBOX_ACK_LOST = register_fault_kind(
    FaultKind("outbox-ack-lost", "the outbox appended the entry, then the committer saw UNAVAILABLE")
)
OUTBOX_FAILED = register_fault_kind(
    FaultKind("outbox-failed", "publish failed before it reached the outbox; nothing appended")
)
OUTBOX_DOWN = register_fault_kind(
    FaultKind("outbox-down", "the outbox is down for a while: publish and readiness answer UNAVAILABLE")
)

OUTBOX_FAULTS = {kind.name: kind for kind in (OUTBOX_ACK_LOST, OUTBOX_FAILED, OUTBOX_DOWN)}
