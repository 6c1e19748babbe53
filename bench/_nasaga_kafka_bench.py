"""nasaga's Kafka command consumer beside the raw produce/consume floor on the same broker, in one run
(backend ``nasaga-kafka`` of the transport section; docs/performance.md).

Slices alternate between

- the floor: ``BATCH`` records the size of a nasaga command envelope produced with ``acks=all`` and
  waited for, then consumed and committed synchronously one by one, on a topic of its own; and
- the connector: ``BATCH`` sagas started on nasaga's orchestrator (not timed), then timed: nasaga's
  outbox dispatcher publishing their commands through nafka's producer and nasaga's
  ``SagaKafkaCommandConsumer`` (in nafka's runtime, in the host) running each participant unit on
  PostgreSQL, until the group's committed offset reaches the end (nafka commits every 50 ms, so a
  batch's figure includes up to one commit interval).

A message counts once its offset is committed. Nothing here is checked against a target.
"""

from __future__ import annotations

import time
from itertools import count

import confluent_kafka as ck

from bench._figures import Tally
from bench._kafka_bench import BATCH, floor_round
from bench._saga_floor import sync_timed_loop
from bench._workload import new_namespace
from conformance._machine import SuiteStats
from conformance.saga import _world as w
from conformance.saga._nasaga import NasagaRuntime
from impls.endpoints import kafka_bootstrap
from impls.transport import KafkaAdmin, KafkaTopics, client_config
from model import saga as m

SLICES = 3
GROUP = "bench"


def nasaga_kafka_slices(seconds: float) -> tuple[Tally, Tally]:
    """(floor, connector) tallies of one run, counted in messages."""
    bootstrap = kafka_bootstrap()
    admin = KafkaAdmin(bootstrap)
    runtime = NasagaRuntime("postgres", new_namespace(), SuiteStats(), lambda _unit: m.CommitFate.COMMITTED)
    runtime.publish_definition(w.ARTIFACT, w.DIGEST)
    runtime.change_lifecycle(m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE), 0)
    name = f"ratchet.{runtime.ns}.bench"
    topics, floor_topics = (
        KafkaTopics(name, f"{name}.DLT"),
        KafkaTopics(f"{name}.floor", f"{name}.floor.dead"),
    )
    admin.create_topics(topics, 1)
    admin.create_topics(floor_topics, 1)
    runtime.host.call(
        "kafka_open",
        namespace=runtime.ns,
        bootstrap=bootstrap,
        topic=topics.commands,
        owner="p0",
        step="reserve",
        group=GROUP,
        client="bench",
    )
    producer = ck.Producer(
        client_config(bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 0})
    )
    reader = ck.Consumer(
        client_config(bootstrap, **{"group.id": f"{name}.floor", "enable.auto.commit": False})
    )
    reader.assign([ck.TopicPartition(floor_topics.commands, 0, 0)])
    keys = (f"b{n}" for n in count())
    body = b"x" * 700  # about a nasaga command envelope's JSON
    floor, mine = Tally(), Tally()

    def floor_batch() -> None:
        floor_round(producer, reader, floor_topics.commands, body, [("X-Nasa-Event", b"saga.command")])

    def connector_batch() -> float:
        for _ in range(BATCH):
            runtime.start_saga(m.StartSaga(w.KEY, next(keys), json_payload=w.PAYLOADS[0]), 0, None)
        started = time.perf_counter()
        runtime.host.call("kafka_dispatch", namespace=runtime.ns)
        end = admin.high_watermarks(topics.commands, 1)[0]
        while admin.committed(GROUP, topics.commands, 1)[0] < end:
            time.sleep(0.005)
        return time.perf_counter() - started

    try:
        connector_batch()  # the group's first join, not timed
        for _ in range(SLICES):
            floor.add(sync_timed_loop(floor_batch, seconds / SLICES))
            deadline, spent, batches = time.perf_counter() + seconds / SLICES, 0.0, 0
            while time.perf_counter() < deadline:
                spent += connector_batch()
                batches += 1
            mine.count += batches
            mine.elapsed += spent  # host and broker time; the harness's own CPU is not counted
    finally:
        runtime.host.call("kafka_close", namespace=runtime.ns)
        reader.close()
        producer.flush(5)
        admin.delete_topics(topics)
        admin.delete_topics(floor_topics)
        runtime.close()
    return Tally(floor.count * BATCH, floor.elapsed, floor.cpu), Tally(
        mine.count * BATCH, mine.elapsed, mine.cpu
    )
