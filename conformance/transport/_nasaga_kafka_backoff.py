"""A back-off held across a rebalance on nasaga's Kafka consumer: a saga on partition 0 fails once
and a second nafka member joins before the back-off ends (machine and theory of operation:
``_nasaga_kafka.py``; the join itself: ``_nasaga_kafka_rebalance.py``).

The fault (``slow-partition`` under a rebalance, S-KAFKA-04, S-KAFKA-05): nafka answers a
transient failure by pausing the record's partition, seeking it back to the record and setting a
resume time one back-off ahead on its monotonic clock (``consumer/poll_task.rs``,
``schedule_partition_retry``). librdkafka keeps a partition's pause across unassign and assign, so
a connector that forgets its back-off at the revoke without resuming the partition never reads it
again once the partition comes back to it: the bug Ratchet's own connector had (docs/transports.md,
"Found by the suites"). Here ``c2`` joins while partition 0 backs off and sorts after ``c1``
(``AFTER_C1``), so the eager range rebalance revokes both partitions and gives partition 0 back to
``c1``; then partition 0 must be read again from the record, its committed offset, and the settle
holds the saga's effect once. What nafka does, read as the reference (``apply_rebalance``): the
revoke forgets the revoked partitions' back-offs; an assignment resumes every partition it gives,
then pauses again only what an operator or a halt paused. ``c2`` then leaves.

nafka's clock is not the harness's: whether the back-off was still in force at the revoke is
measured on the host's clock, the failure's journal entry against the look at ``c1``'s group
health that first saw the revoke (``kafka_join``'s ``first``). A join took up to 0.6 s to revoke
``c1`` here, longer than the suite's ``BACKOFF_MS``, so an example that may walk this opens its
consumer with ``LONG_BACKOFF_MS`` (``_backoff_rebalance_due``).
"""

from __future__ import annotations

from typing import Any

from conformance._faults import FaultKind
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.transport import _faults as f
from conformance.transport._nasaga_kafka_rebalance import HELD_WAIT_S, RebalanceRules
from conformance.transport._nasaga_kafka_world import KEYS, LONG_BACKOFF_MS, PARTITION_OF, SETTLE_S
from impls.nasaga import NasagaHostError

TARGET = "backoff-held-across-rebalance"
#: c2's ``client.id`` prefix. The broker names a dynamic member after its ``client.id`` and a
#: static one (c1) after its ``group.instance.id`` (``rt…-c1``); librdkafka's range assignor gives
#: the first partitions to the first name. nafka's own prefix, ``nafka``, sorts before c1.
AFTER_C1 = "zz"


class BackoffRebalance(RebalanceRules):
    """``_backoff_rebalance``: the walk's back-off across a rebalance and its checks."""

    backoff_ms: int  # nafka's back-off in this example (``kafka_open``)

    def _allows(self, kind: FaultKind) -> bool:
        raise NotImplementedError

    def _backoff_rebalance_due(self) -> bool:
        """Whether this example may walk it (its consumer then opens with ``LONG_BACKOFF_MS``)."""
        return (
            TARGET not in self.context.stats.reached
            and self._allows(f.SLOW_PARTITION)
            and self._allows_rebalance("backoff")
        )

    def _backoff_rebalance(self) -> None:
        """Directed: a saga on partition 0 fails once (nafka backs partition 0 off) and ``c2``
        joins before the back-off ends; partition 0 must be read again, from the record
        (S-KAFKA-04: redelivered from that record; S-KAFKA-05: the new owner resumes at the
        committed offset), the saga's effect once (the settle's end, S-PART-03); then ``c2``
        leaves. In the walk until reached, at most ``MAX_REBALANCES["backoff"]`` tries a run;
        the target only when the revoke came before the back-off could have ended."""
        free = [k for k in range(len(KEYS)) if k not in self.keys_started]
        on_zero = [k for k in free if PARTITION_OF[self._saga_of(k)] == 0]
        if self.backoff_ms < LONG_BACKOFF_MS or not on_zero or not self._backoff_rebalance_due():
            return
        self._count_rebalance("backoff")
        key = on_zero[-1]  # the last: the walk's later parts take the first free keys
        saga = self._saga_of(key)
        self._start(key)
        self.context.inject(f.SLOW_PARTITION.name)
        held: list[bool] = []  # the join's answer, from inside the publish (before its settle)
        self._publish({saga: ("succeed", 1)}, before_settle=lambda: held.append(self._join_in_backoff(saga)))
        self._c2_leaves()
        if any(held):
            self.context.reach(TARGET)

    def _join_in_backoff(self, saga: str) -> bool:
        """Once the saga's first attempt failed: ``c2`` joins; then partition 0 must be read again,
        from the record. True when the back-off was in force at the revoke (``_held_at_revoke``)."""
        mark = len(self.journal)

        def failures() -> list[int]:
            entries = range(mark, len(self.journal))
            return [i for i in entries if self._delivery(self.journal[i], saga) and not self.journal[i]["ok"]]

        # An attempt that succeeded instead is the settle's to judge (its end checks).
        if not self._await_journal(lambda: bool(failures()), HELD_WAIT_S):
            self.note("back-off across a rebalance: the first attempt did not fail in time; no join")
            return False
        at = failures()[0]
        failure = self.journal[at]
        try:
            reply = self.runtime.host.call(
                "kafka_join",
                namespace=self.runtime.ns,
                client=f"c2-{self.runtime.crash.kills}",
                client_id_prefix=AFTER_C1,
                planted_bug=self.planted_bug,
                timeout=60,
            )
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"a second nafka member did not join: {exc}") from exc
        # The settle would time out too; this names the rule and keeps what the join saw.
        if not self._await_journal(
            lambda: any(self._delivery(e, saga) and e["ok"] for e in self.journal[at + 1 :]), SETTLE_S
        ):
            raise Violation(
                "S-KAFKA-04",
                "a partition backed off across a rebalance was not read again",
                {"join": repr(reply)[:600], "failure": repr(failure)},
            )
        reads = [e for e in self.journal[at + 1 :] if e["kind"] == "delivered" and e["partition"] == 0]
        done = next(i for i, e in enumerate(reads) if self._delivery(e, saga) and e["ok"])
        if any(e["offset"] != failure["offset"] for e in reads[: done + 1]):
            raise Violation(
                "S-KAFKA-05",
                "partition 0 was read from another offset than its committed one after the rebalance",
                {"committed": failure["offset"], "reads": repr(reads[: done + 1])[:800]},
            )
        return self._held_at_revoke(reply, failure, reads[done])

    def _held_at_revoke(self, reply: Any, failure: dict[str, Any], read: dict[str, Any]) -> bool:
        """``c1`` held partition 0 when the join began, was seen revoked of it (eager) before the
        failure's back-off could end, and was given it back. Both time bounds lean the safe way:
        nafka sets its resume time after the failure's entry was taken, so ``at_ms + backoff_ms``
        is at or before it, and the look that saw the revoke is at or after it."""
        first = reply.get("first") or {}
        revoked = first.get("revoked_ms")
        ends = int(failure["at_ms"]) + self.backoff_ms
        in_force = revoked is not None and int(revoked) < ends
        in_force = in_force and 0 in first.get("held", []) and 0 not in first.get("then", [0])
        back = 0 not in reply.get("assignment", [])  # c2 was not given partition 0: c1 was
        # Kept in the report's details, a pass's too: a run that missed the target says why.
        self.context.stats.details["kafka:backoff_rebalance"] = (
            f"failed at {failure['at_ms']} ms, back-off to at least {ends} ms; c2 joined "
            f"{reply.get('began_ms')}-{reply.get('assigned_ms')} ms, given {reply.get('assignment')}; "
            f"c1 revoked by {revoked} ms (then {first.get('then')}), nafka's pauses the look before "
            f"{first.get('paused')}; read again at {read['at_ms']} ms by {read['member']}; "
            f"in force: {in_force}; given back: {back}"
        )
        self.note(f"back-off across a rebalance: {self.context.stats.details['kafka:backoff_rebalance']}")
        return in_force and back

    @staticmethod
    def _delivery(entry: dict[str, Any], saga: str) -> bool:
        return bool(entry["kind"] == "delivered" and str(entry["saga"]) == saga)
