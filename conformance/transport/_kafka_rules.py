"""Rules of the Kafka transport machine: publish, plant, process (with its faults), scale, clock, broker.

Every rule drives the real connector (``impls.transport.KafkaCommandConsumer`` on a real broker)
and the delivery model (``model.saga`` ``PartitionedLog``) with the same input; the participant's
transaction is compared with ``model.saga.handle_command`` as in the Redis Streams machine.
Checks after every step are ``KafkaMachineBase.after_step``; at quiescence faults stop, every
partition is read to its end and its committed offset must reach it.
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.crash import ServiceControlError
from conformance.saga import _world as w
from conformance.saga._faults import COMMIT_ROLLED_BACK, RELAY_CRASH
from conformance.transport import _faults as f
from conformance.transport._base import ConsumerKilled, show
from conformance.transport._kafka_base import BACKOFF_MS, PARTITIONS, KafkaMachineBase, partition_for
from conformance.transport._stream_rules import _outcome_rule
from impls.saga.codec import command_to_blob
from impls.transport import DeadLetterReader, KafkaAdmin, KafkaSettled, TransportError, to_headers
from model import saga as m

partitions = st.integers(0, PARTITIONS - 1)
decisions = st.sampled_from(["succeed"] * 4 + ["reject", "unknown", "transient_failure"])
fates = st.sampled_from(["committed"] * 3 + ["rolled_back", "unknown_applied", "unknown_not_applied"])
PLANTED = {
    "unsigned": (f.UNSIGNED_ENVELOPE, "unsigned"),
    "forged": (f.FORGED_ENVELOPE, "bad_signature"),
    "old_key": (f.OLD_KEY_ENVELOPE, "retired_key"),
    "poison": (f.POISON, "undecodable"),
}
MAX_BROKER_RESTARTS = 1  # per run: a restart costs the broker's whole start-up (seconds)
MAX_GROUP_CHANGES = 3  # per example: each rebalance costs about half a second on the broker
WALK_ONE_IN = 10  # examples of which one opens with the walk (``first_start``); the first always


class KafkaMachine(KafkaMachineBase):
    def _put_on_wire(self, command: m.CommandEnvelope) -> None:
        partition = partition_for(command)
        try:
            _, offset = self.publisher.publish(command_to_blob(command), partition)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the Kafka broker refused a produce: {exc}") from exc
        self.log, expected = m.produce_record(self.log, partition, command.command_id)
        self._check_offset(partition, expected, offset)
        self.commands[(partition, offset)] = command

    def _check_offset(self, partition: int, expected: int, actual: int) -> None:
        if expected != actual:
            raise Violation(
                "S-KAFKA-01",
                "a produce got another offset than the model",
                {"partition": partition, "expected": expected, "actual": actual},
            )

    @rule(partition=partitions)
    @step
    def republish(self, partition: int) -> None:
        """The relay died after the produce and before recording it: the command goes out again."""
        genuine = [c for (p, _), c in sorted(self.commands.items()) if p == partition]
        if not self._allows(RELAY_CRASH) or not genuine:
            return
        self.context.inject(RELAY_CRASH.name)
        self._put_on_wire(genuine[-1])

    @rule(partition=partitions, how=st.sampled_from(sorted(PLANTED)))
    @step
    def plant_record(self, partition: int, how: str) -> None:
        """A record no genuine producer wrote: dead-lettered before any handler (S-STREAM-05)."""
        kind, reason = PLANTED[how]
        genuine = [c for _, c in sorted(self.commands.items())]
        if not self._allows(kind) or not genuine:
            return
        self.context.inject(kind.name)
        base = genuine[-1]
        attempt = base.attempt + 50
        forged = attrs.evolve(base, attempt=attempt, command_id=m.command_id_for(base.effect_id, attempt))
        body = command_to_blob(forged)
        signer = self.ring.signing_key(w.ORCHESTRATOR)
        assert signer is not None
        if how == "unsigned":
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, None, None)
        elif how == "forged":
            sig = m.signature_for(b"not the secret", signer.key_id, w.ORCHESTRATOR, body)
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, signer.key_id, sig)
        elif how == "old_key":
            sig = m.signature_for(b"retired-secret", "k0", w.ORCHESTRATOR, body)
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, "k0", sig)
        else:
            signed = m.sign(self.ring, w.ORCHESTRATOR, b"\x00not an envelope")
            assert signed is not None
            envelope = signed
        self.bad_ids.add(forged.command_id)
        try:
            _, offset = self.publisher.produce_raw(envelope.body, to_headers(envelope), partition)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the Kafka broker refused a produce: {exc}") from exc
        self.log, expected = m.produce_record(self.log, partition, f"planted:{how}")
        self._check_offset(partition, expected, offset)
        self.bad[(partition, offset)] = reason

    @rule()
    @step
    def rotate_key(self) -> None:
        """The orchestrator signs with a new key; records signed with the old one still verify."""
        if not self._allows(f.KEY_ROTATED):
            return
        self.context.inject(f.KEY_ROTATED.name)
        self.keys_made += 1
        key_id = f"k{self.keys_made}"
        self.ring = m.rotate(self.ring, w.ORCHESTRATOR, key_id, f"secret-{key_id}".encode())

    @rule(
        partition=partitions,
        decision=decisions,
        fate=fates,
        fault=st.sampled_from(["none"] * 2 + ["kill", "rebalance"]),
    )
    @step
    def process(self, partition: int, decision: str, fate: str, fault: str) -> None:
        """The partition's owner takes its next record and runs the unit; ``kill`` ends the consumer
        at T-KAFKA-01 (after the COMMIT, before the offset commit), ``rebalance`` makes c2 join or
        leave the group right there."""
        self._publish()
        last = PARTITIONS - 1
        if (
            fault == "rebalance"
            and len(self.log.partitions[last].records) > self.log.partitions[last].position
        ):
            # Members are ordered by client id under the range assignor: a change of c2 moves the last
            # partition, so a rebalance aims at a unit there.
            partition = last
        part = self.log.partitions[partition]
        if part.position >= len(part.records):  # nothing new here: the other partition's turn
            partition = (partition + 1) % PARTITIONS
        self._process(partition, m.Decision(decision), fate, fault)

    def _process(self, partition: int, decision: m.Decision, fate: str, fault: str) -> None:
        taken = self._take(partition)
        if taken is None:
            return
        name, record = taken
        key = (partition, record.offset)
        consumer = self.consumers[name]
        if key in self.bad:
            settled = consumer.process(record)
            self._settle(name, key, m.DeliveryVerdict.DEAD_LETTER, self.bad[key], settled)
            return
        command = self.commands[key]
        record_id = f"{partition}:{record.offset}"
        changes_left = self.group_changes < MAX_GROUP_CHANGES
        if fault == "kill" and changes_left and self._allows(f.KAFKA_CONSUMER_KILLED):
            self.group_changes += 1
            self.killing.add(record_id)
        elif fault == "rebalance" and changes_left and self._allows(f.REBALANCE_MID_UNIT):
            self.group_changes += 1
            self.rebalancing.add(record_id)
            self.context.inject(f.REBALANCE_MID_UNIT.name)
        self.decision = decision
        commit = self._set_fate(fate)
        self.parts[command.owner], expected = m.handle_command(
            self.parts[command.owner], m.CommandDelivery(command, w.ORCHESTRATOR, decision, commit)
        )
        try:
            settled = consumer.process(record)
        except ConsumerKilled:
            self.context.inject(f.KAFKA_CONSUMER_KILLED.name)
            self.killed.add(key)
            self._join(name)  # its replacement: a new member under the same name
            return
        finally:
            self.killing.discard(record_id)
            self.rebalancing.discard(record_id)
            self.fate, self.decision = m.CommitFate.COMMITTED, m.Decision.SUCCEED
        self.expect(_outcome_rule(expected), expected, settled.outcome)
        if isinstance(expected, m.DuplicateCommand) and key in self.killed:
            self.context.reach("redelivery-after-kill-absorbed")
        if expected.verdict is m.DeliveryVerdict.REDELIVER and self._allows(f.SLOW_PARTITION):
            self.context.inject(f.SLOW_PARTITION.name)
        reason = type(expected).__name__ if expected.verdict is m.DeliveryVerdict.DEAD_LETTER else ""
        self._settle(name, key, expected.verdict, reason, settled)

    def _settle(
        self, name: str, key: tuple[int, int], verdict: m.DeliveryVerdict, reason: str, settled: KafkaSettled
    ) -> None:
        """The unit's outcome in the model, then the offset the connector committed against the
        frontier (S-KAFKA-02, S-KAFKA-03)."""
        partition, offset = key
        if (settled.verdict, settled.reason if verdict is m.DeliveryVerdict.DEAD_LETTER else "") != (
            verdict,
            reason,
        ):
            raise Violation(
                "S-KAFKA-03" if verdict is m.DeliveryVerdict.DEAD_LETTER else "S-KAFKA-02",
                "the record was settled otherwise than the model settles it",
                {
                    "record": show(key),
                    "expected": f"{verdict} {reason}",
                    "actual": f"{settled.verdict} {settled.reason}",
                },
            )
        if self.log.partitions[partition].owner != name:
            self.context.reach("rebalance-mid-unit-redelivered")
            if settled.committed is not None:
                raise Violation(
                    "S-KAFKA-05",
                    "a unit committed the offset of a partition revoked while it ran",
                    {"record": show(key), "committed": settled.committed},
                )
            return
        before = self.log.partitions[partition].committed
        self.log, _ = m.settle_record(
            self.log, partition, offset, verdict, reason=reason, now_ms=self.now, backoff_ms=BACKOFF_MS
        )
        frontier = m.offset_frontier(self.log.partitions[partition])
        expected = frontier if frontier > before else None
        if settled.committed is not None:
            self.log, outcome = m.commit_offset(self.log, partition, settled.committed)
            if isinstance(outcome, m.OffsetRefused):
                raise Violation(
                    "S-KAFKA-02",
                    "the connector committed an offset past the frontier",
                    {"record": show(key), "committed": settled.committed, "frontier": outcome.frontier},
                )
        if settled.committed != expected:
            raise Violation(
                "S-KAFKA-02",
                "the connector did not commit the partition's frontier after the outcome",
                {"record": show(key), "expected": expected, "actual": settled.committed},
            )
        if verdict is m.DeliveryVerdict.DEAD_LETTER:
            self.context.reach(f"dead-letter:{reason}")

    def _waiting(self, partition: int) -> bool:
        part = self.log.partitions[partition]
        return part.position < len(part.records) and not part.backing_off(self.now)

    def _feed(self, partition: int) -> bool:
        """Make sure ``partition`` has a record to read (a saga of its own starts); False if none came."""
        self._publish()
        if not self._waiting(partition):
            self._start(partition)  # the world's saga ``partition`` lives on that partition
            self._publish()
        return self._waiting(partition)

    @rule(fate=fates)
    @step
    def slow_partition(self, fate: str) -> None:
        """A transient failure backs partition 0 off; partition 1 is read meanwhile (S-KAFKA-04)."""
        if not self._allows(f.SLOW_PARTITION) or not (self._feed(0) and self._feed(1)):
            return
        self._process(0, m.Decision.TRANSIENT_FAILURE, "committed", "none")
        self._process(1, m.Decision.SUCCEED, fate, "none")

    @rule(fate=fates, how=st.sampled_from(["rebalance", "kill"]))
    @step
    def move_mid_unit(self, fate: str, how: str) -> None:
        """A unit of the last partition sees c2 join or leave (``rebalance``: members are ordered by
        client id under the range assignor, so the last partition moves) or its consumer die
        (``kill``) between its COMMIT and its offset commit; the record is read once more."""
        last = PARTITIONS - 1
        if self.group_changes >= MAX_GROUP_CHANGES or not self._feed(last):
            return
        while self._waiting(last) and (last, self.log.partitions[last].position) in self.bad:
            self._process(last, m.Decision.SUCCEED, "committed", "none")  # planted records first
        if not self._feed(last):
            return
        self._process(last, m.Decision.SUCCEED, fate, how)
        if self._waiting(last):
            self._process(last, m.Decision.SUCCEED, "committed", "none")

    @rule()
    @step
    def scale(self) -> None:
        """c2 joins the group, or leaves it: an eager rebalance between units (S-KAFKA-05)."""
        if self.group_changes >= MAX_GROUP_CHANGES:
            return
        self.group_changes += 1
        if "c2" in self.consumers:
            self._leave("c2", dead=False)
        else:
            self._join("c2")
        self.context.reach("rebalanced")

    @initialize(key=st.integers(0, 2), walk=st.integers(0, WALK_ONE_IN - 1))
    def first_start(self, key: int, walk: int = 1) -> None:
        """Every example opens with a saga whose first command is on the wire, through recorded
        rules (so its program replays as it ran). One example in ``WALK_ONE_IN`` (``walk`` 0: the
        first, simplest example a run draws is one, and shrinking keeps it) then walks every rule
        and fault once, through the recorded rules themselves: with 20 examples a run, what a rule
        draws in a few of them was missed by one random seed in two (rebalance-mid-unit, an old
        key's envelope), and two steps in one order by the fixed seed (``backoff_walk``). Drawn,
        not counted per run, so a replay and Hypothesis's own replays take the same walk."""
        self.start(key=key)
        self.publish_commands()
        if walk != 0:
            return
        # Each business key's saga puts one command on its partition (k1, k3 on 0; k2 on 1): k1
        # (``key`` 0, the simplest draw) backs off across a rebalance; k3 backs off beside k2, and
        # its redelivery is the unit whose consumer is killed; a copy of k2's command is the unit on
        # the last partition, the one a rebalance moves.
        self.backoff_walk()
        self.start(key=2)
        self.slow_partition(fate="committed")
        self.republish(partition=1)
        self.move_mid_unit(fate="committed", how="rebalance")
        self.advance_clock(ms=BACKOFF_MS)
        self.process(partition=0, decision="succeed", fate="committed", fault="kill")
        self.rotate_key()
        for number, how in enumerate(sorted(PLANTED)):
            self.plant_record(partition=number % PARTITIONS, how=how)
        self.scale()
        self.restart_broker()

    @step
    def backoff_walk(self) -> None:
        """From the walking opening (``first_start``): a transient failure (a COMMIT rolled back)
        backs partition 0 off, then c2 joins before the back-off ends; c1, given partition 0 again
        by the range assignor, must read it at once from the committed offset (S-KAFKA-05: the new
        owner resumes there; S-KAFKA-04: it is redelivered); then c2 leaves. librdkafka keeps a
        partition's pause across a rebalance, and a connector that forgot its back-off without
        resuming it never read that partition again: found by a random seed, two steps in an order
        the rules drew too rarely (docs/transports.md, "Found by the suites"). Its rebalances are
        not ``group_changes``."""
        if not self._allows(f.SLOW_PARTITION) or "c2" in self.consumers or not self._feed(0):
            return
        # A rolled-back COMMIT is a transient failure too (REDELIVER), and the rarer draw.
        fate = "rolled_back" if self._allows(COMMIT_ROLLED_BACK) else "committed"
        decision = m.Decision.SUCCEED if fate == "rolled_back" else m.Decision.TRANSIENT_FAILURE
        self._process(0, decision, fate, "none")
        self.after_step()  # the checks a program runs between two steps (offsets first)
        held = self.log.partitions[0].backing_off(self.now)
        self._join("c2")
        if self._waiting(0):
            self._process(0, m.Decision.SUCCEED, "committed", "none")
        self.after_step()
        self._leave("c2", dead=False)
        if held:
            self.context.reach("backoff-held-across-rebalance")

    @rule(ms=st.sampled_from([BACKOFF_MS // 2, BACKOFF_MS]))
    @step
    def advance_clock(self, ms: int) -> None:
        self.now += ms

    @rule()
    @step
    def restart_broker(self) -> None:
        """kill -9 the broker and start it again on its data directory: what was committed and
        every acknowledged dead letter must still be there (checked after the step)."""
        control = self.context.target.broker_control
        restarts = int(self.context.stats.details.get("kafka:broker_restarts", "0"))
        if control is None or not self._allows(f.BROKER_RESTART) or restarts >= MAX_BROKER_RESTARTS:
            return
        self.context.inject(f.BROKER_RESTART.name)
        self.context.stats.details["kafka:broker_restarts"] = str(restarts + 1)
        try:
            service = control()
            service.kill()
            service.restart()
        except ServiceControlError as exc:
            raise HarnessEnvironmentError(f"the broker could not be restarted: {exc}") from exc
        # The group coordinator forgot its members' sessions while the broker was down: the host
        # restarts its consumers (nothing was done and uncommitted: every outcome commits at once).
        members = sorted(self.consumers)
        self.admin = KafkaAdmin(self.bootstrap)
        self.observer.close()
        self.observer = DeadLetterReader(self.bootstrap, self.topics)
        for name in members:
            self.consumers.pop(name).abandon()
            self.seen_generation.pop(name, None)
        for partition in self.log.partitions:
            self.log = m.assign_partition(self.log, partition, None)
        for name in members:
            self._join(name)
        self.context.reach("offsets-survived-broker-restart")

    def at_quiescence(self) -> None:
        """Faults stop; every record ends done and every partition's committed offset reaches its
        end (S-KAFKA-02, S-DLV-02)."""
        self.killing.clear()
        self.rebalancing.clear()
        for _ in range(6):
            self._publish()
            for _ in range(60):
                self.now += BACKOFF_MS
                moved = False
                for partition, part in self.log.partitions.items():
                    if part.position < len(part.records):
                        self._process(partition, m.Decision.SUCCEED, "committed", "none")
                        moved = True
                if not moved:
                    break
            if not m.pending_commands(self.model):
                break
        for partition, part in self.log.partitions.items():
            if part.committed != len(part.records):
                raise Violation(
                    "S-KAFKA-02",
                    "a partition's committed offset did not reach its end with faults stopped",
                    {"partition": partition, "committed": part.committed, "end": len(part.records)},
                )
        self.after_step()
