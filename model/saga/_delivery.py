"""Delivery on a stream with consumer groups: read, claim, settle, dead-letter, trim (S-STREAM-*).

Theory of operation
===================

This is the seed's ``redis-stream`` row as pure transitions; Redis Streams is one
implementation (``impls/transport``), the model says what any of them must do. A
``DeliveryStream`` is an append-only log of entries (ids strictly increase from 1 and are
never reused, even after a trim) and a set of consumer groups. A group remembers the last id
it delivered and its *pending list*: every entry delivered to one of its consumers and not
yet settled, with the consumer that holds it, when it was (re)delivered and how many times.

An entry moves through a group like this (``ENTRY_TRANSITIONS``)::

    undelivered --read--> pending --settle(ACK)--------> acknowledged
                          pending --settle(REDELIVER)--> pending     (left for redelivery)
                          pending --claim(idle)------->  pending     (another consumer, count + 1)
                          pending --settle(DEAD_LETTER)> dead-lettered (copied and acknowledged)

There is no other way out of ``pending``: a consumer that dies leaves its entries there
(S-STREAM-02), and only a claim of entries idle at least ``min_idle_ms`` moves them to another
consumer (S-STREAM-03). ``settle_entry`` takes the verdict of the unit that handled the entry
(``DeliveryVerdict`` of a model outcome), so an acknowledgement is only ever the consequence of a local
commit or a duplicate's absorption (S-STREAM-04, S-DLV-01); dead-lettering and acknowledging are
one step (S-STREAM-06). The trim frontier is the smallest id some group still needs: its first
pending entry or its first undelivered one; trimming never passes it (S-STREAM-07). The backlog
of a group is what it still has to finish (S-STREAM-08).

Time is an input (``now_ms``); the model never reads a clock. Outcomes are closed sets; a
refused operation returns the state it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._values import DeliveryVerdict, name_validator

#: Where an entry can go from where it is, per group (the S-STREAM-* rules as a table).
ENTRY_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "undelivered": frozenset({"pending"}),
    "pending": frozenset({"pending", "acknowledged", "dead_lettered"}),
    "acknowledged": frozenset(),
    "dead_lettered": frozenset(),
}


@attrs.frozen
class StreamEntry:
    entry_id: int = attrs.field(validator=attrs.validators.ge(1))
    message_id: str


@attrs.frozen
class Pending:
    """One entry of a group's pending list (S-STREAM-01, S-STREAM-03)."""

    entry_id: int
    consumer: str
    delivered_ms: int
    deliveries: int

    def idle_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.delivered_ms)


@attrs.frozen
class ConsumerGroup:
    last_delivered: int = 0
    pending: Mapping[int, Pending] = attrs.field(factory=dict)


@attrs.frozen
class DeadLetter:
    group: str
    entry_id: int
    message_id: str
    reason: str


@attrs.frozen
class DeliveryStream:
    entries: tuple[StreamEntry, ...] = ()
    last_id: int = 0
    groups: Mapping[str, ConsumerGroup] = attrs.field(factory=dict)
    dead_letters: tuple[DeadLetter, ...] = ()

    def entry(self, entry_id: int) -> StreamEntry | None:
        return next((e for e in self.entries if e.entry_id == entry_id), None)


# -- requests and outcomes --------------------------------------------------------------------


@attrs.frozen
class ReadGroup:
    group: str
    consumer: str = attrs.field(validator=name_validator)
    count: int = attrs.field(validator=attrs.validators.ge(1))
    now_ms: int


@attrs.frozen
class ClaimIdle:
    group: str
    consumer: str = attrs.field(validator=name_validator)
    min_idle_ms: int = attrs.field(validator=attrs.validators.ge(0))
    now_ms: int
    count: int = attrs.field(default=100, validator=attrs.validators.ge(1))


@attrs.frozen
class SettleEntry:
    """The handling unit's verdict for one delivered entry; ``reason`` names a dead letter."""

    group: str
    entry_id: int
    verdict: DeliveryVerdict
    reason: str = ""


@attrs.frozen
class Trim:
    min_id: int  # entries with a smaller id go


@attrs.frozen
class Delivery:
    entry_id: int
    message_id: str
    deliveries: int


@attrs.frozen
class Delivered:
    deliveries: tuple[Delivery, ...]


@attrs.frozen
class NoSuchGroup:
    group: str


@attrs.frozen
class Acknowledged:
    entry_id: int


@attrs.frozen
class LeftPending:
    entry_id: int


@attrs.frozen
class DeadLetterRecorded:
    letter: DeadLetter


@attrs.frozen
class NotPending:
    """Settled already (by another consumer after a claim): nothing changes, nothing is copied."""

    entry_id: int


@attrs.frozen
class Trimmed:
    removed: tuple[int, ...]


@attrs.frozen
class TrimRefused:
    """The requested minimum passes an entry some group still needs (S-STREAM-07)."""

    min_id: int
    frontier: int


@attrs.frozen
class Backlog:
    undelivered: int
    pending: int

    @property
    def total(self) -> int:
        return self.undelivered + self.pending


ReadOutcome: TypeAlias = Delivered | NoSuchGroup
SettleOutcome: TypeAlias = Acknowledged | LeftPending | DeadLetterRecorded | NotPending | NoSuchGroup
TrimOutcome: TypeAlias = Trimmed | TrimRefused


# -- transitions ------------------------------------------------------------------------------


def append(stream: DeliveryStream, message_id: str) -> tuple[DeliveryStream, int]:
    """A producer's append: the next id, never one used before (trimmed ids included)."""
    entry_id = stream.last_id + 1
    entries = (*stream.entries, StreamEntry(entry_id, message_id))
    return attrs.evolve(stream, entries=entries, last_id=entry_id), entry_id


def create_group(stream: DeliveryStream, group: str) -> DeliveryStream:
    """A group reading from the start of the stream; creating it again changes nothing."""
    if group in stream.groups:
        return stream
    return attrs.evolve(stream, groups={**stream.groups, group: ConsumerGroup()})


def read_group(stream: DeliveryStream, request: ReadGroup) -> tuple[DeliveryStream, ReadOutcome]:
    """Deliver up to ``count`` entries after the group's last-delivered id, in id order; each
    becomes pending with its consumer, the time and a delivery count of 1 (S-STREAM-01)."""
    group = stream.groups.get(request.group)
    if group is None:
        return stream, NoSuchGroup(request.group)
    fresh = [e for e in stream.entries if e.entry_id > group.last_delivered][: request.count]
    if not fresh:
        return stream, Delivered(())
    pending = dict(group.pending)
    for entry in fresh:
        pending[entry.entry_id] = Pending(entry.entry_id, request.consumer, request.now_ms, 1)
    moved = ConsumerGroup(fresh[-1].entry_id, pending)
    delivered = tuple(Delivery(e.entry_id, e.message_id, 1) for e in fresh)
    return _with_group(stream, request.group, moved), Delivered(delivered)


def claim_idle(stream: DeliveryStream, request: ClaimIdle) -> tuple[DeliveryStream, ReadOutcome]:
    """Take over pending entries idle at least ``min_idle_ms``, oldest id first: the claimer
    owns them, their idle time restarts, their delivery count grows by one. An entry whose
    consumer is still within ``min_idle_ms`` stays where it is (S-STREAM-03). An entry trimmed
    while pending is dropped from the list and not delivered (Redis 7 ``XAUTOCLAIM``)."""
    group = stream.groups.get(request.group)
    if group is None:
        return stream, NoSuchGroup(request.group)
    pending = dict(group.pending)
    claimed: list[Delivery] = []
    for entry_id in sorted(group.pending):
        if len(claimed) >= request.count:
            break
        held = group.pending[entry_id]
        if held.idle_ms(request.now_ms) < request.min_idle_ms:
            continue
        entry = stream.entry(entry_id)
        if entry is None:
            del pending[entry_id]
            continue
        pending[entry_id] = Pending(entry_id, request.consumer, request.now_ms, held.deliveries + 1)
        claimed.append(Delivery(entry_id, entry.message_id, held.deliveries + 1))
    moved = attrs.evolve(group, pending=pending)
    return _with_group(stream, request.group, moved), Delivered(tuple(claimed))


def settle_entry(stream: DeliveryStream, request: SettleEntry) -> tuple[DeliveryStream, SettleOutcome]:
    """Apply a handling unit's verdict (S-STREAM-02, S-STREAM-04, S-STREAM-06).

    ``ACK`` removes the entry from this group's pending list (only here: other groups keep
    theirs); ``REDELIVER`` leaves it pending, owned by the same consumer; ``DEAD_LETTER`` copies
    it to the dead letters *and* acknowledges it, as one step. An entry no longer pending (a
    claimer settled it first) is ``NotPending``: nothing changes, no second dead letter.

    post: not isinstance(__return__[1], LeftPending) or __return__[0] is stream
    """
    group = stream.groups.get(request.group)
    if group is None:
        return stream, NoSuchGroup(request.group)
    if request.entry_id not in group.pending:
        return stream, NotPending(request.entry_id)
    if request.verdict is DeliveryVerdict.REDELIVER:
        return stream, LeftPending(request.entry_id)
    pending = {k: v for k, v in group.pending.items() if k != request.entry_id}
    after = _with_group(stream, request.group, attrs.evolve(group, pending=pending))
    if request.verdict is DeliveryVerdict.ACK:
        return after, Acknowledged(request.entry_id)
    entry = stream.entry(request.entry_id)
    letter = DeadLetter(request.group, request.entry_id, entry.message_id if entry else "", request.reason)
    return attrs.evolve(after, dead_letters=(*after.dead_letters, letter)), DeadLetterRecorded(letter)


def trim_frontier(stream: DeliveryStream) -> int:
    """The smallest id any group still needs: per group its first pending entry, or else the
    first entry after its last-delivered one; the minimum over groups (S-STREAM-07).

    post: all(__return__ <= p for g in stream.groups.values() for p in g.pending)
    post: all(__return__ <= g.last_delivered + 1 for g in stream.groups.values())
    """
    # A pending entry always lies at or below last-delivered, so this is "the first pending entry,
    # or else the one after last-delivered"; taking both keeps it safe on any state.
    needs = [min([*group.pending, group.last_delivered + 1]) for group in stream.groups.values()]
    return min(needs, default=1)  # no group reads it: keep everything (a later group starts at 0)


def trim(stream: DeliveryStream, request: Trim) -> tuple[DeliveryStream, TrimOutcome]:
    """Remove entries with ids below ``min_id``, never past the frontier (S-STREAM-07)."""
    frontier = trim_frontier(stream)
    if request.min_id > frontier:
        return stream, TrimRefused(request.min_id, frontier)
    removed = tuple(e.entry_id for e in stream.entries if e.entry_id < request.min_id)
    kept = tuple(e for e in stream.entries if e.entry_id >= request.min_id)
    return attrs.evolve(stream, entries=kept), Trimmed(removed)


def backlog(stream: DeliveryStream, group_name: str) -> Backlog | NoSuchGroup:
    """What a group still has to finish: undelivered entries plus pending ones (S-STREAM-08)."""
    group = stream.groups.get(group_name)
    if group is None:
        return NoSuchGroup(group_name)
    undelivered = sum(1 for e in stream.entries if e.entry_id > group.last_delivered)
    return Backlog(undelivered, len(group.pending))


def entry_state(stream: DeliveryStream, group_name: str, entry_id: int) -> str:
    """Where ``entry_id`` stands in a group (a key of ``ENTRY_TRANSITIONS``)."""
    group = stream.groups[group_name]
    if entry_id in group.pending:
        return "pending"
    if entry_id > group.last_delivered:
        return "undelivered"
    if any(d.group == group_name and d.entry_id == entry_id for d in stream.dead_letters):
        return "dead_lettered"
    return "acknowledged"


def _with_group(stream: DeliveryStream, name: str, group: ConsumerGroup) -> DeliveryStream:
    return attrs.evolve(stream, groups={**stream.groups, name: group})
