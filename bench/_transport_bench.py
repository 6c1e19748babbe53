"""The transport side (``TRANSPORT_SECTION``): messages per second through each connector beside
the engine's own floor.

Per stream backend (``fakeredis``, ``redis``), slices alternate between

- the floor: a raw ``XADD`` / ``XREADGROUP`` / ``XACK`` loop, batches of ``BATCH`` entries the size
  of a signed command entry, on a stream of its own; and
- the connector: ``BATCH`` commands signed and published (``StreamPublisher``), then
  ``StreamConsumer.poll_once`` until all are settled: verify, the participant's transaction on the
  in-memory saga backend, ``XACK``. A message counts once settled.

For Kafka: bench/_kafka_bench.py; for nasaga's gRPC transport (``--backend nasaga-grpc``):
bench/_nasaga_grpc_bench.py; for nasaga's Redis Streams connector (``--backend nasaga-redis-stream``,
beside the same floor in the same run): bench/_nasaga_stream_bench.py. For gRPC (loopback, one
listener per bench run, the run's own certificates) slices alternate between a unary ``Echo``
and ``DeliverCommand`` (admission by principal, the participant's transaction, the receipt) over
the same mTLS channel. Both loops are sequential on one
connection: these are per-message costs, not a capacity. Nothing here is checked against a target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from bench._figures import Spread, Tally
from bench._saga_floor import sync_timed_loop
from bench._saga_workload import command_for, participant
from bench._section import Progress, Section, SectionOutcome, unavailable
from bench._workload import new_namespace
from conformance.backends import STREAM_BACKENDS as STREAM_BACKENDS  # the registry's Redis Streams backends
from conformance.saga import _world as w
from impls.saga.codec import command_to_blob
from impls.saga.memory import open_memory_saga_backend
from impls.transport import (
    COMMAND,
    GrpcDeliveryClient,
    GrpcListener,
    ParticipantHandler,
    Pki,
    StreamConsumer,
    StreamNames,
    StreamPublisher,
)
from model.saga import Decision, KeyRing, KeyState, SigningKey, add_key

if TYPE_CHECKING:
    from bench._options import BenchOptions

SLICES = 4
BATCH = 16
TRANSPORT_SUITE = "transport"
#: Backends of the transport suite alone, each with figures of its own (no commit or saga backend).
TRANSPORT_ONLY = ("kafka", "nasaga-kafka", "nasaga-grpc", "nasaga-redis-stream")


@attrs.frozen
class TransportRate:
    backend: str  # fakeredis, redis, grpc
    connector: str
    messages_per_second: Spread
    floor: str
    floor_per_second: Spread
    ratio_percent: Spread  # per run: connector / floor * 100
    notes: tuple[str, ...] = ()  # figures that go with it (the Kafka broker's start-up)


def _ring() -> KeyRing:
    return add_key(KeyRing(), SigningKey("b1", w.ORCHESTRATOR, b"bench-secret", KeyState.SIGNING))


class _Commands:
    def __init__(self) -> None:
        self.serial = 0

    def next(self) -> Any:
        self.serial += 1
        return command_for(self.serial)


def _succeed(_command: object) -> Decision:
    return Decision.SUCCEED


_FLOOR_BODY = command_to_blob(command_for(0))


def floor_batch(client: Any, key: str) -> None:
    """The engine's floor: ``BATCH`` entries of a signed command's size ``XADD``-ed, read by one
    ``XREADGROUP`` of group ``g`` and acknowledged by one ``XACK``."""
    for _ in range(BATCH):
        client.xadd(
            key, {b"body": _FLOOR_BODY, b"producer": b"orchestrator", b"kid": b"b1", b"sig": b"0" * 64}
        )
    reply: Any = client.xreadgroup("g", "c1", {key: ">"}, count=BATCH)
    client.xack(key, "g", *[i for _, entries in reply for i, _ in entries])


def _stream_slices(open_client: Callable[[], Any], seconds: float) -> tuple[Tally, Tally]:
    client = open_client()
    ns = f"ratchet:{new_namespace()}"
    floor_key, names = f"{ns}:{{floor}}", StreamNames.of(ns, "bench")
    ring = _ring()
    commands = _Commands()
    part = participant(open_memory_saga_backend(new_namespace()))
    consumer = StreamConsumer(client, names, "p0", "c1", lambda: ring, ParticipantHandler(part, _succeed))
    consumer.start()
    publisher = StreamPublisher(client, names, w.ORCHESTRATOR, lambda: ring)
    client.xgroup_create(floor_key, "g", id="0", mkstream=True)

    def connector_batch() -> None:
        for _ in range(BATCH):
            publisher.publish(command_to_blob(commands.next()))
        settled = 0
        while settled < BATCH:
            settled += len(consumer.poll_once(BATCH))

    floor, mine = Tally(), Tally()
    try:
        for _ in range(SLICES):
            floor.add(sync_timed_loop(lambda: floor_batch(client, floor_key), seconds / SLICES))
            mine.add(sync_timed_loop(connector_batch, seconds / SLICES))
    finally:
        consumer.stop()
        client.delete(floor_key, names.stream, names.dead_letters)
        client.close()
    return _batched(floor), _batched(mine)


def _batched(tally: Tally) -> Tally:
    return Tally(tally.count * BATCH, tally.elapsed, tally.cpu)


def _grpc_slices(seconds: float) -> tuple[Tally, Tally]:
    pki = Pki.create((w.ORCHESTRATOR,))
    part = participant(open_memory_saga_backend(new_namespace()))
    listener = GrpcListener(pki, commands=ParticipantHandler(part, _succeed))
    listener.start()
    client = GrpcDeliveryClient(listener.address, pki.ca.pem, pki.clients[w.ORCHESTRATOR])
    commands = _Commands()
    payload = command_to_blob(commands.next())

    def deliver() -> None:
        command = commands.next()
        client.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, command_to_blob(command))

    def echo() -> None:
        client.echo(payload)

    floor, mine = Tally(), Tally()
    try:
        for _ in range(SLICES):
            floor.add(sync_timed_loop(echo, seconds / SLICES))
            mine.add(sync_timed_loop(deliver, seconds / SLICES))
    finally:
        client.close()
        listener.stop()
    return floor, mine


def _rate(
    backend: str,
    connector: str,
    floor_name: str,
    runs: list[tuple[Tally, Tally]],
    notes: tuple[str, ...] = (),
) -> TransportRate:
    floors = [f.per_second for f, _ in runs]
    mine = [c.per_second for _, c in runs]
    ratios = [100.0 * c / f for f, c in zip(floors, mine, strict=True) if f > 0]
    return TransportRate(
        backend, connector, Spread.of(mine), floor_name, Spread.of(floors), Spread.of(ratios), notes
    )


def run_transport(options: BenchOptions, say: Progress) -> SectionOutcome:
    """The connector figures for the chosen stream backends and gRPC; never raises for a backend."""
    from conformance.backends import load_object

    runs, seconds = options.runs, options.rate_seconds
    errors: dict[str, str] = {}
    missing: dict[str, str] = {}
    rates = []
    # Ratchet's connector on each Redis Streams backend; another runtime's (a ``target``) below.
    ratchets = (
        b for b in options.backends if b in STREAM_BACKENDS and "target" not in STREAM_BACKENDS[b].factories
    )
    for name in ratchets:
        spec = STREAM_BACKENDS[name]
        reason = unavailable(spec.service)
        if reason is not None:
            missing[name] = reason
            continue
        try:
            opener: Any = load_object(spec.streams or "")
            measured = [_stream_slices(opener, seconds) for _ in range(runs)]
        except Exception as exc:
            errors[f"transport-rate {name}"] = f"{type(exc).__name__}: {exc}"
            continue
        rates.append(_rate(name, "redis-streams", "XADD+XREADGROUP+XACK", measured))
        say(f"transport {name}: {rates[-1].messages_per_second.median:.0f} msg/s")
    if "nasaga-redis-stream" in options.backends:
        reason = unavailable("redis") or unavailable("postgres")
        if reason is not None:
            missing["nasaga-redis-stream"] = reason
        else:
            try:
                from bench._nasaga_stream_bench import nasaga_stream_slices

                measured = [nasaga_stream_slices(seconds, floor_batch) for _ in range(runs)]
                connector = "nasaga SagaRedisStreamPublisher+CommandConsumer"
                rates.append(_rate("nasaga-redis-stream", connector, "XADD+XREADGROUP+XACK", measured))
                say(f"transport nasaga-redis-stream: {rates[-1].messages_per_second.median:.0f} msg/s")
            except Exception as exc:
                errors["transport-rate nasaga-redis-stream"] = f"{type(exc).__name__}: {exc}"
    if "kafka" in options.backends:
        reason = unavailable("kafka")
        if reason is not None:
            missing["kafka"] = reason
        else:
            try:
                from bench._kafka_bench import broker_startup, kafka_slices

                measured = [kafka_slices(_ring(), seconds) for _ in range(runs)]
                notes = tuple(f"{k}: {v}" for k, v in broker_startup().items())
                floor = "produce(acks=all)+consume+commit"
                rates.append(_rate("kafka", "kafka", floor, measured, notes))
                say(f"transport kafka: {rates[-1].messages_per_second.median:.0f} msg/s")
            except Exception as exc:
                errors["transport-rate kafka"] = f"{type(exc).__name__}: {exc}"
    if "nasaga-kafka" in options.backends:
        reason = unavailable("kafka") or unavailable("postgres")
        if reason is not None:
            missing["nasaga-kafka"] = reason
        else:
            try:
                from bench._nasaga_kafka_bench import nasaga_kafka_slices

                measured = [nasaga_kafka_slices(seconds) for _ in range(runs)]
                floor = "produce(acks=all)+consume+commit"
                rates.append(_rate("nasaga-kafka", "nasaga SagaKafkaCommandConsumer", floor, measured))
                say(f"transport nasaga-kafka: {rates[-1].messages_per_second.median:.0f} msg/s")
            except Exception as exc:
                errors["transport-rate nasaga-kafka"] = f"{type(exc).__name__}: {exc}"
    try:
        rates.append(
            _rate("grpc", "grpc-mtls", "unary echo (mTLS)", [_grpc_slices(seconds) for _ in range(runs)])
        )
        say(f"transport grpc: {rates[-1].messages_per_second.median:.0f} msg/s")
    except Exception as exc:
        errors["transport-rate grpc"] = f"{type(exc).__name__}: {exc}"
    if "nasaga-grpc" in options.backends:
        reason = unavailable("postgres")
        if reason is not None:
            missing["nasaga-grpc"] = reason
        else:
            try:
                from bench._nasaga_grpc_bench import nasaga_grpc_slices

                measured = [nasaga_grpc_slices(seconds) for _ in range(runs)]
                rates.append(_rate("nasaga-grpc", "nasaga-grpc-mtls", "unary health check (mTLS)", measured))
                say(f"transport nasaga-grpc: {rates[-1].messages_per_second.median:.0f} msg/s")
            except Exception as exc:
                errors["transport-rate nasaga-grpc"] = f"{type(exc).__name__}: {exc}"
    return SectionOutcome({"transport_rates": tuple(rates)}, {}, missing, errors)


TRANSPORT_SECTION = Section("transport", lambda options: TRANSPORT_SUITE in options.suites, run_transport)
