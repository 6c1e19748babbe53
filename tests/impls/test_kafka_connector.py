"""The Kafka connector on the real broker: offsets after outcomes, per-partition back-off, dead
letters acknowledged before the offset moves, rebalance to a second member (S-KAFKA-01..05)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from impls.endpoints import kafka_bootstrap
from impls.transport import KafkaAdmin, KafkaCommandConsumer, KafkaPublisher, KafkaRecord, KafkaTopics
from model.saga import DeliveryVerdict, KeyRing, KeyState, SigningKey, add_key

pytestmark = pytest.mark.service("kafka")

RING = add_key(KeyRing(), SigningKey("k1", "orchestrator", b"secret", KeyState.SIGNING))


@attrs.frozen
class Outcome:
    verdict: DeliveryVerdict


@attrs.define
class Handler:
    """Answers with the verdict it is told to; records what reached it."""

    verdict: DeliveryVerdict = DeliveryVerdict.ACK
    seen: list[bytes] = attrs.field(factory=list)

    def handle(self, body: bytes, principal: str) -> Outcome:
        self.seen.append(body)
        return Outcome(self.verdict)

    def message_id(self, body: bytes) -> str:
        return body.decode()

    def ready(self) -> bool:
        return True


@pytest.fixture
def topics() -> Iterator[KafkaTopics]:
    admin = KafkaAdmin(kafka_bootstrap())
    made = KafkaTopics.of("ratchet.test", uuid.uuid4().hex[:12])
    admin.create_topics(made, 2)
    yield made
    admin.delete_topics(made)


def member(topics: KafkaTopics, name: str, handler: Handler, now: list[int]) -> KafkaCommandConsumer:
    # The handler answers any verdict it is told to: a stand-in for the runtime's outcome types.
    runtime: Any = handler
    consumer = KafkaCommandConsumer(
        kafka_bootstrap(),
        topics,
        "g",
        name,
        lambda: RING,
        runtime,
        clock=lambda: now[0],
        session_timeout_ms=1500,
    )
    consumer.start()
    return consumer


def settle(*members: KafkaCommandConsumer) -> None:
    deadline = time.monotonic() + 30
    while not all(m.assignment() for m in members) or sum(len(m.assignment()) for m in members) != 2:
        assert time.monotonic() < deadline, "the group did not settle"
        for m in members:
            m.poll(0.02)


def take(consumer: KafkaCommandConsumer, partition: int, wait_s: float = 10.0) -> KafkaRecord | None:
    deadline = time.monotonic() + wait_s
    while (record := consumer.take(partition)) is None and time.monotonic() < deadline:
        consumer.poll(0.05)
    return record


def test_offsets_follow_outcomes_and_back_off_is_per_partition(topics: KafkaTopics) -> None:
    publisher = KafkaPublisher.open(kafka_bootstrap(), topics.commands, "orchestrator", lambda: RING)
    placed = [publisher.publish(f"m{i}".encode(), i % 2) for i in range(4)]
    assert placed == [(0, 0), (1, 0), (0, 1), (1, 1)]
    handler, now = Handler(), [0]
    consumer = member(topics, "c1", handler, now)
    settle(consumer)
    admin = KafkaAdmin(kafka_bootstrap())
    first = take(consumer, 0)
    assert first is not None and consumer.process(first).committed == 1
    handler.verdict = DeliveryVerdict.REDELIVER
    failing = take(consumer, 1)
    assert failing is not None and consumer.process(failing).committed is None
    assert take(consumer, 1, wait_s=0.3) is None  # backing off
    handler.verdict = DeliveryVerdict.ACK
    healthy = take(consumer, 0)  # the other partition keeps moving
    assert healthy is not None and healthy.offset == 1 and consumer.process(healthy).committed == 2
    assert admin.committed("g", topics.commands, 2) == {0: 2, 1: 0}
    now[0] = 5_000
    again = take(consumer, 1)
    assert again is not None and again.offset == 0
    handler.verdict = DeliveryVerdict.DEAD_LETTER
    settled = consumer.process(again)
    assert (settled.verdict, settled.committed) == (DeliveryVerdict.DEAD_LETTER, 1)
    (letter,) = admin.dead_letters(topics)
    assert (letter.headers["source-partition"], letter.headers["source-offset"]) == (b"1", b"0")
    consumer.stop()


def test_a_second_member_resumes_at_the_committed_offset(topics: KafkaTopics) -> None:
    publisher = KafkaPublisher.open(kafka_bootstrap(), topics.commands, "orchestrator", lambda: RING)
    for i in range(2):
        publisher.publish(f"m{i}".encode(), 1)
    now = [0]
    c1 = member(topics, "c1", Handler(), now)
    settle(c1)
    held = take(c1, 1)
    assert held is not None and held.offset == 0
    c2 = member(topics, "c2", Handler(), now)
    settle(c1, c2)
    assert c2.assignment() == {1}  # range: members ordered by client id, c2 gets the last partition
    assert c1.process(held).committed is None  # revoked while it ran: nothing committed
    again = take(c2, 1)
    assert again is not None and again.offset == 0
    c1.stop()
    c2.abandon()
