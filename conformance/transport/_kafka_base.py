"""The Kafka transport machine's world: a real broker, one command topic, a group, the model beside it.

Per example: Ratchet's saga runtime (as in the Redis Streams machine) beside the saga model; on the
broker under test a fresh command topic of two partitions (a saga's commands share a partition, so
they keep their order; the handler routes each to its participant) and its dead-letter
topic, named after the example's namespace; one consumer
group whose members are ``c1`` (always) and ``c2`` (joins and leaves: rebalances). The delivery
model is a ``PartitionedLog`` (model/saga/_offsets.py); the harness owns the consumers' clock, so a
back-off ends when a rule advances it.

``after_step`` reads the broker raw (high watermarks, the group's committed offsets through the
admin API, the dead-letter topic with an observer that never joins the group) and holds them
against the model:

- every produced record is on its partition at the model's offset (S-KAFKA-01);
- the committed offset of each partition is the model's, never behind what was seen before
  (S-KAFKA-01), never past the frontier (S-KAFKA-02), and every genuine command below it is claimed
  in its participant's inbox (committed or absorbed) or dead-lettered by the runtime (S-KAFKA-02,
  S-DLV-01); every planted record below it is on the dead-letter topic (S-KAFKA-03);
- the dead-letter topic holds exactly the model's dead letters (S-KAFKA-03);
- no planted command reached a handler or an inbox; business facts and outboxes are the model's,
  each effect once (S-STREAM-05, S-PART-01, S-PART-03).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.transport._base import ConsumerKilled, SagaSideBase, show
from conformance.transport._faults import GRPC_ONLY, STREAMS_ONLY
from impls.saga import SagaBackendError
from impls.saga.codec import command_from_blob
from impls.transport import (
    DeadLetterReader,
    KafkaAdmin,
    KafkaPublisher,
    KafkaRecord,
    KafkaTopics,
    ParticipantHandler,
    PoisonMessage,
    TransportError,
)
from model import saga as m

PARTITIONS = 2
BACKOFF_MS = 1_000
SESSION_TIMEOUT_MS = 1_500
SETTLE_S = 45.0  # a rebalance or a broker restart must settle within this; else an environment error
DELIVERY_S = 2.0  # how long a record the model says is deliverable may take to arrive


#: A saga's commands share a partition, so they keep their order; the world's sagas alternate.
SAGA_PARTITION = {
    m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key): index % PARTITIONS
    for index, key in enumerate(w.BUSINESS_KEYS)
}


def partition_for(command: m.CommandEnvelope) -> int:
    return SAGA_PARTITION.get(command.saga_id, 0)


class KafkaMachineBase(SagaSideBase):
    def __init__(self) -> None:
        super().__init__()
        details = self.context.stats.details
        details["transport:connector"] = "kafka"
        details[STREAMS_ONLY] = "not applicable: Kafka has no pending list, claims or trims"
        details[GRPC_ONLY] = "not applicable: the Kafka machine delivers results in process"
        target = self.context.target
        self.group = f"ratchet.{self.ns}.participants"
        self.topics = KafkaTopics.of(f"ratchet.{self.ns}", "commands")
        try:
            self.bootstrap = target.bootstrap()
            self.admin = KafkaAdmin(self.bootstrap)
            self.admin.create_topics(self.topics, PARTITIONS)
            self.publisher = KafkaPublisher.open(
                self.bootstrap, self.topics.commands, w.ORCHESTRATOR, self._keys
            )
            self.observer = DeadLetterReader(self.bootstrap, self.topics)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the Kafka broker did not answer: {exc}") from exc
        self.handlers = {o: ParticipantHandler(self.runtime.parts[o], self._business) for o in w.OWNERS}
        self.log = m.PartitionedLog.of(PARTITIONS)
        self.consumers: dict[str, Any] = {}
        self.seen_generation: dict[str, tuple[int, int]] = {}
        self.commands: dict[tuple[int, int], m.CommandEnvelope] = {}
        self.bad: dict[tuple[int, int], str] = {}  # planted record -> the refusal it must get
        self.killed: set[tuple[int, int]] = set()  # records whose consumer died holding them
        self.rebalancing: set[str] = set()  # records whose unit sees the group change at T-KAFKA-01
        self.seen_committed = dict.fromkeys(range(PARTITIONS), 0)
        self.group_changes = 0
        self._setup_catalog()
        self._join("c1")

    # -- the handler every member calls: route the command to its participant ------------------

    def handle(self, body: bytes, principal: str) -> m.CommandOutcome:
        command = self._decode(body)
        self.reached_handler.append((command.owner, command.command_id))
        return self.handlers[command.owner].handle(body, principal)

    def message_id(self, body: bytes) -> str:
        return self._decode(body).command_id

    def ready(self) -> bool:
        return all(h.ready() for h in self.handlers.values())

    @staticmethod
    def _decode(body: bytes) -> m.CommandEnvelope:
        try:
            command = command_from_blob(body)
        except SagaBackendError as exc:
            raise PoisonMessage(str(exc)) from exc
        if command.owner not in w.OWNERS:
            raise PoisonMessage(f"no participant {command.owner!r}")
        return command

    # -- the group ------------------------------------------------------------------------------

    def _join(self, name: str) -> None:
        consumer = self.context.target.consumer(
            self.bootstrap,
            self.topics,
            self.group,
            name,
            self._keys,
            self,
            fault_hook=self._hook,
            clock=lambda: self.now,
            backoff_ms=BACKOFF_MS,
            session_timeout_ms=SESSION_TIMEOUT_MS,
        )
        consumer.start()
        self.consumers[name] = consumer
        self._settle_group()

    def _leave(self, name: str, *, dead: bool) -> None:
        consumer = self.consumers.pop(name)
        self.seen_generation.pop(name, None)
        for partition, part in self.log.partitions.items():
            if part.owner == name:
                self.log = m.assign_partition(self.log, partition, None)
        consumer.abandon() if dead else consumer.stop()
        if self.consumers:
            self._settle_group()

    def _settle_group(self) -> None:
        """Poll every member until each holds a partition and together they hold all of them, then
        tell the model who owns what; a member given a new assignment restarts at the committed
        offsets (S-KAFKA-05)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            owned = [c.assignment() for c in self.consumers.values()]
            union = frozenset().union(*owned)
            if all(owned) and sum(map(len, owned)) == len(union) == PARTITIONS:
                break
            if time.monotonic() > deadline:
                held = ", ".join(f"{n}: {sorted(c.assignment())}" for n, c in self.consumers.items())
                raise HarnessEnvironmentError(
                    f"the consumer group did not settle within {SETTLE_S:.0f}s (members hold {held})"
                )
            for consumer in list(self.consumers.values()):
                self._poll(consumer, 0.02)
        for name, consumer in self.consumers.items():
            generation = (id(consumer), consumer.generation)
            if self.seen_generation.get(name) == generation:
                continue
            self.seen_generation[name] = generation
            for partition in consumer.assignment():
                self.log = m.assign_partition(self.log, partition, name)
            self.note(f"{name} assigned {sorted(consumer.assignment())}")

    def _poll(self, consumer: Any, timeout_s: float) -> list[KafkaRecord]:
        try:
            records: list[KafkaRecord] = consumer.poll(timeout_s)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the Kafka broker failed a fetch: {exc}") from exc
        return records

    def _hook(self, point: str, record_id: str) -> None:
        """``T-KAFKA-01``: the unit committed (or absorbed), its offset not committed yet."""
        holder = self.log.partitions[int(record_id.split(":")[0])].owner
        if record_id in self.killing and holder is not None:
            self.killing.discard(record_id)
            self.note(f"{point}: consumer {holder} killed at {record_id}")
            self._leave(holder, dead=True)
            raise ConsumerKilled(point)
        if record_id in self.rebalancing:
            self.rebalancing.discard(record_id)
            if "c2" in self.consumers:
                self.note(f"{point}: c2 leaves the group mid-unit at {record_id}")
                self._leave("c2", dead=False)
            else:
                self.note(f"{point}: c2 joins the group mid-unit at {record_id}")
                self._join("c2")

    # -- taking the next record of a partition --------------------------------------------------

    def _take(self, partition: int) -> tuple[str, KafkaRecord] | None:
        """The owner's next record of ``partition`` beside the model's (S-KAFKA-01, S-KAFKA-04)."""
        owner = self.log.partitions[partition].owner
        if owner is None:
            return None
        consumer = self.consumers[owner]
        self.log, expected = m.deliver_record(self.log, partition, owner, self.now)
        if isinstance(expected, m.BackingOff):
            self._poll(consumer, 0.02)
            early = consumer.take(partition)
            if early is not None:
                raise Violation(
                    "S-KAFKA-04",
                    "a partition backing off delivered a record before its back-off ended",
                    {"partition": partition, "offset": early.offset, "until_ms": expected.until_ms},
                )
            return None
        if not isinstance(expected, m.RecordDelivered):
            return None
        others_waiting = any(
            p.backing_off(self.now) for q, p in self.log.partitions.items() if q != partition
        )
        self._poll(consumer, 0.0)  # a back-off that ended is lifted at the start of a poll
        if partition in consumer.backing_off():
            raise Violation(
                "S-KAFKA-04",
                "a partition that is not backing off was paused",
                {
                    "partition": partition,
                    "expected_offset": expected.offset,
                    "others_backing_off": others_waiting,
                },
            )
        deadline = time.monotonic() + DELIVERY_S
        record = consumer.take(partition)
        while record is None and time.monotonic() < deadline:
            self._poll(consumer, 0.05)
            record = consumer.take(partition)
        if record is None:
            raise Violation(
                "S-KAFKA-04",
                "a partition that is not backing off delivered nothing",
                {
                    "partition": partition,
                    "expected_offset": expected.offset,
                    "others_backing_off": others_waiting,
                },
            )
        if record.offset != expected.offset:
            raise Violation(
                "S-KAFKA-01",
                "the partition delivered another record than the model",
                {"partition": partition, "expected": expected.offset, "actual": record.offset},
            )
        if others_waiting:
            self.context.reach("healthy-partition-moved-during-backoff")
        return owner, record

    # -- checks ---------------------------------------------------------------------------------

    def after_step(self) -> None:
        deadline = time.monotonic() + SETTLE_S
        while True:  # a broker just restarted answers with stale-epoch errors for a moment
            try:
                marks = self.admin.high_watermarks(self.topics.commands, PARTITIONS)
                committed = self.admin.committed(self.group, self.topics.commands, PARTITIONS)
                letters = self.observer.read(self.admin.high_watermarks(self.topics.dead_letters, 1)[0])
                break
            except TransportError as exc:
                if time.monotonic() > deadline:
                    raise HarnessEnvironmentError(
                        f"the Kafka broker did not answer a raw read: {exc}"
                    ) from exc
                time.sleep(0.2)
                self.admin = KafkaAdmin(self.bootstrap)  # a fresh client: no metadata of the old epoch
        self._check_offsets(marks, committed, letters)
        for owner in w.OWNERS:
            self._check_participant(owner)

    def _check_offsets(
        self, marks: dict[int, int], committed: dict[int, int], letters: list[KafkaRecord]
    ) -> None:
        real_letters = sorted(
            (
                int(r.headers["source-partition"]),
                int(r.headers["source-offset"]),
                r.headers["reason"].decode(),
            )
            for r in letters
        )
        want_letters = sorted((d.partition, d.offset, d.reason) for d in self.log.dead_letters.values())
        lettered = {(p, o) for p, o, _ in real_letters}
        for partition, part in self.log.partitions.items():
            if marks[partition] != len(part.records):
                raise Violation(
                    "S-KAFKA-01",
                    "the partition holds another number of records than were produced",
                    {"partition": partition, "expected": len(part.records), "actual": marks[partition]},
                )
            offset = committed.get(partition, 0)
            details = {"partition": partition, "committed": offset, "model": part.committed}
            if offset < self.seen_committed[partition]:
                raise Violation("S-KAFKA-01", "a committed offset moved backward", details)
            self.seen_committed[partition] = offset
            for below in range(offset):
                key = (partition, below)
                if key in self.bad and key not in lettered:
                    raise Violation(
                        "S-KAFKA-03",
                        "an offset moved past a dead letter the broker never acknowledged",
                        {**details, "offset": below},
                    )
                command = self.commands.get(key)
                if command is not None and not self._claimed(command.owner, command.command_id):
                    raise Violation(
                        "S-KAFKA-02",
                        "an offset was committed before its unit committed",
                        {**details, "offset": below, "command_id": command.command_id},
                    )
            if offset != part.committed:
                raise Violation(
                    "S-KAFKA-02",
                    "the committed offset is ahead of the outcomes"
                    if offset > m.offset_frontier(part)
                    else "the committed offset differs from the model's",
                    {**details, "frontier": m.offset_frontier(part)},
                )
        if real_letters != want_letters:
            raise Violation(
                "S-KAFKA-03",
                "the dead-letter topic differs from the model",
                {"expected": show(want_letters), "actual": show(real_letters)},
            )

    def close(self) -> None:
        # librdkafka clients hold threads until they are destroyed: close or drop every one of them.
        try:
            for consumer in self.consumers.values():
                with contextlib.suppress(Exception):
                    consumer.abandon()
            self.consumers.clear()
            self.observer.close()
            self.publisher.close()
            self.admin.delete_topics(self.topics)  # this example's own topics; nothing else is touched
        except Exception:
            pass
        finally:
            for name in ("publisher", "admin", "observer"):
                self.__dict__.pop(name, None)
            self.runtime.close()
