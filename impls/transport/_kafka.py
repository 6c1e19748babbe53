"""The Kafka connector on confluent-kafka: signed records, manual offsets, partition back-off.

A ``KafkaCommandConsumer`` is one member of a consumer group on a command topic. Records carry the
runtime's envelope blob as their value and the signature in headers (``producer``, ``kid``,
``sig``: the very ``SignedEnvelope`` of Redis Streams, S-STREAM-05). For each record it verifies
the signature, hands the envelope to a ``DeliveryHandler`` and maps the verdict:

- ``ACK`` (committed, or a duplicate absorbed): the record is done; the partition's offset is
  committed up to its frontier, the first offset without an outcome (S-KAFKA-02). Offsets are never
  committed automatically (``enable.auto.commit`` and ``enable.auto.offset.store`` are off), and
  the commit is synchronous.
- ``DEAD_LETTER``: the record is produced to the dead-letter topic and the producer is flushed
  until the broker's delivery report arrives (``acks=all``); only a successful report makes the
  record done and lets its offset move (S-KAFKA-03). A failed report raises ``TransportError`` and
  the offset stays where it was.
- ``REDELIVER`` (rolled back, COMMIT answer lost, handler failure): this partition alone is paused
  for ``backoff_ms`` and rewound to the record; the others keep being delivered (S-KAFKA-04). A
  record that failed ``max_deliveries`` times is dead-lettered as ``poison``.

The instant after the handler returned and before the offset commit is the fault point
``T-KAFKA-01``. Rebalances run through ``on_revoke`` / ``on_assign`` (eager ``range`` assignment):
a revoked partition's buffered records are dropped, its done-but-uncommitted frontier is committed
and nothing beyond it; a unit still running when its partition was revoked commits nothing; an
assigned partition restarts at the group's committed offset (S-KAFKA-05). ``abandon`` is the
consumer process dying: nothing more is committed, the group is left.

The loop is ``poll`` (fetch into per-partition buffers, resume partitions whose back-off ended),
``take`` (the next record of a partition) and ``process``; ``run`` does all three until ``drain``.
Time is a callable in milliseconds so a harness can own it. Kafka errors stop at this door as
``TransportError``.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import confluent_kafka as ck

from model.saga import DeliveryVerdict, EnvelopeRefused, KeyRing, verify

from ._handlers import DeliveryHandler, PoisonMessage
from ._kafka_records import (
    GROUP,
    REASON,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    KafkaRecord,
    KafkaSettled,
    KafkaTopics,
    client_config,
    from_record,
    headers_of,
    monotonic_ms,
    produce_acknowledged,
)
from ._streams import FaultHook, Lifecycle, TransportError, no_faults

#: Consumer errors that pass on their own: end of partition, a topic whose metadata is not there yet,
#: the broker gone for a moment (librdkafka reconnects and says so).
_PASSING = frozenset(
    {
        ck.KafkaError._PARTITION_EOF,
        ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
        ck.KafkaError._TRANSPORT,
        ck.KafkaError._ALL_BROKERS_DOWN,
    }
)

#: The killable instant: the handler answered (committed or absorbed), the offset not committed.
BEFORE_OFFSET_COMMIT = "T-KAFKA-01"


@attrs.define
class KafkaCommandConsumer:
    bootstrap: str
    topics: KafkaTopics
    group: str
    consumer: str
    keys: Callable[[], KeyRing]
    handler: DeliveryHandler
    fault_hook: FaultHook = no_faults
    clock: Callable[[], int] = monotonic_ms
    #: How long a partition whose record failed transiently waits before it is read again.
    backoff_ms: int = 1_000
    #: A record that keeps failing is a poison message after this many deliveries.
    max_deliveries: int = 5
    session_timeout_ms: int = 6_000
    state: Lifecycle = Lifecycle.NEW
    #: Counts the assignments this member was given (a harness tells rebalances apart by it).
    generation: int = 0
    _client: Any = None
    _dead_letters: Any = None
    _assigned: set[int] = attrs.field(factory=set)
    _buffer: dict[int, deque[KafkaRecord]] = attrs.field(factory=dict)
    _position: dict[int, int] = attrs.field(factory=dict)  # next offset to hand out, per partition
    _committed: dict[int, int] = attrs.field(factory=dict)
    _done: dict[int, set[int]] = attrs.field(factory=dict)  # outcomes at or above the committed offset
    _paused: dict[int, int] = attrs.field(factory=dict)  # partition -> back-off deadline (ms)
    _failures: dict[tuple[int, int], int] = attrs.field(factory=dict)
    _dead: bool = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        config = client_config(
            self.bootstrap,
            **{
                "group.id": self.group,
                "client.id": self.consumer,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range",
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": max(100, self.session_timeout_ms // 10),
                "max.poll.interval.ms": 300_000,
                "fetch.wait.max.ms": 50,
            },
        )
        self._client = ck.Consumer(config)
        self._dead_letters = ck.Producer(
            client_config(self.bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 0})
        )
        try:
            self._client.subscribe(
                [self.topics.commands], on_assign=self._on_assign, on_revoke=self._on_revoke
            )
        except ck.KafkaException as exc:
            raise TransportError(f"subscribe failed: {exc}") from exc
        self.state = Lifecycle.RUNNING

    def ready(self) -> bool:
        """Running, the broker answers a metadata request for the topic, and the engine answers."""
        if self.state is not Lifecycle.RUNNING:
            return False
        try:
            topics = self._client.list_topics(self.topics.commands, timeout=2).topics
        except ck.KafkaException:
            return False
        return self.topics.commands in topics and self.handler.ready()

    def assignment(self) -> frozenset[int]:
        return frozenset(self._assigned)

    def backing_off(self) -> frozenset[int]:
        """The partitions this member has paused for a back-off."""
        return frozenset(self._paused)

    def drain(self) -> None:
        if self.state is Lifecycle.RUNNING:
            self.state = Lifecycle.DRAINING

    def stop(self) -> None:
        """Leave the group after committing what is done (the revoke callback does that)."""
        self.drain()
        self._close()

    def abandon(self) -> None:
        """The process died: nothing more is committed or produced; the broker sees it leave."""
        self._dead = True
        self._close()

    def _close(self) -> None:
        if self.state is Lifecycle.STOPPED:
            return
        self.state = Lifecycle.STOPPED
        with contextlib.suppress(ck.KafkaException, RuntimeError):
            self._client.close()
        if not self._dead:
            self._dead_letters.flush(5)
        self._client = self._dead_letters = None  # librdkafka frees a client's threads on release

    def run(self, idle_sleep_s: float = 0.05) -> None:
        """The consumer loop (a thread of its host) until ``drain``."""
        while self.state is Lifecycle.RUNNING:
            records = self.poll(idle_sleep_s)
            for partition in sorted(self._assigned):
                while (record := self.take(partition)) is not None:
                    if self.process(record).verdict is DeliveryVerdict.REDELIVER:
                        break
            if not records:
                time.sleep(0)

    # -- the loop's steps (public: the harness interleaves them) ---------------------------

    def poll(self, timeout_s: float = 0.2, max_records: int = 100) -> list[KafkaRecord]:
        """Resume partitions whose back-off ended, fetch, and buffer what arrives in order."""
        if self.state is Lifecycle.STOPPED:
            return []
        self._resume_due()
        try:
            # poll returns at the first record (consume would wait out its timeout for a full batch);
            # what else is already fetched follows without waiting.
            first = self._client.poll(timeout_s)
            messages = [first] if first is not None else []
            if first is not None and max_records > 1:
                messages += self._client.consume(max_records - 1, 0)
        except (ck.KafkaException, RuntimeError) as exc:
            raise TransportError(f"consume failed: {exc}") from exc
        fresh = []
        for message in messages:
            if message.error() is not None:
                if message.error().code() in _PASSING:
                    continue
                raise TransportError(f"consume failed: {message.error()}")
            partition, offset = int(message.partition()), int(message.offset())
            if partition not in self._assigned or partition in self._paused:
                continue
            expected = self._position.get(partition, offset) + len(self._buffer.get(partition, ()))
            if offset != expected:
                continue  # a fetch from before a rewind: the seek brings it again in order
            record = KafkaRecord(partition, offset, message.value() or b"", headers_of(message))
            self._buffer.setdefault(partition, deque()).append(record)
            fresh.append(record)
        return fresh

    def take(self, partition: int) -> KafkaRecord | None:
        """The next record of ``partition`` in offset order; ``None`` when none is buffered, the
        partition is not ours, or it is backing off."""
        if partition not in self._assigned or partition in self._paused:
            return None
        queue = self._buffer.get(partition)
        if not queue:
            return None
        record = queue.popleft()
        self._position[partition] = record.offset + 1
        return record

    def process(self, record: KafkaRecord) -> KafkaSettled:
        """Verify, hand over, settle by the verdict (module docstring)."""
        envelope = from_record(record)
        if envelope is None:
            return self._dead_letter(record, "malformed", None, None)
        verified = verify(self.keys(), envelope)
        if isinstance(verified, EnvelopeRefused):
            return self._dead_letter(record, verified.problem.value, None, None)
        principal = verified.producer
        try:
            outcome = self.handler.handle(envelope.body, principal)
        except PoisonMessage:
            return self._dead_letter(record, "undecodable", None, principal)
        except Exception:
            key = (record.partition, record.offset)
            self._failures[key] = self._failures.get(key, 0) + 1
            if self._failures[key] >= self.max_deliveries:
                return self._dead_letter(record, "poison", None, principal)
            self._back_off(record)
            return KafkaSettled(
                record.partition,
                record.offset,
                DeliveryVerdict.REDELIVER,
                None,
                "handler_failed",
                None,
                principal,
            )
        self.fault_hook(BEFORE_OFFSET_COMMIT, f"{record.partition}:{record.offset}")
        verdict = outcome.verdict
        if verdict is DeliveryVerdict.DEAD_LETTER:
            return self._dead_letter(record, type(outcome).__name__, outcome, principal)
        if verdict is DeliveryVerdict.REDELIVER:
            self._back_off(record)
            return KafkaSettled(record.partition, record.offset, verdict, outcome, "", None, principal)
        return KafkaSettled(
            record.partition, record.offset, verdict, outcome, "", self._finish(record), principal
        )

    # -- settling ---------------------------------------------------------------------------

    def _finish(self, record: KafkaRecord) -> int | None:
        """Record the outcome and commit the partition's frontier; ``None`` when the partition was
        revoked meanwhile (its new owner reads the record again) or nothing moved."""
        partition = record.partition
        if partition not in self._assigned or self._dead:
            return None
        self._failures.pop((partition, record.offset), None)
        self._done.setdefault(partition, set()).add(record.offset)
        return self._commit_frontier(partition)

    def _commit_frontier(self, partition: int) -> int | None:
        done = self._done.get(partition, set())
        offset = self._committed.get(partition, 0)
        start = offset
        while offset in done:
            done.discard(offset)
            offset += 1
        if offset == start:
            return None
        try:
            self._client.commit(
                offsets=[ck.TopicPartition(self.topics.commands, partition, offset)], asynchronous=False
            )
        except ck.KafkaException as exc:
            done.update(range(start, offset))
            raise TransportError(f"offset commit failed: {exc}") from exc
        self._committed[partition] = offset
        return offset

    def _dead_letter(
        self, record: KafkaRecord, reason: str, outcome: object | None, principal: str | None
    ) -> KafkaSettled:
        if record.partition not in self._assigned or self._dead:
            return KafkaSettled(
                record.partition, record.offset, DeliveryVerdict.DEAD_LETTER, outcome, reason, None, principal
            )
        headers = [
            *record.headers.items(),
            (SOURCE_PARTITION, str(record.partition).encode()),
            (SOURCE_OFFSET, str(record.offset).encode()),
            (GROUP, self.group.encode()),
            (REASON, reason.encode()),
        ]
        self.send_dead_letter(record, headers)
        committed = self._finish(record)
        return KafkaSettled(
            record.partition,
            record.offset,
            DeliveryVerdict.DEAD_LETTER,
            outcome,
            reason,
            committed,
            principal,
        )

    def send_dead_letter(self, record: KafkaRecord, headers: Sequence[tuple[str, bytes]]) -> None:
        """Produce the dead letter and wait for the broker's acknowledgement (S-KAFKA-03)."""
        produce_acknowledged(self._dead_letters, self.topics.dead_letters, record.value, headers)

    def _back_off(self, record: KafkaRecord) -> None:
        """Pause this partition alone and rewind it to the record (S-KAFKA-04)."""
        partition = record.partition
        if partition not in self._assigned or self._dead:
            # Revoked while the unit ran (its member may have left and closed its client): the new
            # owner starts at the committed offset, so there is nothing here to pause (S-KAFKA-05).
            return
        self._buffer.pop(partition, None)
        self._position[partition] = record.offset
        self._paused[partition] = self.clock() + self.backoff_ms
        tp = ck.TopicPartition(self.topics.commands, partition)
        try:
            self._client.pause([tp])
        except ck.KafkaException as exc:
            raise TransportError(f"pause failed: {exc}") from exc

    def _resume_due(self) -> None:
        now = self.clock()
        due = [p for p, until in self._paused.items() if until <= now]
        for partition in due:
            del self._paused[partition]
            if partition not in self._assigned:
                continue
            tp = ck.TopicPartition(self.topics.commands, partition, self._position[partition])
            try:
                self._client.resume([ck.TopicPartition(self.topics.commands, partition)])
                self._client.seek(tp)
            except ck.KafkaException as exc:
                raise TransportError(f"resume failed: {exc}") from exc

    # -- rebalance callbacks ----------------------------------------------------------------

    def _on_assign(self, client: Any, partitions: list[Any]) -> None:
        self.generation += 1
        mine = [p for p in partitions if p.topic == self.topics.commands]
        try:
            committed = client.committed(mine, timeout=10) if mine else []
        except ck.KafkaException:
            committed = []
        known = {int(tp.partition): int(tp.offset) for tp in committed}
        for tp in mine:
            partition = int(tp.partition)
            offset = max(0, known.get(partition, 0))
            self._assigned.add(partition)
            self._committed[partition] = offset
            self._position[partition] = offset
            self._buffer.pop(partition, None)
            self._done.pop(partition, None)
            self._paused.pop(partition, None)
        # Start each partition at what the group committed (never at a stale local position).
        client.assign(
            [ck.TopicPartition(self.topics.commands, p, self._position[p]) for p in sorted(self._assigned)]
        )

    def _on_revoke(self, client: Any, partitions: list[Any]) -> None:
        # librdkafka keeps a partition's pause across unassign and assign: one paused for a back-off
        # and given back to this member would stay paused with nothing left to resume it (S-KAFKA-04;
        # librdkafka issue 1849). Resumed while still assigned, it starts afresh at the committed offset.
        paused = [
            ck.TopicPartition(self.topics.commands, p) for p in sorted(self._paused) if p in self._assigned
        ]
        if paused:
            with contextlib.suppress(ck.KafkaException):  # a closing handle: nothing to resume
                client.resume(paused)
        for tp in partitions:
            partition = int(tp.partition)
            if partition in self._assigned and not self._dead:
                # On failure the new owner reads those records again; the inbox absorbs them.
                with contextlib.suppress(TransportError):
                    self._commit_frontier(partition)
            self._assigned.discard(partition)
            self._buffer.pop(partition, None)
            self._done.pop(partition, None)
            self._paused.pop(partition, None)
        client.unassign()
