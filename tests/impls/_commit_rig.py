"""Seams for the commit runtime tests: a real backend in a fresh namespace, plus faults around it.

Nothing here stands in for a backend. ``StoreSeam`` and ``OutboxSeam`` wrap the real store and
outbox and only add what a network or a process can do to a call: lose its response after it
applied, fail it before it applied, or blow up with an exception no contract allows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs

from conformance.backends import COMMIT_BACKENDS, outbox_factory, store_factory
from impls.api import InMemoryMembership, MessageStore, Outbox
from impls.commit import FaultHook, MessageCommitter, Quota, no_faults
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FaultPoint,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageContent,
    MessageStoreError,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
    ReserveResult,
    StoreCapabilities,
    StoreErrorKind,
    TimestampMillis,
)
from tests._backends import backend_params

TENANT = "t1"
CONVERSATION = "c1"
MEMBERS = frozenset({"alice", "bob", "carol"})
T0 = 1_700_000_000_000

BACKENDS = backend_params("commit")

# The durable stage a crash at each fault point leaves behind (None: nothing durable).
STAGE_AT: dict[FaultPoint, CommitStage | None] = {
    FaultPoint.M_COMMIT_01: None,
    FaultPoint.M_COMMIT_02: CommitStage.RESERVED,
    FaultPoint.M_COMMIT_03: CommitStage.RECORDED,
    FaultPoint.M_COMMIT_04: CommitStage.RECORDED,
    FaultPoint.M_COMMIT_05: CommitStage.OUTBOXED,
    FaultPoint.M_COMMIT_06: CommitStage.COMMITTED,
}


class Crash(BaseException):
    """The process died at a fault point. A BaseException, as the harness raises it."""


class ManualClock:
    def __init__(self, now_ms: TimestampMillis = T0) -> None:
        self.now = now_ms

    def now_ms(self) -> TimestampMillis:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@attrs.define
class CrashAt:
    """A fault hook that kills the commit the first time it reaches ``point``; records every point."""

    point: FaultPoint | None
    passed: list[FaultPoint] = attrs.Factory(list)
    fired: bool = False

    async def __call__(self, point: FaultPoint, key: CommitKey) -> None:
        self.passed.append(point)
        if point is self.point and not self.fired:
            self.fired = True
            raise Crash(point.value)


def send(
    cmid: str,
    *,
    sender: str = "alice",
    conversation: ConversationId = CONVERSATION,
    body: bytes = b"hello",
    device: str = "d1",
) -> AuthenticatedSend:
    return AuthenticatedSend(
        tenant=TENANT,
        sender=sender,
        device=device,
        conversation=conversation,
        client_message_id=cmid,
        content=MessageContent(MessageType.TEXT, body),
    )


class StoreSeam:
    """A real store behind per-method faults, armed by method name and consumed once each."""

    def __init__(self, inner: MessageStore) -> None:
        self.inner = inner
        self.lose_response: dict[str, int] = {}  # apply, then raise UNAVAILABLE
        self.fail_before: dict[str, int] = {}  # raise UNAVAILABLE without applying
        self.unexpected: set[str] = set()  # raise RuntimeError (a store bug), every time
        self.stuck: set[CommitKey] = set()  # every write for these keys fails before applying
        self.calls: list[str] = []

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.inner.capabilities

    async def _call(self, name: str, call: Callable[[], Awaitable[Any]], key: CommitKey | None = None) -> Any:
        self.calls.append(name)
        if key in self.stuck:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: this key's writes fail", key)
        if name in self.unexpected:
            raise RuntimeError(f"store bug in {name}")
        if self.fail_before.get(name, 0) > 0:
            self.fail_before[name] -= 1
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: failed before applying")
        result = await call()
        if self.lose_response.get(name, 0) > 0:
            self.lose_response[name] -= 1
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: response lost")
        return result

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        result: ReserveResult = await self._call(
            "reserve", lambda: self.inner.reserve(request, delivery, candidate)
        )
        return result

    async def put_record(self, intent: CommitIntent) -> None:
        await self._call("put_record", lambda: self.inner.put_record(intent), intent.key)

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        await self._call(
            "mark_outbox_published", lambda: self.inner.mark_outbox_published(intent, publication), intent.key
        )

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        message: CommittedMessage = await self._call(
            "mark_published_and_committed",
            lambda: self.inner.mark_published_and_committed(intent, publication),
            intent.key,
        )
        return message

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        message: CommittedMessage = await self._call(
            "mark_committed", lambda: self.inner.mark_committed(intent), intent.key
        )
        return message

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        loaded: LoadedCommit | None = await self._call(
            "load_commit", lambda: self.inner.load_commit(key, conversation_id)
        )
        return loaded

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        loaded: LoadedCommit | None = await self._call(
            "load_commit_for_request", lambda: self.inner.load_commit_for_request(request)
        )
        return loaded

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        intents: list[CommitIntent] = await self._call(
            "scan_recoverable_commits", lambda: self.inner.scan_recoverable_commits(older_than, max_items)
        )
        return intents

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        page: HistoryPage = await self._call("history_page", lambda: self.inner.history_page(query))
        return page

    async def readiness(self) -> None:
        await self._call("readiness", self.inner.readiness)

    async def close(self) -> None:
        await self.inner.close()


class OutboxSeam:
    """A real outbox; records every publication it acknowledged.

    ``duplicating`` makes it non-idempotent: every publish after the first for a key acknowledges a
    new, different publication, as an outbox without per-key deduplication would.
    """

    def __init__(self, inner: Outbox) -> None:
        self.inner = inner
        self.published: list[OutboxPublication] = []
        self.duplicating = False
        self.lose_response = 0
        self.unexpected = False
        self.unready = False

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self.unexpected:
            raise RuntimeError("outbox bug")
        publication = await self.inner.publish(intent)
        if self.duplicating:
            publication = OutboxPublication(
                publication.stream, f"{publication.entry_id}~{len(self.published)}"
            )
        self.published.append(publication)
        if self.lose_response > 0:
            self.lose_response -= 1
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: outbox ack lost")
        return publication

    async def readiness(self) -> None:
        if self.unready:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: outbox did not answer")
        await self.inner.readiness()

    async def close(self) -> None:
        await self.inner.close()


@attrs.define
class Rig:
    """One backend in one fresh namespace: the real store and outbox behind seams, and the world."""

    backend: str
    store: StoreSeam
    outbox: OutboxSeam
    membership: InMemoryMembership
    clock: ManualClock

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.store.capabilities

    def committer(
        self,
        *,
        fault_hook: FaultHook = no_faults,
        quota: Quota | None = None,
        max_attempts: int = 8,
    ) -> MessageCommitter:
        return MessageCommitter(
            self.store,
            self.outbox,
            self.membership,
            self.clock,
            quota=quota,
            fault_hook=fault_hook,
            max_attempts=max_attempts,
        )

    async def load(self, request: AuthenticatedSend) -> LoadedCommit | None:
        return await self.store.inner.load_commit(request.commit_key, request.conversation)

    async def stage(self, request: AuthenticatedSend) -> CommitStage | None:
        loaded = await self.load(request)
        if loaded is None:
            return None
        if isinstance(loaded, LoadedCommitted):
            return CommitStage.COMMITTED
        return loaded.stage

    async def committed(self, request: AuthenticatedSend) -> CommittedMessage:
        loaded = await self.load(request)
        assert isinstance(loaded, LoadedCommitted), loaded
        return loaded.message

    async def in_flight(self, request: AuthenticatedSend) -> LoadedInFlight:
        loaded = await self.load(request)
        assert isinstance(loaded, LoadedInFlight), loaded
        return loaded


@asynccontextmanager
async def open_rig(backend: str) -> AsyncIterator[Rig]:
    spec = COMMIT_BACKENDS[backend]
    namespace = f"commit-{uuid.uuid4().hex[:12]}"
    membership = InMemoryMembership()
    membership.set_members(TENANT, CONVERSATION, MEMBERS)
    store = await store_factory(spec)(namespace, membership)
    try:
        outbox = await outbox_factory(spec)(namespace)
        try:
            yield Rig(backend, StoreSeam(store), OutboxSeam(outbox), membership, ManualClock())
        finally:
            await outbox.close()
    finally:
        await store.close()
