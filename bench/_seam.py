"""The timing seam: a store and an outbox that wrap the real ones and meter every call.

``MeteredStore`` is an ``impls.api.MessageStore`` that forwards each call to the real store
unchanged and adds two things: the wall time spent awaiting it and a count per method. Nothing is
stubbed; the harness and the committer see the real backend's answers and errors. The bench puts
the seam between the harness's observed store and the real one, so "time inside the backend" is
exactly the time the real store's coroutines took, driver and server included.

A ``Meter`` accumulates the union of busy intervals, so calls that overlap in time (two committers
interleaved) are not counted twice.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import attrs

from impls.api import MembershipDirectory, MessageStore, Outbox, OutboxFactory, StoreFactory
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    OutboxPublication,
    ReserveCandidate,
    ReserveResult,
    StoreCapabilities,
    TimestampMillis,
)

T = TypeVar("T")


@attrs.define
class Meter:
    """Busy time and calls of one side (store or outbox) of a backend."""

    seconds: float = 0.0
    calls: Counter[str] = attrs.field(factory=Counter)
    _active: int = 0
    _since: float = 0.0

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        self.calls[name] += 1
        if self._active == 0:
            self._since = time.perf_counter()
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self.seconds += time.perf_counter() - self._since

    async def timed(self, name: str, call: Awaitable[T]) -> T:
        with self.timing(name):
            return await call

    def total_calls(self) -> int:
        return sum(self.calls.values())


def _round_trips(inner: object) -> int | None:
    # Redis and CQL stores count their server round trips; the memory store has none to count.
    value = getattr(inner, "round_trips", None)
    return value if isinstance(value, int) else None


class MeteredStore:
    """A ``MessageStore`` that forwards to ``inner`` and meters each call (see module docstring)."""

    def __init__(self, inner: MessageStore, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def round_trips(self) -> int | None:
        return _round_trips(self.inner)

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.inner.capabilities

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        return await self.meter.timed("reserve", self.inner.reserve(request, delivery, candidate))

    async def put_record(self, intent: CommitIntent) -> None:
        await self.meter.timed("put_record", self.inner.put_record(intent))

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        await self.meter.timed("mark_outbox_published", self.inner.mark_outbox_published(intent, publication))

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        return await self.meter.timed(
            "mark_published_and_committed", self.inner.mark_published_and_committed(intent, publication)
        )

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        return await self.meter.timed("mark_committed", self.inner.mark_committed(intent))

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        return await self.meter.timed("load_commit", self.inner.load_commit(key, conversation_id))

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        return await self.meter.timed("load_commit_for_request", self.inner.load_commit_for_request(request))

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        return await self.meter.timed(
            "scan_recoverable_commits", self.inner.scan_recoverable_commits(older_than, max_items)
        )

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        return await self.meter.timed("history_page", self.inner.history_page(query))

    async def readiness(self) -> None:
        await self.meter.timed("readiness", self.inner.readiness())

    async def close(self) -> None:
        await self.meter.timed("close", self.inner.close())


class MeteredOutbox:
    """An ``Outbox`` that forwards to ``inner`` and meters each call."""

    def __init__(self, inner: Outbox, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def round_trips(self) -> int | None:
        return _round_trips(self.inner)

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        return await self.meter.timed("publish", self.inner.publish(intent))

    async def readiness(self) -> None:
        await self.meter.timed("readiness", self.inner.readiness())

    async def close(self) -> None:
        await self.meter.timed("close", self.inner.close())


@attrs.define
class Meters:
    """The store and outbox meters of one measured run."""

    store: Meter = attrs.field(factory=Meter)
    outbox: Meter = attrs.field(factory=Meter)

    def metered_factories(
        self, store_factory: StoreFactory, outbox_factory: OutboxFactory
    ) -> tuple[StoreFactory, OutboxFactory]:
        """Factories of the same shape as the real ones, whose stores and outboxes are metered."""
        store_meter, outbox_meter = self.store, self.outbox

        async def open_store(namespace: str, membership: MembershipDirectory) -> MessageStore:
            return MeteredStore(await store_factory(namespace, membership), store_meter)

        async def open_outbox(namespace: str) -> Outbox:
            return MeteredOutbox(await outbox_factory(namespace), outbox_meter)

        return open_store, open_outbox
