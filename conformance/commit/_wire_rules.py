"""The wire-fault rule of the commit-family machines, on backends reached through a fault proxy.

``CommitTarget.specialise`` mixes ``WireFaultRules`` into the store and commit machines only when
the backend has a wire (a named service and factories that take an ``endpoint``), so the machines
of embedded backends keep exactly the rules, draws and programs they had. The rule arms one of
``conformance.wire``'s kinds on the oracle, like ``arm_store_fault``: the next store call, whoever
makes it (a rule or a committer), meets it on the wire, and the driver's own recovery runs.
``readiness_partitioned`` asks the store's readiness with its server partitioned away: a readiness
that answers ready then never reached the server (C-PRE-06). ``wire_walk`` (the opening of every
example on a wire) arms every kind once, each met by a history read that must reach the server:
``arm_wire_fault`` alone left a kind unmet in a whole run on some seeds (docs/ci-gate.md, "A gate
that does not hang on the seed").
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._faults import FAILED_BEFORE, RESPONSE_LOST
from conformance._machine import ConformanceMachine, step
from conformance._violations import HarnessEnvironmentError
from conformance.commit import _vocabulary as v
from conformance.commit._oracle import ObservedStore
from conformance.wire import PARTITION, STORE_WIRE_FAULTS, FaultProxy
from model.commit import MAX_SCAN_ITEMS, MessageStoreError, StoreErrorKind

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from conformance.commit._oracle import StoreOracle


#: A stall costs the client's timeout in real time, so it is drawn less often than the others.
DRAWS = ("wire-reply-lost", "wire-reply-lost", "wire-reset-before", "wire-stall", "partition")
assert set(DRAWS) == set(STORE_WIRE_FAULTS)
#: A recorded rule with its arguments for the store machine's ``directed_on_wire``: the recovery scan
#: over everything due; drawn, it first ran as late as example 28 of Cassandra's 80 (docs/ci-gate.md).
SCAN_ALL_DUE = ("scan_recoverable_commits", {"older_than": "after-now", "max_items": MAX_SCAN_ITEMS})
#: The store faults of the seam that ``seam_walk`` arms (the machines' ``arm_store_fault`` kinds).
SEAM_FAULTS = {RESPONSE_LOST.name: RESPONSE_LOST, FAILED_BEFORE.name: FAILED_BEFORE}


class WireFaultRules(ConformanceMachine):
    oracle: StoreOracle
    now: int

    if TYPE_CHECKING:

        def call(self, coro: Awaitable[Any]) -> Any: ...

    @rule(kind=st.sampled_from(DRAWS), requests=st.sampled_from((1, 3)))
    @step
    def arm_wire_fault(self, kind: str, requests: int) -> None:
        """The next store call meets ``kind`` on the wire (C-POST-08: settled by reading back): its
        next ``requests`` requests lose their answer, are reset before they leave, or stall past the
        client's timeout; or, for ``partition``, the next ``requests`` calls find every connection
        refused."""
        self._arm_wire(kind, requests, 0)

    @initialize()
    def wire_opening(self) -> None:
        """Every example on a wire opens with ``wire_walk`` and ``seam_walk``, then the machine's
        own ``directed_on_wire`` steps (recorded steps, so the program shows them and replay runs
        them; an opening is not a step itself). A real server's run is short (80-200 examples) and
        what a rule draws in a tenth of its examples may be missed: drawn, ``arm_wire_fault`` met a
        kind in 1 of 90 Cassandra examples, and ``arm_store_fault`` failed-before in 3 of 127 Redis
        ones on the fixed seed (docs/ci-gate.md). On an embedded backend none of it exists."""
        self.wire_walk()
        self.seam_walk()
        for walk in getattr(self, "directed_on_wire", ()):  # a name, or (a rule's name, its arguments)
            name, arguments = walk if isinstance(walk, tuple) else (walk, {})
            getattr(self, name)(**arguments)

    def _member_read(self, actor: str = "alice") -> None:
        query = v.history_query("t1", "c1", actor, "before", None, 100, 1 << 20, self.now)
        self.call(ObservedStore(self.oracle).history_page(query))

    @step
    def seam_walk(self) -> None:
        """Each fault of the seam (``response-lost``: the call applies and its answer is lost;
        ``failed-before``: UNAVAILABLE before it applies) armed for one call and met by a member's
        history read (C-POST-08: an uncertain read changes nothing the model holds); then the same
        page asked by one who never was a member, refused NOT_A_MEMBER (C-PRE-05: drawn, it was
        reached in 8 of 125 examples of one Redis run at 100 examples)."""
        for kind, fault in SEAM_FAULTS.items():
            if self.context.faults.allows(kind):
                self.oracle.arm(fault, calls=1)
                self._member_read()
                self.oracle.arm(None)
        self._member_read("mallory")

    @step
    def wire_walk(self) -> None:
        """Each wire kind in turn armed for one request (``partition``: one call) and met by a
        history page a member reads, which must send a request to the server (C-POST-08, C-PRE-06:
        the read fails UNAVAILABLE or the driver retries it, and what it answers must be the
        model's). Before each, readiness must answer (bounded): a driver whose connection the last
        fault reset (cassandra-driver marks the host down) sends nothing until it has reconnected,
        and a fault armed then meets no request; one unmet is armed again, up to three reads."""
        stats = self.context.stats
        # A machine whose own opening step meets a kind on a write (``met_on_wire``) skips its read:
        # each stall costs the client's timeout in real time.
        for kind in STORE_WIRE_FAULTS:
            if not self.context.faults.allows(kind) or kind in getattr(self, "met_on_wire", ()):
                continue
            before = stats.faults[kind]
            for _ in range(3):
                self.run(self._ready_again())
                self._arm_wire(kind, 1, 0)
                self._member_read()
                self.oracle.arm(None)  # a kind the read did not take waits for no later call
                if stats.faults[kind] > before:
                    break

    def _arm_wire(self, kind: str, requests: int, skip: int) -> None:
        if not self.context.faults.allows(kind):
            return
        fault = STORE_WIRE_FAULTS[kind]
        if fault is PARTITION:
            self.oracle.arm(fault, calls=requests)
        else:
            self.oracle.arm(fault, calls=1, requests=requests, skip=skip)

    @rule()
    @step
    def readiness_partitioned(self) -> None:
        """C-PRE-06: with every connection to the server refused, readiness must answer UNAVAILABLE;
        an early return, a cached answer or a client never used is no evidence. Healed afterwards,
        readiness must come back once the driver has reconnected (bounded)."""
        oracle = self.oracle
        proxy = oracle.wire
        assert isinstance(proxy, FaultProxy)
        self.note("readiness with the server partitioned: every connection refused")
        proxy.partition(True)
        try:
            result = self.run(oracle.call_real("readiness", None, oracle.real.readiness))
        finally:
            proxy.partition(False)
        if oracle.violation is not None:
            raise oracle.violation
        if not isinstance(result, MessageStoreError):
            raise oracle.fail(
                "C-PRE-06", "readiness answered ready while every connection to the server was refused"
            ).violation
        if result.kind is not StoreErrorKind.UNAVAILABLE:
            raise oracle.fail(
                "C-PRE-06",
                f"readiness with the server partitioned failed as {result.kind.value}, not unavailable",
            ).violation
        self.context.reach("readiness-refused:partition")
        self.run(self._ready_again())

    async def _ready_again(self) -> None:
        last: MessageStoreError | None = None
        for attempt in range(12):  # about 12 s of backoff, as the oracle's read-backs
            if attempt:
                await asyncio.sleep(min(0.05 * 2**attempt, 2.0))
            result = await self.oracle.call_real("readiness", None, self.oracle.real.readiness)
            if not isinstance(result, MessageStoreError):
                return
            last = result
        raise HarnessEnvironmentError(f"readiness did not come back after a healed partition: {last}")


#: How many of a call's requests a mid-call fault lets through first (``MidCallWireFaultRules``).
MID_CALL_SKIPS = (0, 0, 1, 2)


class MidCallWireFaultRules(WireFaultRules):
    """The wire rule for stores whose calls are several statements (``WireRoute.mid_call``).

    Every call of the CQL store opens with a SERIAL read and ends in a lightweight transaction
    (a read, a side-table write, then the conditional write): a fault that always meets a call's
    first request fails that read, the call ends there, and no conditional write ever loses its
    answer on the wire. Here the fault may let the first one or two requests through, so it meets
    the hint write, the history write or the conditional write itself (C-POST-08; the planted
    ``examples.wire_stores:cql_timeout_not_applied`` is caught only this way).
    """

    @rule(kind=st.sampled_from(DRAWS), requests=st.sampled_from((1, 3)), skip=st.sampled_from(MID_CALL_SKIPS))
    @step
    def arm_wire_fault(self, kind: str, requests: int, skip: int) -> None:
        """As ``WireFaultRules.arm_wire_fault``, but the call's first ``skip`` requests pass
        untouched and the fault meets the ones after them (``partition`` ignores ``skip``)."""
        self._arm_wire(kind, requests, skip)
