"""A directed rule of the commit suite: the walks a random program takes too rarely to count on.

The coverage gate demands a crash at every fault point, a commit finished from each durable stage,
and an outbox entry the store never heard of reused after a crash and after a lost outbox ack. A
random program needs an arm step, then a send of a fresh key, then (often much later) a resume of
that key by a new committer, in that order; on some seeds a ci run never lines them up and the gate
fails by chance. ``fault_walk`` takes every such walk, once per example, in one step, through the
very bodies of the machine's own rules (``arm_crash``, ``arm_outbox_fault``, ``send``,
``resume``), so every check runs as it does for them; the program names it (``fault_walk()``),
replay repeats it and shrinking drops it when a violation does not need it (docs/ci-gate.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis.stateful import rule

from conformance._machine import step
from conformance.commit import _vocabulary as v
from conformance.commit._commit_machine import CommitMachine
from conformance.commit._faults import OUTBOX_ACK_LOST, OUTBOX_FAILED
from model.commit import FaultPoint


def _body(name: str) -> Any:
    return getattr(CommitMachine, name).__wrapped__  # the rule without its step recording


class DirectedCommitMachine(CommitMachine):
    #: Run by the opening on a wire only (``WireFaultRules.wire_opening``); the send through the suite's
    #: quota for a tenant that admits none: drawn, it met the quota exhausted as late as example 12 of
    #: Cassandra's 40 (C-PRE-08; docs/ci-gate.md, "reach").
    directed_on_wire = ("stalled_send", ("send_with_quota", {"key": "t2/alice/m1"}))
    #: The wire kinds ``stalled_send`` meets on a write, which ``wire_walk`` then leaves out.
    met_on_wire = ("wire-reply-lost", "wire-stall")

    if TYPE_CHECKING:

        def _arm_wire(self, kind: str, requests: int, skip: int) -> None: ...  # WireFaultRules

        async def _ready_again(self) -> None: ...  # WireFaultRules

    def __init__(self) -> None:
        super().__init__()
        self.walked = False

    @rule()
    @step
    def fault_walk(self) -> None:
        """Once per example, on fresh keys: a committer killed at each fault point, then one whose
        outbox answer is lost and one whose publish fails; each key resumed by a new committer,
        which must finish it from its durable stage reusing the outbox entry (C-POST-09, the
        outbox checks)."""
        if self.walked:
            return
        self.walked = True
        fresh = [k for k in v.KEYS if v.parse_key(k) not in self.oracle.state.commits]
        plan = [("crash", point.value) for point in FaultPoint]
        plan += [("outbox", OUTBOX_ACK_LOST.name), ("outbox", OUTBOX_FAILED.name)]
        for (kind, what), key in zip(plan, fresh, strict=False):
            if kind == "crash":
                _body("arm_crash")(self, point=what)
            else:
                _body("arm_outbox_fault")(self, kind=what, calls=1)
            _body("send")(self, key=key, variant="same")
            self.after_step()  # the checks a program runs between the two steps
            if v.parse_key(key) in self.oracle.state.commits:
                _body("resume")(self, key=key)
                self.after_step()

    @step
    def stalled_send(self) -> None:
        """On a wire, from the opening: two sends of fresh keys whose reserve meets
        ``wire-reply-lost``, then ``wire-stall`` (on a mid-call route past the call's first two
        requests: the conditional write), so the driver re-sends a request the server already ran,
        or gives up on a write the server may have applied, and the store must recognise it as its
        own or settle it (C-POST-01, C-POST-08). Drawn, this needs ``arm_wire_fault`` with the
        right arguments just before a send of a fresh key; both planted ``examples.wire_stores``
        are caught by it."""
        fresh = [k for k in v.KEYS if v.parse_key(k) not in self.oracle.state.commits]
        skip = 2 if self.context.target.wire.mid_call else 0
        for kind, key in zip(self.met_on_wire, reversed(fresh), strict=False):
            if self.context.faults.allows(kind):
                self.run(self._ready_again())  # a driver still reconnecting would send nothing
                self._arm_wire(kind, 1, skip)
                _body("send")(self, key=key, variant="same")
                self.after_step()  # the checks a program runs between two steps
                self.oracle.arm(None)
