"""Section 8, transports, Kafka: messages per second through the connector beside a raw loop, same run.

On the broker of ``RATCHET_KAFKA_BOOTSTRAP`` (``scripts/services up kafka``), slices alternate between

- the floor: per message a raw produce with ``acks=all`` waited for its delivery report, then a raw
  consumer (manual assignment) reads the batch and commits each offset synchronously: the broker round
  trips the connector cannot avoid; and
- the connector: per message a signed ``KafkaPublisher.publish`` (delivery report awaited), then
  ``KafkaCommandConsumer`` ``poll``/``take``/``process``: verify, the participant's transaction on the
  in-memory saga backend, the synchronous offset commit. A message counts once its offset is committed.

Both on one partition of a topic of their own, sequential: per-message costs, not a capacity. Beside
them, the broker's start-up as its own files tell it: launch (the pid file written) to "Kafka Server
started" in its log, and how long the jar fetch took when the cache was filled (a fresh machine).
Nothing here is checked against a target.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

import confluent_kafka as ck

from bench._figures import Tally
from bench._saga_floor import sync_timed_loop
from bench._saga_workload import command_for, participant
from bench._workload import new_namespace
from conformance.saga import _world as w
from impls.endpoints import kafka_bootstrap
from impls.saga.codec import command_to_blob
from impls.saga.memory import open_memory_saga_backend
from impls.transport import (
    KafkaAdmin,
    KafkaCommandConsumer,
    KafkaPublisher,
    KafkaTopics,
    ParticipantHandler,
    client_config,
    produce_acknowledged,
)
from model.saga import Decision, KeyRing

SLICES = 4
BATCH = 16
KAFKA_VERSION = "4.4.0"


def _succeed(_command: object) -> Decision:
    return Decision.SUCCEED


def floor_round(
    producer: ck.Producer, reader: ck.Consumer, topic: str, body: bytes, headers: list[tuple[str, bytes]]
) -> None:
    """The raw floor's unit: BATCH records produced and acknowledged, then read and each committed."""
    for _ in range(BATCH):
        produce_acknowledged(producer, topic, body, headers, 0)
    got = 0
    while got < BATCH:
        message = reader.poll(5)
        if message is None or message.error() is not None:
            continue
        got += 1
        tp = ck.TopicPartition(topic, 0, int(message.offset() or 0) + 1)
        reader.commit(offsets=[tp], asynchronous=False)


def kafka_slices(ring: KeyRing, seconds: float) -> tuple[Tally, Tally]:
    """(floor, connector) tallies of one run, counted in messages."""
    bootstrap = kafka_bootstrap()
    admin = KafkaAdmin(bootstrap)
    ns = new_namespace()
    floor_topics, topics = KafkaTopics.of(f"ratchet.{ns}", "floor"), KafkaTopics.of(f"ratchet.{ns}", "bench")
    admin.create_topics(floor_topics, 1)
    admin.create_topics(topics, 1)
    producer = ck.Producer(
        client_config(bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 0})
    )
    reader = ck.Consumer(
        client_config(bootstrap, **{"group.id": f"ratchet.{ns}.floor", "enable.auto.commit": False})
    )
    reader.assign([ck.TopicPartition(floor_topics.commands, 0, 0)])
    body = command_to_blob(command_for(0))
    headers = [("producer", b"orchestrator"), ("kid", b"b1"), ("sig", b"0" * 64)]
    serial = [0]

    def floor_batch() -> None:
        floor_round(producer, reader, floor_topics.commands, body, headers)

    part = participant(open_memory_saga_backend(new_namespace()))
    consumer = KafkaCommandConsumer(
        bootstrap, topics, f"ratchet.{ns}.bench", "c1", lambda: ring, ParticipantHandler(part, _succeed)
    )
    consumer.start()
    publisher = KafkaPublisher.open(bootstrap, topics.commands, w.ORCHESTRATOR, lambda: ring)

    def connector_batch() -> None:
        for _ in range(BATCH):
            serial[0] += 1
            publisher.publish(command_to_blob(command_for(serial[0])), 0)
        done = 0
        while done < BATCH:
            consumer.poll(1.0)
            while (record := consumer.take(0)) is not None:
                consumer.process(record)
                done += 1

    floor, mine = Tally(), Tally()
    try:
        for _ in range(SLICES):
            floor.add(sync_timed_loop(floor_batch, seconds / SLICES))
            mine.add(sync_timed_loop(connector_batch, seconds / SLICES))
    finally:
        consumer.stop()
        reader.close()
        publisher.close()
        admin.delete_topics(floor_topics)
        admin.delete_topics(topics)
    return Tally(floor.count * BATCH, floor.elapsed, floor.cpu), Tally(
        mine.count * BATCH, mine.elapsed, mine.cpu
    )


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*Kafka Server started", re.M)


def broker_startup() -> dict[str, str]:
    """What the broker's files say about its start-up (nothing when they are not ours to read)."""
    found: dict[str, str] = {}
    services = Path(
        os.environ.get("RATCHET_SERVICES_DIR") or Path(__file__).resolve().parents[2] / ".services"
    )
    base = services / "kafka"
    try:
        launched = (base / "kafka.pid").stat().st_mtime
        started = _STAMP.search((base / "log" / "server.log").read_text(errors="replace"))
        if started:
            at = datetime.strptime(started.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found["kafka broker start (launch to 'Kafka Server started')"] = f"{at - launched:.1f}s"
    except OSError:
        pass
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "ratchet"
        / f"kafka-{KAFKA_VERSION}"
    )
    try:
        fetched = (cache / "fetch.log").stat().st_mtime - (cache / "pom.xml").stat().st_mtime
        if fetched >= 1.0:  # a cache copied from elsewhere keeps no trace of its fetch
            found["kafka jars fetch from Maven Central (fresh machine, once)"] = f"{fetched:.1f}s"
    except OSError:
        pass
    return found
