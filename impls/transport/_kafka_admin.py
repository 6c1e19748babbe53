"""Topic set-up and raw reads of a Kafka cluster: committed offsets, watermarks, dead letters."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

from ._kafka_records import KafkaRecord, KafkaTopics, client_config, headers_of
from ._streams import TransportError

_T = TypeVar("_T")

_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]

# A leader or coordinator moving (a new topic's first election, a restarted broker) answers these
# for a moment; the client does not retry admin requests itself, so the reads below do.
_MOVING = frozenset(
    {
        ck.KafkaError.NOT_LEADER_FOR_PARTITION,
        ck.KafkaError.LEADER_NOT_AVAILABLE,
        ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
        ck.KafkaError.UNKNOWN_LEADER_EPOCH,
        ck.KafkaError.FENCED_LEADER_EPOCH,
        ck.KafkaError.NOT_COORDINATOR,
        ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
        ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_MOVING_FOR_S = 30.0


def _until_settled(what: str, call: Callable[[], _T]) -> _T:
    """``call()``, tried again while the cluster answers that a leader or coordinator is moving."""
    deadline = time.monotonic() + _MOVING_FOR_S
    pause = 0.05
    while True:
        try:
            return call()
        except ck.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            moving = isinstance(error, ck.KafkaError) and (error.code() in _MOVING or error.retriable())
            if not moving or time.monotonic() >= deadline:
                raise TransportError(f"{what} failed: {exc}") from exc
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


@attrs.define
class KafkaAdmin:
    """Topic set-up and raw reads for operators and the harness: committed offsets, high watermarks,
    the dead letters."""

    bootstrap: str
    _admin: Any = None

    def __attrs_post_init__(self) -> None:
        self._admin = AdminClient(client_config(self.bootstrap))

    def create_topics(self, topics: KafkaTopics, partitions: int) -> None:
        new = [NewTopic(topics.commands, partitions, 1), NewTopic(topics.dead_letters, 1, 1)]
        for name, future in self._admin.create_topics(new, operation_timeout=30).items():
            try:
                future.result(30)
            except ck.KafkaException as exc:
                if exc.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TransportError(f"create topic {name} failed: {exc}") from exc
        # The controller answered; wait until the broker's metadata serves every partition.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                known = self._admin.list_topics(timeout=5).topics
            except ck.KafkaException:
                known = {}
            listed = known.get(topics.commands)
            led = listed is not None and len(listed.partitions) == partitions
            led = led and all(meta.leader >= 0 for meta in listed.partitions.values())
            if led and topics.dead_letters in known:
                return
            time.sleep(0.05)
        raise TransportError(f"topic {topics.commands} was created but its metadata never appeared")

    def delete_topics(self, topics: KafkaTopics) -> None:
        for future in self._admin.delete_topics([topics.commands, topics.dead_letters]).values():
            with contextlib.suppress(ck.KafkaException):
                future.result(30)

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offset per partition as the broker has it (0: none yet)."""
        request = ck.ConsumerGroupTopicPartitions(
            group, [ck.TopicPartition(topic, p) for p in range(partitions)]
        )
        answer = _until_settled(
            "offset fetch",
            lambda: self._admin.list_consumer_group_offsets([request])[group].result(30),
        )
        return {int(tp.partition): max(0, int(tp.offset)) for tp in answer.topic_partitions}

    def dead_letters(self, topics: KafkaTopics) -> list[KafkaRecord]:
        """Every record of the dead-letter topic up to its high watermark, read uncommitted-free."""
        reader = ck.Consumer(
            client_config(self.bootstrap, **{"group.id": "ratchet-observer", "enable.auto.commit": False})
        )
        try:
            tp = ck.TopicPartition(topics.dead_letters, 0)
            _, high = reader.get_watermark_offsets(tp, timeout=30)
            if high <= 0:
                return []
            reader.assign([ck.TopicPartition(topics.dead_letters, 0, 0)])
            out: list[KafkaRecord] = []
            deadline = time.monotonic() + 30
            while len(out) < high and time.monotonic() < deadline:
                for m in reader.consume(100, 1.0):
                    if m.error() is None:
                        out.append(KafkaRecord(0, int(m.offset() or 0), m.value() or b"", headers_of(m)))
            if len(out) < high:
                raise TransportError(f"read {len(out)} of {high} dead letters")
            return out
        except ck.KafkaException as exc:
            raise TransportError(f"dead-letter read failed: {exc}") from exc
        finally:
            reader.close()

    def high_watermarks(self, topic: str, partitions: int) -> dict[int, int]:
        """The next offset to be written, per partition (one ListOffsets request)."""
        request = {ck.TopicPartition(topic, p): _LATEST for p in range(partitions)}
        answers = _until_settled(
            "offset listing",
            lambda: {tp.partition: f.result(30) for tp, f in self._admin.list_offsets(request).items()},
        )
        return {int(p): int(a.offset) for p, a in answers.items()}


@attrs.define
class DeadLetterReader:
    """Reads a dead-letter topic incrementally, up to its high watermark each time (an observer: it
    never joins a group and never commits)."""

    bootstrap: str
    topics: KafkaTopics
    seen: list[KafkaRecord] = attrs.field(factory=list)
    _reader: Any = None

    def __attrs_post_init__(self) -> None:
        config = client_config(
            self.bootstrap, **{"group.id": "ratchet-observer", "enable.auto.commit": False}
        )
        self._reader = ck.Consumer(config)
        self._reader.assign([ck.TopicPartition(self.topics.dead_letters, 0, 0)])

    def read(self, high: int, timeout_s: float = 30.0) -> list[KafkaRecord]:
        """Every dead letter below ``high`` (the topic's high watermark), in offset order."""
        deadline = time.monotonic() + timeout_s
        try:
            while len(self.seen) < high and time.monotonic() < deadline:
                for m in self._reader.consume(100, 0.2):
                    if m.error() is None:
                        self.seen.append(
                            KafkaRecord(0, int(m.offset() or 0), m.value() or b"", headers_of(m))
                        )
        except ck.KafkaException as exc:
            raise TransportError(f"dead-letter read failed: {exc}") from exc
        if len(self.seen) < high:
            raise TransportError(f"read {len(self.seen)} of {high} dead letters")
        return list(self.seen)

    def close(self) -> None:
        self._reader.close()
