"""Delivery on a partitioned log with committed offsets: Kafka's consumer group (S-KAFKA-*).

Theory of operation
===================

The seed's ``kafka`` transport row as pure transitions; ``impls/transport/_kafka.py`` is one
implementation. Where Redis Streams keeps a pending list per entry, a Kafka group keeps one number
per partition: the *committed offset*, the next record a new owner reads. Everything below it is
taken as finished; so the one thing a connector must never do is commit past a record whose unit
has no outcome yet. A ``PartitionedLog`` holds per partition the records (offsets strictly
increase from 0, S-KAFKA-01), the committed offset, the owner's read position, the offsets whose
unit has an outcome (``done``: committed, duplicate absorbed, or dead letter acknowledged by the
broker) and a back-off deadline; and the dead letters, by (partition, offset).

A record moves through a partition like this::

    undelivered --deliver--> in hand --settle(ACK)-------> done
                             in hand --settle(DEAD_LETTER)> done + dead letter (durable first)
                             in hand --settle(REDELIVER)--> undelivered, partition backing off
                             in hand --revoke/assign------> undelivered (the new owner reads it again)

The *frontier* of a partition is the smallest offset at or above the committed one whose record
is not done (or the end of the log): ``commit_offset`` refuses anything past it (S-KAFKA-02) and
anything behind the committed offset (S-KAFKA-01). A dead letter counts as done only once it is
recorded, and the connector records it only after the broker acknowledged it (S-KAFKA-03). A
``REDELIVER`` verdict moves that partition's position back to the record and pauses only that
partition until ``now + backoff``; every other partition stays deliverable (S-KAFKA-04). An
assignment (a rebalance, or a consumer that died and was replaced) restarts the partition at its
committed offset: what was done and not committed is read again and absorbed by the inbox
(S-KAFKA-05).

Time is an input (``now_ms``); outcomes are closed sets; a refused operation returns the state it
was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._values import DeliveryVerdict


@attrs.frozen
class OffsetDeadLetter:
    partition: int
    offset: int
    message_id: str
    reason: str


@attrs.frozen
class PartitionState:
    records: tuple[str, ...] = ()  # message ids by offset
    committed: int = 0
    position: int = 0
    done: frozenset[int] = frozenset()
    owner: str | None = None
    paused_until_ms: int | None = None

    def backing_off(self, now_ms: int) -> bool:
        return self.paused_until_ms is not None and now_ms < self.paused_until_ms


@attrs.frozen
class PartitionedLog:
    partitions: Mapping[int, PartitionState]
    dead_letters: Mapping[tuple[int, int], OffsetDeadLetter] = attrs.field(factory=dict)

    @classmethod
    def of(cls, count: int) -> PartitionedLog:
        return cls({p: PartitionState() for p in range(count)})


# -- outcomes ---------------------------------------------------------------------------------


@attrs.frozen
class RecordDelivered:
    partition: int
    offset: int
    message_id: str


@attrs.frozen
class NothingToDeliver:
    partition: int


@attrs.frozen
class BackingOff:
    partition: int
    until_ms: int


@attrs.frozen
class NotOwner:
    partition: int
    consumer: str


@attrs.frozen
class NoSuchRecord:
    """A verdict for an offset the partition's log does not hold (or a partition it has not)."""

    partition: int
    offset: int


@attrs.frozen
class OutcomeRecorded:
    partition: int
    offset: int
    verdict: DeliveryVerdict


@attrs.frozen
class OffsetCommitted:
    partition: int
    offset: int


@attrs.frozen
class OffsetRefused:
    """Past the frontier (a record without an outcome, S-KAFKA-02) or behind the committed
    offset (S-KAFKA-01)."""

    partition: int
    offset: int
    committed: int
    frontier: int


DeliverOutcome: TypeAlias = RecordDelivered | NothingToDeliver | BackingOff | NotOwner
CommitOutcome: TypeAlias = OffsetCommitted | OffsetRefused


# -- transitions ------------------------------------------------------------------------------


def produce_record(log: PartitionedLog, partition: int, message_id: str) -> tuple[PartitionedLog, int]:
    """An acknowledged produce: the next offset of the partition, never one used before (S-KAFKA-01)."""
    part = log.partitions[partition]
    offset = len(part.records)
    return _with(log, partition, attrs.evolve(part, records=(*part.records, message_id))), offset


def assign_partition(log: PartitionedLog, partition: int, owner: str | None) -> PartitionedLog:
    """A rebalance gives ``partition`` to ``owner`` (``None``: nobody): it restarts at the committed
    offset, with no back-off of the previous owner's (S-KAFKA-05)."""
    part = log.partitions[partition]
    moved = attrs.evolve(part, owner=owner, position=part.committed, paused_until_ms=None)
    return _with(log, partition, moved)


def deliver_record(
    log: PartitionedLog, partition: int, consumer: str, now_ms: int
) -> tuple[PartitionedLog, DeliverOutcome]:
    """The owner's next record, unless the partition is backing off (S-KAFKA-04)."""
    part = log.partitions[partition]
    if part.owner != consumer:
        return log, NotOwner(partition, consumer)
    if part.backing_off(now_ms):
        assert part.paused_until_ms is not None
        return log, BackingOff(partition, part.paused_until_ms)
    if part.position >= len(part.records):
        return log, NothingToDeliver(partition)
    offset = part.position
    moved = attrs.evolve(part, position=offset + 1, paused_until_ms=None)
    return _with(log, partition, moved), RecordDelivered(partition, offset, part.records[offset])


def settle_record(
    log: PartitionedLog,
    partition: int,
    offset: int,
    verdict: DeliveryVerdict,
    *,
    reason: str = "",
    now_ms: int = 0,
    backoff_ms: int = 0,
) -> tuple[PartitionedLog, OutcomeRecorded | NoSuchRecord]:
    """The unit's verdict for one delivered record (S-KAFKA-02..04). ``DEAD_LETTER`` means the
    broker acknowledged the dead letter: only then is the record done (S-KAFKA-03). ``REDELIVER``
    rewinds this partition to the record and backs it off alone (S-KAFKA-04). An offset outside
    the log changes nothing (``NoSuchRecord``).

    post: isinstance(__return__[1], NoSuchRecord) or __return__[1].verdict is verdict
    post: not isinstance(__return__[1], NoSuchRecord) or __return__[0] is log
    """
    part = log.partitions.get(partition)
    if part is None or not 0 <= offset < len(part.records):
        return log, NoSuchRecord(partition, offset)
    if verdict is DeliveryVerdict.REDELIVER:
        moved = attrs.evolve(part, position=min(part.position, offset), paused_until_ms=now_ms + backoff_ms)
        return _with(log, partition, moved), OutcomeRecorded(partition, offset, verdict)
    after = _with(log, partition, attrs.evolve(part, done=part.done | {offset}))
    if verdict is DeliveryVerdict.DEAD_LETTER and (partition, offset) not in log.dead_letters:
        letter = OffsetDeadLetter(partition, offset, part.records[offset], reason)
        after = attrs.evolve(after, dead_letters={**after.dead_letters, (partition, offset): letter})
    return after, OutcomeRecorded(partition, offset, verdict)


def offset_frontier(part: PartitionState) -> int:
    """The smallest offset at or above the committed one whose record has no outcome, or the end
    of the log: the furthest a commit may go (S-KAFKA-02).

    post: part.committed <= __return__ <= max(part.committed, len(part.records))
    post: all(o in part.done for o in range(part.committed, __return__))
    """
    offset = part.committed
    while offset < len(part.records) and offset in part.done:
        offset += 1
    return offset


def commit_offset(log: PartitionedLog, partition: int, offset: int) -> tuple[PartitionedLog, CommitOutcome]:
    """Move the committed offset to ``offset``: never past the frontier (S-KAFKA-02), never back
    (S-KAFKA-01)."""
    part = log.partitions[partition]
    limit = offset_frontier(part)
    if offset > limit or offset < part.committed:
        return log, OffsetRefused(partition, offset, part.committed, limit)
    return _with(log, partition, attrs.evolve(part, committed=offset)), OffsetCommitted(partition, offset)


def partition_lag(log: PartitionedLog, partition: int) -> int:
    """Records of the partition at or above the committed offset: what the group still owes."""
    part = log.partitions[partition]
    return len(part.records) - part.committed


def _with(log: PartitionedLog, partition: int, part: PartitionState) -> PartitionedLog:
    return attrs.evolve(log, partitions={**log.partitions, partition: part})
