"""Kafka records <-> ``SignedEnvelope``, acknowledged produces, topic names, client settings.

A record's value is the runtime's envelope blob; its headers carry ``producer``, and when signed
``kid`` and ``sig`` (the ``SignedEnvelope`` of Redis Streams, S-STREAM-05). Dead letters carry the
original headers plus ``source-partition``, ``source-offset``, ``group`` and ``reason``. Nobody
else knows these names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import confluent_kafka as ck

from model.saga import DeliveryVerdict, KeyRing, SignedEnvelope, sign

from ._streams import TransportError

BEFORE_OFFSET_COMMIT = "T-KAFKA-01"

PRODUCER, KEY_ID, SIGNATURE = "producer", "kid", "sig"
SOURCE_PARTITION, SOURCE_OFFSET, GROUP, REASON = "source-partition", "source-offset", "group", "reason"

Config = dict[str, str | int | float | bool]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def client_config(bootstrap: str, **extra: Any) -> Config:
    """librdkafka settings every client of ours shares: loopback-quick reconnects, no log noise."""
    return {
        "bootstrap.servers": bootstrap,
        "log_level": 0,
        "socket.connection.setup.timeout.ms": 2000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        **extra,
    }


@attrs.frozen
class KafkaTopics:
    commands: str
    dead_letters: str

    @classmethod
    def of(cls, prefix: str, name: str) -> KafkaTopics:
        return cls(f"{prefix}.{name}", f"{prefix}.{name}.dead")


@attrs.frozen
class KafkaRecord:
    partition: int
    offset: int
    value: bytes
    headers: Mapping[str, bytes]


@attrs.frozen
class KafkaSettled:
    """What became of one record: the verdict, the runtime's outcome (``None`` when refused before
    the handler), why it was dead-lettered, and the offset this call committed (``None``: none)."""

    partition: int
    offset: int
    verdict: DeliveryVerdict
    outcome: object | None
    reason: str
    committed: int | None
    principal: str | None


def to_headers(envelope: SignedEnvelope) -> list[tuple[str, bytes]]:
    headers = [(PRODUCER, envelope.producer.encode())]
    if envelope.key_id is not None and envelope.signature is not None:
        headers += [(KEY_ID, envelope.key_id.encode()), (SIGNATURE, envelope.signature.encode())]
    return headers


def from_record(record: KafkaRecord) -> SignedEnvelope | None:
    """``None`` for a record that is no envelope at all (no producer header, bad text)."""
    producer = record.headers.get(PRODUCER)
    if producer is None:
        return None
    try:
        key_id = record.headers[KEY_ID].decode() if KEY_ID in record.headers else None
        signature = record.headers[SIGNATURE].decode() if SIGNATURE in record.headers else None
        return SignedEnvelope(record.value, producer.decode(), key_id, signature)
    except UnicodeDecodeError:
        return None


def headers_of(message: Any) -> dict[str, bytes]:
    return {k: v for k, v in (message.headers() or []) if isinstance(v, bytes)}


def produce_acknowledged(
    producer: ck.Producer,
    topic: str,
    value: bytes,
    headers: Sequence[tuple[str, bytes]],
    partition: int | None = None,
    timeout_s: float = 30.0,
) -> tuple[int, int]:
    """Produce one record and wait for the broker's delivery report: (partition, offset)."""
    reports: list[tuple[Any, Any]] = []
    kwargs: dict[str, Any] = {"headers": list(headers), "on_delivery": lambda e, m: reports.append((e, m))}
    if partition is not None:
        kwargs["partition"] = partition
    try:
        producer.produce(topic, value, **kwargs)
        deadline = time.monotonic() + timeout_s
        while not reports and time.monotonic() < deadline:
            producer.flush(max(0.0, deadline - time.monotonic()))
    except (ck.KafkaException, BufferError) as exc:
        raise TransportError(f"produce to {topic} failed: {exc}") from exc
    if not reports:
        raise TransportError(f"produce to {topic}: no delivery report within {timeout_s:.0f}s")
    error, message = reports[0]
    if error is not None:
        raise TransportError(f"produce to {topic} failed: {error}")
    return int(message.partition()), int(message.offset())


@attrs.define
class KafkaPublisher:
    """Signs with the producer's current key and produces with ``acks=all``; returns (partition, offset)."""

    producer: ck.Producer
    topic: str
    producer_name: str
    keys: Callable[[], KeyRing]

    @classmethod
    def open(
        cls, bootstrap: str, topic: str, producer_name: str, keys: Callable[[], KeyRing]
    ) -> KafkaPublisher:
        config = client_config(bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 0})
        return cls(ck.Producer(config), topic, producer_name, keys)

    def publish(self, body: bytes, partition: int | None = None) -> tuple[int, int]:
        envelope = sign(self.keys(), self.producer_name, body)
        if envelope is None:
            raise TransportError(f"{self.producer_name} has no signing key")
        return self.produce_raw(envelope.body, to_headers(envelope), partition)

    def produce_raw(
        self, value: bytes, headers: Sequence[tuple[str, bytes]], partition: int | None = None
    ) -> tuple[int, int]:
        return produce_acknowledged(self.producer, self.topic, value, headers, partition)

    def close(self) -> None:
        self.producer.flush(5)
