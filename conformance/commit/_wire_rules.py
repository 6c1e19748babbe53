"""The wire-fault rule of the commit-family machines, on backends reached through a fault proxy.

``CommitTarget.specialise`` mixes ``WireFaultRules`` into the store and commit machines only when
the backend has a wire (a named service and factories that take an ``endpoint``), so the machines
of embedded backends keep exactly the rules, draws and programs they had. The rule arms one of
``conformance.wire``'s kinds on the oracle, like ``arm_store_fault``: the next store call, whoever
makes it (a rule or a committer), meets it on the wire, and the driver's own recovery runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import ConformanceMachine, step
from conformance.wire import PARTITION, STORE_WIRE_FAULTS

if TYPE_CHECKING:
    from conformance.commit._oracle import StoreOracle


#: A stall costs the client's timeout in real time, so it is drawn less often than the others.
DRAWS = ("wire-reply-lost", "wire-reply-lost", "wire-reset-before", "wire-stall", "partition")
assert set(DRAWS) == set(STORE_WIRE_FAULTS)


class WireFaultRules(ConformanceMachine):
    oracle: StoreOracle

    @rule(kind=st.sampled_from(DRAWS), requests=st.sampled_from((1, 3)))
    @step
    def arm_wire_fault(self, kind: str, requests: int) -> None:
        """The next store call meets ``kind`` on the wire (C-POST-08: settled by reading back): its
        next ``requests`` requests lose their answer, are reset before they leave, or stall past the
        client's timeout; or, for ``partition``, the next ``requests`` calls find every connection
        refused."""
        if not self.context.faults.allows(kind):
            return
        fault = STORE_WIRE_FAULTS[kind]
        if fault is PARTITION:
            self.oracle.arm(fault, calls=requests)
        else:
            self.oracle.arm(fault, calls=1, requests=requests)
