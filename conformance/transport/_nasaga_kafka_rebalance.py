"""A rebalance mid-unit on nasaga's Kafka consumer: a second nafka member joins the group while a
unit runs on each partition (machine and theory of operation: ``_nasaga_kafka.py``).

The fault (``rebalance-mid-unit``, S-KAFKA-05): two sagas, one per partition, published with a plan
that *holds* their first attempt (the host's handler has begun the unit and waits before its
transaction, ``kafka.rs``); once both are held a second member ``c2`` joins group ``work`` in the
same host (another nafka client, nasaga's consumer sharing the handler). librdkafka's eager
protocol revokes both partitions from ``c1`` and hands one to ``c2`` while the two units still
run. What nafka and nasaga do with the revoked partition, decided from nafka 2.0.3's owner loop
(``consumer/poll_task.rs``, ``apply_rebalance``) and confirmed here on the broker: the revoke
commits only the contiguous done frontier (below the held records); the held unit is not
cancelled, and its completion belongs to the old generation, so it never moves the new owner's
offset; the new owner starts at the committed offset and redelivers the record, whose unit
commits there; the released old unit then finds the inbox row and answers "duplicate". So
each effect once (S-PART-03), offsets never ahead of outcomes (sampled while the units are held,
S-KAFKA-02), and the record redelivered to the partition's new owner (S-KAFKA-05). Then ``c2``
leaves and ``c1`` takes both partitions back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.transport import _faults as f
from conformance.transport._nasaga_kafka_checks import KafkaChecks, Plan
from conformance.transport._nasaga_kafka_world import GROUP, KEYS, PARTITION_OF, PARTITIONS
from impls.nasaga import NasagaHostError
from model import saga as m

#: Rebalances per run, per part of the walk: each costs two group rebalances (the join, the leave),
#: seconds apiece. The back-off across a rebalance (``_nasaga_kafka_backoff.py``) stops once its
#: target is reached; a try misses it when c1's revoke comes after the back-off ended.
MAX_REBALANCES = {"mid-unit": 2, "backoff": 3}
HELD_WAIT_S = 15.0  # both held units have begun within this after their publication
HANDOVER_WAIT_S = 15.0  # the new owner redelivers its partition's record within this


class RebalanceRules(KafkaChecks):
    """``_rebalance_mid_unit``: the directed walk's rebalance and its checks."""

    keys_started: set[int]
    planted_bug: str | None
    #: the last hand-over: the held sagas, those whose partition moved to ``c2``, journal mark
    _held: tuple[frozenset[str], frozenset[str], int] = (frozenset(), frozenset(), 0)

    def _publish(
        self,
        plans: dict[str, Plan] | None = None,
        kill: bool = False,
        hold: frozenset[str] = frozenset(),
        before_settle: Callable[[], None] | None = None,
    ) -> None:
        raise NotImplementedError

    def _start(self, key: int) -> None:
        raise NotImplementedError

    def _allows_rebalance(self, part: str) -> bool:
        done = int(self.context.stats.details.get(f"kafka:rebalances:{part}", "0"))
        return done < MAX_REBALANCES[part] and self.context.faults.allows(f.REBALANCE_MID_UNIT.name)

    def _count_rebalance(self, part: str) -> None:
        details = self.context.stats.details
        for key in ("kafka:rebalances", f"kafka:rebalances:{part}"):  # the run's, the part's
            details[key] = str(int(details.get(key, "0")) + 1)

    def _rebalance_mid_unit(self) -> None:
        """A second member joins the group while a unit runs on each partition (S-KAFKA-05); the
        walk's, with keys of its own (a drawn rule would find none left after the walk)."""
        free = [k for k in range(len(KEYS)) if k not in self.keys_started]
        by_partition: dict[int, int] = {}
        for k in reversed(free):  # the last keys: the walk's other steps take the first ones
            by_partition.setdefault(PARTITION_OF[self._saga_of(k)], k)
        if len(by_partition) < PARTITIONS or not self._allows_rebalance("mid-unit"):
            if "kafka:last_rebalance" not in self.context.stats.details:
                why = "no free key on each partition" if len(by_partition) < PARTITIONS else "not allowed"
                self.context.stats.details["kafka:last_rebalance"] = f"skipped: {why}"
            return
        self._count_rebalance("mid-unit")
        held = frozenset(self._saga_of(k) for k in by_partition.values())
        for k in sorted(by_partition.values()):
            self._start(k)
        self._publish(hold=held, before_settle=lambda: self._hand_over(held))
        self._leave()

    def _hand_over(self, held: frozenset[str]) -> None:
        """Both held units running: ``c2`` joins; while the old units wait, the offsets are
        sampled (S-KAFKA-02) until the new owner redelivered each record of its partitions and
        committed past it; then the units are released (``_publish`` settles)."""
        began = self._await_journal(
            lambda: held <= {str(e["saga"]) for e in self.journal if e["kind"] == "held"}, HELD_WAIT_S
        )
        self.context.inject(f.REBALANCE_MID_UNIT.name)
        try:
            reply = self.runtime.host.call(
                "kafka_join",
                namespace=self.runtime.ns,
                client=f"c2-{self.runtime.crash.kills}",
                planted_bug=self.planted_bug,
                timeout=60,
            )
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"a second nafka member did not join: {exc}") from exc
        moved = {int(p) for p in reply["assignment"]}
        self.note(f"rebalance: c2 was given partitions {sorted(moved)}")
        handed = frozenset(s for s in held if PARTITION_OF[s] in moved)
        since = len(self.journal)

        records = {
            s.partition: s.offset for s in self.sent.values() if s.saga in handed and s.kind == "command"
        }

        def taken_over() -> bool:
            """The new owner redelivered each handed record and its offset moved past it."""
            got = {
                str(e["saga"])
                for e in self.journal[since:]
                if e["kind"] == "delivered" and e["member"] == "c2" and e["ok"]
            }
            committed = self.admin.committed(GROUP, self.topics.commands, PARTITIONS)
            return handed <= got and all(committed.get(p, 0) > o for p, o in records.items())

        took_over = self._await_journal(taken_over, HANDOVER_WAIT_S)
        if not took_over:
            self.note(f"rebalance: c2 did not take over {sorted(handed)} while the old units were held")
        # Kept in the report's details, a pass's too: a planted run that found nothing says why.
        self.context.stats.details["kafka:last_rebalance"] = (
            f"held units began: {began}; c2 given {sorted(moved)}; handed {len(handed)}; "
            f"taken over: {took_over}"
        )
        self.runtime.host.call("kafka_release", namespace=self.runtime.ns)
        self._held = (held, handed, since)

    def _await_journal(self, done: Callable[[], bool], within: float) -> bool:
        """Samples (the offsets against the outcomes) until ``done`` holds or ``within`` passed."""
        deadline = time.monotonic() + within
        while True:
            self._sample()
            if done():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def _leave(self) -> None:
        """After the settle: the held records were redelivered to their partitions' new owner,
        each unit committed once (the end checks); then ``c2`` leaves the group."""
        held, handed, since = self._held
        self._held = (frozenset(), frozenset(), 0)
        entries = self.journal[since:]
        for saga in sorted(handed):
            by_c2 = [
                e
                for e in entries
                if e["kind"] == "delivered" and e["member"] == "c2" and str(e["saga"]) == saga
            ]
            if not any(e["ok"] for e in by_c2):
                raise Violation(
                    "S-KAFKA-05",
                    "a record whose partition was handed over mid-unit was not redelivered to its new owner",
                    {
                        "saga": saga,
                        "deliveries": repr([e for e in entries if str(e.get("saga")) == saga])[:800],
                    },
                )
        outcomes = {
            saga: [e["outcome"] for e in entries if e["kind"] == "handled" and str(e["saga"]) == saga]
            for saga in held
        }
        self.note(f"rebalance: handler outcomes {outcomes}")
        if handed:
            self.context.reach("revoked-unit-redelivered-to-new-owner")
        self._c2_leaves()

    def _c2_leaves(self) -> None:
        """``c2`` leaves; the host answers once ``c1`` holds every partition again: a rebalance
        straddling the walk's next part would restart nafka's count of a record's failures."""
        try:
            self.runtime.host.call(
                "kafka_leave", namespace=self.runtime.ns, partitions=PARTITIONS, timeout=60
            )
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"the second nafka member did not leave: {exc}") from exc

    @staticmethod
    def _saga_of(key: int) -> str:
        return m.saga_id_for(w.KEY.tenant, w.KEY.workflow, KEYS[key])
