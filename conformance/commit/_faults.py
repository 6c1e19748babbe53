"""Fault kinds of the commit suites that hit the outbox (registered in conformance/_faults.py's catalog).

The store's own faults are the generic ``response-lost`` and ``failed-before``; these three hit
``Outbox.publish`` (and, for an outage, ``Outbox.readiness``) the same way, so the coverage gate can
ask for each of them apart from the store's.
"""

from conformance._faults import FaultKind, register_fault_kind
from model.commit import FaultPoint

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


class WorkerKilled(BaseException):
    """Raised by the fault hook: the committer dies at a named fault point."""

    def __init__(self, point: FaultPoint) -> None:
        super().__init__(point.value)
        self.point = point
