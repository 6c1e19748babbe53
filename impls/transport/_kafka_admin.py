"""Topic set-up and raw reads of a Kafka cluster: committed offsets, watermarks, dead letters."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import attrs
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ._kafka_records import KafkaRecord, KafkaTopics, client_config, headers_of
from ._streams import TransportError


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

    def delete_topics(self, topics: KafkaTopics) -> None:
        for future in self._admin.delete_topics([topics.commands, topics.dead_letters]).values():
            with contextlib.suppress(ck.KafkaException):
                future.result(30)

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offset per partition as the broker has it (0: none yet)."""
        request = ck.ConsumerGroupTopicPartitions(
            group, [ck.TopicPartition(topic, p) for p in range(partitions)]
        )
        try:
            answer = self._admin.list_consumer_group_offsets([request])[group].result(30)
        except ck.KafkaException as exc:
            raise TransportError(f"offset fetch failed: {exc}") from exc
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
        reader = ck.Consumer(client_config(self.bootstrap, **{"group.id": "ratchet-observer"}))
        try:
            return {
                p: int(reader.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1])
                for p in range(partitions)
            }
        except ck.KafkaException as exc:
            raise TransportError(f"watermark read failed: {exc}") from exc
        finally:
            reader.close()
