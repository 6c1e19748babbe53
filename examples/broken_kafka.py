"""Deliberately broken Kafka connectors, each wrong in exactly one way the delivery contract forbids.

They subclass the real ``impls.transport.KafkaCommandConsumer`` and change one method, so the only
thing the transport suite on ``kafka`` can find is the planted bug. Each is a factory for the
``kafka_consumer`` role (tests/conformance/test_kafka_examples.py passes the override)::

=========================  ===========  ==============================================================
factory                    rule broken  the bug
=========================  ===========  ==============================================================
OffsetBeforeCommit         S-KAFKA-02   commits the record's offset as soon as it is taken, before the
                                        handler's unit committed
DeadLetterUnacknowledged   S-KAFKA-03   produces the dead letter into a batching producer and moves
                                        the offset without waiting for the broker's delivery report
BackoffBlocksAll           S-KAFKA-04   a transient failure pauses every assigned partition, not only
                                        the failing record's
PauseKeptOnRebalance       S-KAFKA-04   a rebalance forgets the partitions it backed off without
                                        resuming them: librdkafka keeps the pause, so one given back to
                                        this member is never read again (how the real one was, until a
                                        random seed found it)
=========================  ===========  ==============================================================

``BROKEN_KAFKA`` maps each factory to the rule ID the suite must report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import confluent_kafka as ck

from impls.transport import KafkaCommandConsumer, KafkaRecord, KafkaSettled, client_config


@attrs.define
class OffsetBeforeCommit(KafkaCommandConsumer):
    def process(self, record: KafkaRecord) -> KafkaSettled:
        tp = ck.TopicPartition(self.topics.commands, record.partition, record.offset + 1)
        self._client.commit(offsets=[tp], asynchronous=False)  # BUG: before the unit's outcome
        self._committed[record.partition] = record.offset + 1
        return super().process(record)


@attrs.define
class DeadLetterUnacknowledged(KafkaCommandConsumer):
    _batching: Any = None

    def send_dead_letter(self, record: KafkaRecord, headers: Sequence[tuple[str, bytes]]) -> None:
        if self._batching is None:
            self._batching = ck.Producer(client_config(self.bootstrap, **{"linger.ms": 5000}))
        # BUG: queued, not acknowledged; the offset moves on right after this returns.
        self._batching.produce(self.topics.dead_letters, record.value, headers=list(headers))

    def abandon(self) -> None:
        super().abandon()
        self._batching = None


@attrs.define
class BackoffBlocksAll(KafkaCommandConsumer):
    def _back_off(self, record: KafkaRecord) -> None:
        super()._back_off(record)
        until = self._paused[record.partition]
        for partition in self._assigned:  # BUG: the healthy partitions wait too
            self._paused[partition] = until
            self._buffer.pop(partition, None)
            self._client.pause([ck.TopicPartition(self.topics.commands, partition)])


@attrs.define
class PauseKeptOnRebalance(KafkaCommandConsumer):
    def _on_revoke(self, client: Any, partitions: list[Any]) -> None:
        self._paused.clear()  # BUG: the back-offs forgotten, their partitions left paused in librdkafka
        super()._on_revoke(client, partitions)


BROKEN_KAFKA = {
    "OffsetBeforeCommit": "S-KAFKA-02",
    "DeadLetterUnacknowledged": "S-KAFKA-03",
    "BackoffBlocksAll": "S-KAFKA-04",
    "PauseKeptOnRebalance": "S-KAFKA-04",
}
