"""Example-based contract tests of every ``MessageStore`` backend, judged by ``model.commit``.

Each store call runs beside the model's pure function of the same name (``Twin``); the two outcomes
must agree: equal values, or errors of the same kind. After a refusal the model's state is
unchanged, so ``Twin.check`` (every key loaded, the recovery scan, every history) proves that the
store changed nothing either. The stateful harness explores sequences; these are the named cases.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest

import model.commit as model
from conformance.backends import COMMIT_BACKENDS, outbox_factory, store_factory
from impls.api import InMemoryMembership, MessageStore, Outbox
from model.commit import (
    MAX_HISTORY_BYTES,
    MAX_SCAN_ITEMS,
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryPage,
    HistoryQuery,
    LoadedCommitted,
    LoadedInFlight,
    MessageContent,
    MessageCoordinates,
    MessageRecord,
    MessageStoreError,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    StoreErrorKind,
    StoreState,
    TenantId,
    TimestampMillis,
)
from tests.impls.conftest import CONVERSATION, MEMBERS, OTHER_CONVERSATION, OTHER_TENANT, TENANT

T0 = 1_700_000_000_000
RETENTION_MS = 60_000
FAR_FUTURE = T0 * 10


def send(
    cmid: str = "m-1",
    *,
    tenant: TenantId = TENANT,
    sender: str = "alice",
    device: str = "d1",
    conversation: ConversationId = CONVERSATION,
    body: bytes = b"hello",
    message_type: MessageType = MessageType.TEXT,
    custom_type: str | None = None,
    mentions: tuple[str, ...] = (),
    reply_to: int | None = None,
) -> AuthenticatedSend:
    return AuthenticatedSend(
        tenant=tenant,
        sender=sender,
        device=device,
        conversation=conversation,
        client_message_id=cmid,
        content=MessageContent(message_type, body, custom_type),
        mentions=mentions,
        reply_to=reply_to,
    )


def delivery_for(request: AuthenticatedSend, retention_ms: int = RETENTION_MS) -> FrozenDeliveryInput:
    return FrozenDeliveryInput(request.conversation, tuple(MEMBERS), 1, retention_ms)


def candidate_for(request: AuthenticatedSend, at: TimestampMillis = T0) -> ReserveCandidate:
    return ReserveCandidate(MessageRecord.from_send(request), at)


def publication(n: int) -> OutboxPublication:
    return OutboxPublication("contract-stream", f"{n}-0")


async def outcome(call: Awaitable[Any]) -> Any:
    """The call's result, or the ``MessageStoreError`` it raised (nothing else may leave a store)."""
    try:
        return await call
    except MessageStoreError as error:
        return error


def agree(actual: Any, expected: Any) -> None:
    if isinstance(expected, MessageStoreError):
        assert isinstance(actual, MessageStoreError), f"model says {expected.kind}, store gave {actual!r}"
        assert actual.kind is expected.kind, f"model says {expected.kind}, store raised {actual!r}"
    else:
        assert not isinstance(actual, MessageStoreError), f"model says {expected!r}, store raised {actual!r}"
        assert actual == expected


class Twin:
    """One store and the model, driven by the same calls (zarr-style: the model never peeks)."""

    def __init__(self, store: MessageStore, membership: InMemoryMembership) -> None:
        self.store = store
        self.membership = membership
        self.state = StoreState()
        self.keys: dict[CommitKey, ConversationId] = {}
        self.conversations: set[tuple[TenantId, ConversationId]] = set()

    async def _step(
        self, model_step: Callable[[StoreState], tuple[StoreState, Any]], call: Awaitable[Any]
    ) -> Any:
        self.state, expected = model_step(self.state)
        actual = await outcome(call)
        agree(actual, expected)
        return actual

    async def _read(self, expected: Any, call: Awaitable[Any]) -> Any:
        actual = await outcome(call)
        agree(actual, expected)
        return actual

    async def reserve(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput | None = None,
        candidate: ReserveCandidate | None = None,
    ) -> Any:
        delivery = delivery or delivery_for(request)
        candidate = candidate or candidate_for(request)
        self.keys.setdefault(request.commit_key, request.conversation)
        self.conversations.add((request.tenant, request.conversation))
        return await self._step(
            lambda s: model.reserve(s, request, delivery, candidate),
            self.store.reserve(request, delivery, candidate),
        )

    async def created(self, request: AuthenticatedSend, at: TimestampMillis = T0) -> CommitIntent:
        result = await self.reserve(request, candidate=candidate_for(request, at))
        assert isinstance(result, ReserveCreated)
        return result.intent

    async def put_record(self, intent: CommitIntent) -> Any:
        return await self._step(lambda s: model.put_record(s, intent), self.store.put_record(intent))

    async def mark_outbox_published(self, intent: CommitIntent, pub: OutboxPublication) -> Any:
        return await self._step(
            lambda s: model.mark_outbox_published(s, intent, pub),
            self.store.mark_outbox_published(intent, pub),
        )

    async def mark_published_and_committed(self, intent: CommitIntent, pub: OutboxPublication) -> Any:
        return await self._step(
            lambda s: model.mark_published_and_committed(s, intent, pub),
            self.store.mark_published_and_committed(intent, pub),
        )

    async def mark_committed(self, intent: CommitIntent) -> Any:
        return await self._step(lambda s: model.mark_committed(s, intent), self.store.mark_committed(intent))

    async def commit(self, intent: CommitIntent, pub: OutboxPublication) -> CommittedMessage:
        """Record and commit by the default two-step path, which every backend offers."""
        await self.put_record(intent)
        await self.mark_outbox_published(intent, pub)
        message = await self.mark_committed(intent)
        assert isinstance(message, CommittedMessage)
        return message

    async def load_commit(self, key: CommitKey, conversation: ConversationId) -> Any:
        return await self._read(
            model.load_commit(self.state, key, conversation), self.store.load_commit(key, conversation)
        )

    async def load_commit_for_request(self, request: AuthenticatedSend) -> Any:
        return await self._read(
            model.load_commit_for_request(self.state, request), self.store.load_commit_for_request(request)
        )

    async def scan(self, older_than: TimestampMillis, max_items: int) -> Any:
        return await self._read(
            model.scan_recoverable_commits(self.state, older_than, max_items),
            self.store.scan_recoverable_commits(older_than, max_items),
        )

    async def history(self, query: HistoryQuery) -> Any:
        members = self.membership.snapshot(query.tenant, query.conversation)
        return await self._read(
            model.history_page(self.state, query, members), self.store.history_page(query)
        )

    async def check(self, as_of_ms: TimestampMillis = T0) -> None:
        """Everything observable agrees with the model: each key, the recovery scan, each history."""
        for key, conversation in self.keys.items():
            await self.load_commit(key, conversation)
        await self.scan(FAR_FUTURE, MAX_SCAN_ITEMS)
        for tenant, conversation in self.conversations:
            for direction in HistoryDirection:
                await self.history(
                    query(tenant=tenant, conversation=conversation, direction=direction, as_of_ms=as_of_ms)
                )


def query(
    *,
    tenant: TenantId = TENANT,
    conversation: ConversationId = CONVERSATION,
    actor: str = "bob",
    direction: HistoryDirection = HistoryDirection.AFTER,
    anchor: int | None = None,
    limit: int = 100,
    max_bytes: int = MAX_HISTORY_BYTES,
    as_of_ms: TimestampMillis = T0,
) -> HistoryQuery:
    return HistoryQuery(tenant, conversation, actor, direction, anchor, limit, max_bytes, as_of_ms)


@pytest.fixture
def twin(store: MessageStore, membership: InMemoryMembership) -> Twin:
    return Twin(store, membership)


def needs_atomic(store: MessageStore) -> None:
    if not store.capabilities.atomic_publish_and_commit:
        pytest.skip("the store does not declare atomic Recorded+publication->Committed")


# --- reserve ---------------------------------------------------------------------------------


async def test_fresh_reserves_get_the_next_numbers_per_tenant_and_conversation(twin: Twin) -> None:
    """C-POST-01: message_seq counts per tenant, conversation_seq per (tenant, conversation)."""
    a = await twin.created(send("m-1"), at=T0)
    b = await twin.created(send("m-2", sender="bob", conversation=OTHER_CONVERSATION), at=T0 + 1)
    c = await twin.created(send("m-3"), at=T0 + 2)
    d = await twin.created(send("m-1", tenant=OTHER_TENANT), at=T0 + 3)
    assert [i.coordinates for i in (a, b, c, d)] == [
        MessageCoordinates(1, 1, T0),
        MessageCoordinates(2, 1, T0 + 1),
        MessageCoordinates(3, 2, T0 + 2),
        MessageCoordinates(1, 1, T0 + 3),
    ]
    assert a.record == MessageRecord.from_send(send("m-1"))
    assert a.identity == model.reserve_identity_digest(send("m-1"))
    await twin.check()


async def test_repeat_reserve_returns_the_stored_intent_and_allocates_nothing(twin: Twin) -> None:
    """C-POST-01, C-PRE-02: the first delivery and accepted_at win; the next key gets exactly +1."""
    request = send("m-1")
    first = await twin.created(request)
    again = await twin.reserve(request)
    assert again == ReserveInFlight(first, CommitStage.RESERVED, None)
    later = FrozenDeliveryInput(CONVERSATION, ("alice",), 7, 5)
    again = await twin.reserve(request, later, candidate_for(request, T0 + 999))
    assert again == ReserveInFlight(first, CommitStage.RESERVED, None)
    await twin.put_record(first)
    assert await twin.reserve(request) == ReserveInFlight(first, CommitStage.RECORDED, None)
    await twin.mark_outbox_published(first, publication(1))
    assert await twin.reserve(request) == ReserveInFlight(first, CommitStage.OUTBOXED, publication(1))
    message = await twin.mark_committed(first)
    assert await twin.reserve(request) == ReserveCommitted(message)
    following = await twin.created(send("m-2"))
    assert following.coordinates.message_seq == first.coordinates.message_seq + 1
    assert following.coordinates.conversation_seq == first.coordinates.conversation_seq + 1
    await twin.check()


CONFLICTING = {
    "device": {"device": "d2"},
    "conversation": {"conversation": OTHER_CONVERSATION},
    "body": {"body": b"hello!"},
    "type": {"message_type": MessageType.IMAGE},
    "custom-type": {"message_type": MessageType.CUSTOM, "custom_type": "poll"},
    "mentions": {"mentions": ("bob",)},
    "reply": {"reply_to": 1},
}


@pytest.mark.parametrize("change", CONFLICTING.values(), ids=CONFLICTING.keys())
@pytest.mark.parametrize(
    "stage", [CommitStage.RESERVED, CommitStage.COMMITTED], ids=["reserved", "committed"]
)
async def test_same_key_different_request_conflicts(
    twin: Twin, change: dict[str, Any], stage: CommitStage
) -> None:
    """C-PRE-03: any identity field differing is a conflict, never a replayed ACK; nothing changes."""
    original = send("m-1", mentions=("carol",))
    intent = await twin.created(original)
    if stage is CommitStage.COMMITTED:
        await twin.commit(intent, publication(1))
    other = send("m-1", mentions=("carol",), **change) if "mentions" not in change else send("m-1", **change)
    assert other.commit_key == original.commit_key and other != original
    conflict = await twin.reserve(other)
    assert isinstance(conflict, MessageStoreError) and conflict.kind is StoreErrorKind.IDENTITY_CONFLICT
    conflict = await twin.load_commit_for_request(other)
    assert isinstance(conflict, MessageStoreError) and conflict.kind is StoreErrorKind.IDENTITY_CONFLICT
    await twin.load_commit_for_request(original)
    await twin.check()


async def test_load_commit_under_another_conversation_conflicts(twin: Twin) -> None:
    intent = await twin.created(send("m-1"))
    wrong = await twin.load_commit(intent.key, OTHER_CONVERSATION)
    assert isinstance(wrong, MessageStoreError) and wrong.kind is StoreErrorKind.IDENTITY_CONFLICT
    await twin.commit(intent, publication(1))
    wrong = await twin.load_commit(intent.key, OTHER_CONVERSATION)
    assert isinstance(wrong, MessageStoreError) and wrong.kind is StoreErrorKind.IDENTITY_CONFLICT
    await twin.check()


# --- the stage transitions ------------------------------------------------------------------


async def test_put_record_converges(twin: Twin) -> None:
    """C-PRE-04, C-POST-03: the record is written once; repeats at any later stage change nothing."""
    intent = await twin.created(send("m-1", body=b"payload"))
    assert await twin.put_record(intent) is None
    assert await twin.put_record(intent) is None
    assert await twin.load_commit(intent.key, CONVERSATION) == LoadedInFlight(
        intent, CommitStage.RECORDED, None
    )
    await twin.mark_outbox_published(intent, publication(1))
    assert await twin.put_record(intent) is None
    await twin.mark_committed(intent)
    assert await twin.put_record(intent) is None
    await twin.check()


async def test_mark_outbox_published_converges_and_refuses_another_publication(twin: Twin) -> None:
    """C-POST-03: RECORDED -> OUTBOXED; the same publication again converges, another is refused."""
    intent = await twin.created(send("m-1"))
    early = await twin.mark_outbox_published(intent, publication(1))
    assert isinstance(early, MessageStoreError) and early.kind is StoreErrorKind.MISSING_EVIDENCE
    await twin.check()
    await twin.put_record(intent)
    assert await twin.mark_outbox_published(intent, publication(1)) is None
    assert await twin.mark_outbox_published(intent, publication(1)) is None
    other = await twin.mark_outbox_published(intent, publication(2))
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.PUBLICATION_MISMATCH
    assert await twin.load_commit(intent.key, CONVERSATION) == LoadedInFlight(
        intent, CommitStage.OUTBOXED, publication(1)
    )
    await twin.mark_committed(intent)
    assert await twin.mark_outbox_published(intent, publication(1)) is None
    other = await twin.mark_outbox_published(intent, publication(2))
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.PUBLICATION_MISMATCH
    await twin.check()


async def test_atomic_commit_replays_and_refuses_without_partial_writes(
    twin: Twin, store: MessageStore
) -> None:
    """C-POST-04, C-POST-05: one step from RECORDED; same-value retry replays; refusals change nothing."""
    needs_atomic(store)
    intent = await twin.created(send("m-1"))
    missing = await twin.mark_published_and_committed(intent, publication(1))
    assert isinstance(missing, MessageStoreError) and missing.kind is StoreErrorKind.MISSING_EVIDENCE
    await twin.check()
    await twin.put_record(intent)
    message = await twin.mark_published_and_committed(intent, publication(1))
    assert message == CommittedMessage(intent.key, CONVERSATION, intent.coordinates, publication(1))
    assert await twin.mark_published_and_committed(intent, publication(1)) == message
    other = await twin.mark_published_and_committed(intent, publication(2))
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.PUBLICATION_MISMATCH
    assert await twin.mark_committed(intent) == message
    assert await twin.load_commit(intent.key, CONVERSATION) == LoadedCommitted(message)
    await twin.check()


async def test_atomic_commit_from_outboxed_keeps_the_durable_publication(
    twin: Twin, store: MessageStore
) -> None:
    needs_atomic(store)
    intent = await twin.created(send("m-1"))
    await twin.put_record(intent)
    await twin.mark_outbox_published(intent, publication(1))
    other = await twin.mark_published_and_committed(intent, publication(2))
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.PUBLICATION_MISMATCH
    await twin.check()
    message = await twin.mark_published_and_committed(intent, publication(1))
    assert isinstance(message, CommittedMessage) and message.publication == publication(1)
    await twin.check()


async def test_two_step_commit_works_on_every_backend(twin: Twin) -> None:
    """C-POST-06: mark_outbox_published, then mark_committed; a repeat replays the same message."""
    intent = await twin.created(send("m-1"))
    message = await twin.commit(intent, publication(1))
    assert message == CommittedMessage(intent.key, CONVERSATION, intent.coordinates, publication(1))
    assert await twin.mark_committed(intent) == message
    assert await twin.reserve(send("m-1")) == ReserveCommitted(message)
    await twin.check()


async def test_mark_committed_needs_record_and_publication(twin: Twin) -> None:
    """C-POST-03: no CommittedMessage without durable evidence."""
    intent = await twin.created(send("m-1"))
    refused = await twin.mark_committed(intent)
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.MISSING_EVIDENCE
    await twin.put_record(intent)
    refused = await twin.mark_committed(intent)
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.MISSING_EVIDENCE
    await twin.check()


def _forgeries(intent: CommitIntent) -> dict[str, CommitIntent]:
    record = intent.record
    return {
        "unknown-key": attrs.evolve(intent, key=CommitKey(TENANT, "alice", "never-reserved")),
        "identity": attrs.evolve(intent, identity=model.reserve_identity_digest(send("m-1", body=b"x"))),
        "coordinates": attrs.evolve(
            intent,
            coordinates=attrs.evolve(
                intent.coordinates, conversation_seq=intent.coordinates.conversation_seq + 1
            ),
        ),
        "accepted-at": attrs.evolve(
            intent,
            coordinates=attrs.evolve(
                intent.coordinates, accepted_at_ms=intent.coordinates.accepted_at_ms + 1
            ),
        ),
        "conversation": attrs.evolve(intent, record=attrs.evolve(record, conversation=OTHER_CONVERSATION)),
        "body": attrs.evolve(
            intent, record=attrs.evolve(record, content=attrs.evolve(record.content, body=b"other"))
        ),
        "device": attrs.evolve(intent, record=attrs.evolve(record, device="d9")),
        "delivery": attrs.evolve(intent, delivery=attrs.evolve(intent.delivery, retention_ms=1)),
        "recipients": attrs.evolve(intent, delivery=attrs.evolve(intent.delivery, recipients=("alice",))),
        "record-key": attrs.evolve(intent, record=attrs.evolve(record, key=CommitKey(TENANT, "bob", "m-1"))),
        "invalid-key": attrs.evolve(intent, key=CommitKey("t 1", "a\x00b", "?")),
    }


@pytest.mark.parametrize(
    "stage", [CommitStage.RESERVED, CommitStage.RECORDED, CommitStage.OUTBOXED, CommitStage.COMMITTED]
)
async def test_transitions_refuse_forged_intents_and_change_nothing(
    twin: Twin, store: MessageStore, stage: CommitStage
) -> None:
    """C-POST-03, C-ERR-04: NOT_FOUND or INTENT_MISMATCH exactly as the model says, nothing written."""
    intent = await twin.created(send("m-1"))
    if stage.rank >= CommitStage.RECORDED.rank:
        await twin.put_record(intent)
    if stage.rank >= CommitStage.OUTBOXED.rank:
        await twin.mark_outbox_published(intent, publication(1))
    if stage is CommitStage.COMMITTED:
        await twin.mark_committed(intent)
    for forged in _forgeries(intent).values():
        await twin.put_record(forged)
        await twin.mark_outbox_published(forged, publication(1))
        await twin.mark_committed(forged)
        if store.capabilities.atomic_publish_and_commit:
            await twin.mark_published_and_committed(forged, publication(1))
        await twin.check()


# --- reads ----------------------------------------------------------------------------------


async def test_load_commit_and_load_commit_for_request_every_branch(twin: Twin) -> None:
    """C-PRE-03, C-PRE-09: absent, each in-flight stage, committed, conflicts, invalid request."""
    request = send("m-1")
    assert await twin.load_commit(request.commit_key, CONVERSATION) is None
    assert await twin.load_commit_for_request(request) is None
    intent = await twin.created(request)
    expected = LoadedInFlight(intent, CommitStage.RESERVED, None)
    assert await twin.load_commit(intent.key, CONVERSATION) == expected
    assert await twin.load_commit_for_request(request) == expected
    await twin.put_record(intent)
    assert await twin.load_commit_for_request(request) == LoadedInFlight(intent, CommitStage.RECORDED, None)
    await twin.mark_outbox_published(intent, publication(3))
    assert await twin.load_commit_for_request(request) == LoadedInFlight(
        intent, CommitStage.OUTBOXED, publication(3)
    )
    message = await twin.mark_committed(intent)
    assert await twin.load_commit(intent.key, CONVERSATION) == LoadedCommitted(message)
    assert await twin.load_commit_for_request(request) == LoadedCommitted(message)
    invalid = await twin.load_commit_for_request(send("not valid!"))
    assert isinstance(invalid, MessageStoreError) and invalid.kind is StoreErrorKind.INVALID_ARGUMENT
    await twin.load_commit(CommitKey(TENANT, "alice", "m-2"), CONVERSATION)
    await twin.load_commit(CommitKey("t 1", "a\x00b", "?"), CONVERSATION)
    await twin.check()


async def test_scan_recoverable_orders_bounds_and_skips_committed(twin: Twin) -> None:
    """C-POST-02: stage < COMMITTED, accepted_at < older_than (strict), by (accepted_at, key)."""
    intents = [
        await twin.created(send("m-2", sender="bob"), at=T0 + 10),
        await twin.created(send("m-1", sender="bob"), at=T0 + 10),
        await twin.created(send("m-9", sender="alice"), at=T0 + 10),
        await twin.created(send("m-1", tenant=OTHER_TENANT, sender="alice"), at=T0 + 10),
        await twin.created(send("m-3", sender="carol"), at=T0 + 5),
        await twin.created(send("m-4", sender="carol"), at=T0 + 20),
        await twin.created(send("m-5", sender="carol"), at=T0 + 1),
    ]
    await twin.put_record(intents[0])
    await twin.commit(intents[6], publication(1))
    due = await twin.scan(T0 + 20, MAX_SCAN_ITEMS)
    assert [i.key.client_message_id for i in due] == ["m-3", "m-9", "m-1", "m-2", "m-1"]
    assert [i.key.tenant for i in due] == [TENANT, TENANT, TENANT, TENANT, OTHER_TENANT]
    assert due[3] == intents[0]  # the RESERVED-time intent, recovery needs nothing else
    assert await twin.scan(T0 + 21, 2) == [intents[4], intents[2]]
    assert await twin.scan(T0 + 5, MAX_SCAN_ITEMS) == []
    assert await twin.scan(T0 + 6, 1) == [intents[4]]
    assert await twin.scan(T0 + 21, MAX_SCAN_ITEMS) == [*due, intents[5]]
    for bad in (0, -1, MAX_SCAN_ITEMS + 1):
        refused = await twin.scan(T0 + 21, bad)
        assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.INVALID_ARGUMENT
    await twin.check()


# --- history --------------------------------------------------------------------------------


async def test_history_authorizes_the_actor_first(twin: Twin, membership: InMemoryMembership) -> None:
    """C-PRE-05: a non-member is refused, also on an empty conversation and after removal."""
    refused = await twin.history(query(actor="mallory"))
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.NOT_A_MEMBER
    intent = await twin.created(send("m-1"))
    await twin.put_record(intent)
    page = await twin.history(query(actor="carol"))
    assert isinstance(page, HistoryPage) and len(page.entries) == 1
    membership.set_members(TENANT, CONVERSATION, frozenset({"alice", "bob"}))
    refused = await twin.history(query(actor="carol"))
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.NOT_A_MEMBER
    refused = await twin.history(query(actor="bob", conversation="c-nobody"))
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.NOT_A_MEMBER


async def _conversation_of(
    twin: Twin, bodies: list[bytes], *, record: list[bool] | None = None
) -> list[CommitIntent]:
    intents = []
    for n, body in enumerate(bodies, start=1):
        request = send(f"m-{n}", sender=["alice", "bob", "carol"][n % 3], body=body, reply_to=n - 1 or None)
        intent = await twin.created(request, at=T0 + n)
        if record is None or record[n - 1]:
            await twin.put_record(intent)
        intents.append(intent)
    return intents


async def test_history_direction_anchor_and_limit(twin: Twin) -> None:
    """C-POST-11: BEFORE reads older entries newest first, AFTER newer ones oldest first."""
    await _conversation_of(twin, [b"a", b"b", b"c", b"d", b"e"])
    before = await twin.history(query(direction=HistoryDirection.BEFORE, limit=2))
    assert [e.coordinates.conversation_seq for e in before.entries] == [5, 4] and before.has_more
    before = await twin.history(query(direction=HistoryDirection.BEFORE, anchor=4, limit=5))
    assert [e.coordinates.conversation_seq for e in before.entries] == [3, 2, 1] and not before.has_more
    after = await twin.history(query(direction=HistoryDirection.AFTER, anchor=2, limit=2))
    assert [e.body for e in after.entries] == [b"c", b"d"] and after.has_more
    after = await twin.history(query(direction=HistoryDirection.AFTER, anchor=3, limit=2))
    assert [e.body for e in after.entries] == [b"d", b"e"] and not after.has_more
    for anchor in (0, 1, 5, 6, 100):
        for direction in HistoryDirection:
            await twin.history(query(direction=direction, anchor=anchor, limit=3))
    entry = after.entries[0]
    assert (entry.sender, entry.message_type, entry.custom_type, entry.reply_to) == (
        "bob",
        MessageType.TEXT,
        None,
        3,
    )
    await twin.check()


async def test_history_byte_limit_always_returns_the_first_entry(twin: Twin) -> None:
    await _conversation_of(twin, [b"x" * 40, b"y" * 10, b"z" * 30])
    page = await twin.history(query(direction=HistoryDirection.AFTER, max_bytes=5))
    assert [e.body for e in page.entries] == [b"x" * 40] and page.has_more
    page = await twin.history(query(direction=HistoryDirection.AFTER, max_bytes=50))
    assert [len(e.body) for e in page.entries] == [40, 10] and page.has_more
    page = await twin.history(query(direction=HistoryDirection.BEFORE, max_bytes=40))
    assert [len(e.body) for e in page.entries] == [30, 10] and page.has_more
    for max_bytes in (1, 39, 40, 49, 50, 79, 80, 81):
        for direction in HistoryDirection:
            await twin.history(query(direction=direction, max_bytes=max_bytes))


async def test_history_shows_records_with_custom_types_and_mentions(twin: Twin) -> None:
    intent = await twin.created(
        send(
            "m-1",
            message_type=MessageType.CUSTOM,
            custom_type="poll.v2",
            mentions=("bob", "alice"),
            body=b"\x00\xff",
        )
    )
    await twin.put_record(intent)
    page = await twin.history(query())
    assert page.entries[0].custom_type == "poll.v2" and page.entries[0].body == b"\x00\xff"
    await twin.check()


async def test_history_expiry_is_registered_at_commit_and_read_by_as_of(twin: Twin) -> None:
    """C-POST-05, C-POST-11: in flight, an entry never expires; after commit it lives until
    accepted_at + retention, judged by the reader's as_of_ms."""
    first, _second, third = await _conversation_of(twin, [b"a", b"b", b"c"])
    expiry = first.coordinates.accepted_at_ms + RETENTION_MS
    await twin.commit(first, publication(1))
    await twin.commit(third, publication(3))
    for as_of in (expiry - 1, expiry, expiry + 1, expiry + 2, FAR_FUTURE):
        for direction in HistoryDirection:
            page = await twin.history(query(direction=direction, as_of_ms=as_of))
            assert isinstance(page, HistoryPage)
    late = await twin.history(query(as_of_ms=FAR_FUTURE))
    assert [e.coordinates.conversation_seq for e in late.entries] == [2]
    assert (late.available_from, late.available_through) == (2, 3)
    early = await twin.history(query(as_of_ms=expiry - 1))
    assert [e.coordinates.conversation_seq for e in early.entries] == [1, 2, 3]
    at_expiry = await twin.history(query(as_of_ms=expiry))
    assert [e.coordinates.conversation_seq for e in at_expiry.entries] == [2, 3]
    await twin.check(as_of_ms=expiry)
    await twin.check(as_of_ms=FAR_FUTURE)


async def test_history_bounds_say_where_holes_are_not_loss(twin: Twin) -> None:
    """C-POST-11: available_through counts every allocated sequence, recorded or not."""
    empty = await twin.history(query())
    assert (empty.entries, empty.available_from, empty.available_through) == ((), None, 0)
    await _conversation_of(twin, [b"a", b"b", b"c", b"d"], record=[False, True, False, True])
    page = await twin.history(query())
    assert [e.coordinates.conversation_seq for e in page.entries] == [2, 4]
    assert (page.available_from, page.available_through) == (2, 4)
    await twin.created(send("m-9"))
    page = await twin.history(query(direction=HistoryDirection.BEFORE, anchor=4))
    assert [e.coordinates.conversation_seq for e in page.entries] == [2]
    assert (page.available_from, page.available_through) == (2, 5)
    await twin.check()


# --- invalid arguments ------------------------------------------------------------------------


def _invalid_reserves() -> dict[str, tuple[AuthenticatedSend, FrozenDeliveryInput, ReserveCandidate]]:
    good = send("m-1")

    def with_request(
        request: AuthenticatedSend,
    ) -> tuple[AuthenticatedSend, FrozenDeliveryInput, ReserveCandidate]:
        return request, delivery_for(request), candidate_for(request)

    return {
        "cmid": with_request(send("bad id!")),
        "cmid-empty": with_request(send("")),
        "cmid-long": with_request(send("m" * 65)),
        "tenant": with_request(send("m-1", tenant="t/1")),
        "sender": with_request(send("m-1", sender="")),
        "device": with_request(send("m-1", device="d 1")),
        "conversation": with_request(send("m-1", conversation="c:1")),
        "mentions": with_request(send("m-1", mentions=tuple(f"u{n}" for n in range(33)))),
        "mention": with_request(send("m-1", mentions=("not valid",))),
        "reply": with_request(send("m-1", reply_to=0)),
        "body": with_request(send("m-1", body=b"x" * (64 * 1024 + 1))),
        "custom-without-type": with_request(send("m-1", message_type=MessageType.CUSTOM)),
        "custom-type-on-text": with_request(send("m-1", custom_type="poll")),
        "delivery-conversation": (
            good,
            delivery_for(send("m-1", conversation=OTHER_CONVERSATION)),
            candidate_for(good),
        ),
        "retention": (good, delivery_for(good, retention_ms=0), candidate_for(good)),
        "membership-version": (
            good,
            FrozenDeliveryInput(CONVERSATION, ("alice",), -1, 1),
            candidate_for(good),
        ),
        "recipient": (good, FrozenDeliveryInput(CONVERSATION, ("a b",), 1, 1), candidate_for(good)),
        "candidate": (good, delivery_for(good), candidate_for(send("m-1", body=b"other"))),
    }


async def test_invalid_arguments_are_refused_at_every_method_and_change_nothing(twin: Twin) -> None:
    """C-ERR-04: INVALID_ARGUMENT, with nothing written (the next key still gets the next numbers)."""
    existing = await twin.created(send("m-0"))
    await twin.put_record(existing)
    for request, delivery, candidate in _invalid_reserves().values():
        refused = await twin.reserve(request, delivery, candidate)
        assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.INVALID_ARGUMENT, (
            request
        )
        await twin.load_commit_for_request(request)
    for bad_query in (
        query(limit=0),
        query(limit=101),
        query(max_bytes=0),
        query(max_bytes=MAX_HISTORY_BYTES + 1),
        query(anchor=-1),
        query(actor="not valid"),
        query(tenant=""),
        query(conversation="c/1"),
    ):
        refused = await twin.history(bad_query)
        assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.INVALID_ARGUMENT
    refused = await twin.scan(T0, 0)
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.INVALID_ARGUMENT
    await twin.check()
    following = await twin.created(send("m-1"))
    assert following.coordinates.message_seq == existing.coordinates.message_seq + 1
    await twin.check()


# --- outbox and readiness ---------------------------------------------------------------------


async def test_outbox_publish_is_idempotent_per_commit_key(twin: Twin, outbox: Outbox) -> None:
    """C-POST-07: publishing a key again returns its first publication; other keys get new ones."""
    first = await twin.created(send("m-1"))
    second = await twin.created(send("m-2"))
    p1 = await outbox.publish(first)
    assert await outbox.publish(first) == p1
    p2 = await outbox.publish(second)
    assert p2 != p1 and await outbox.publish(second) == p2
    reissued = attrs.evolve(first, delivery=attrs.evolve(first.delivery, membership_version=9))
    assert await outbox.publish(reissued) == p1
    await outbox.readiness()
    await twin.put_record(first)
    message = await twin.mark_outbox_published(first, p1)
    assert message is None
    assert (await twin.mark_committed(first)).publication == p1


def _entry_order(entry_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in entry_id.split("-"))


@pytest.mark.parametrize(
    "backend",
    ["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.service("redis"))],
)
async def test_stream_outboxes_number_entries_upwards(twin: Twin, outbox: Outbox) -> None:
    """The memory and Redis Streams outboxes: one stream per namespace, entry ids increasing."""
    publications = [await outbox.publish(await twin.created(send(f"m-{n}"))) for n in range(5)]
    assert len({p.stream for p in publications}) == 1
    orders = [_entry_order(p.entry_id) for p in publications]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


async def test_readiness_answers_and_fails_once_closed(
    backend: str, namespace: str, membership: InMemoryMembership
) -> None:
    """C-PRE-06: a live store answers; a closed one is not ready (no cached success)."""
    spec = COMMIT_BACKENDS[backend]
    store = await store_factory(spec)(namespace + "-ready", membership)
    outbox = await outbox_factory(spec)(namespace + "-ready")
    assert await store.readiness() is None
    assert await outbox.readiness() is None
    await store.close()
    await outbox.close()
    for target in (store, outbox):
        refused = await outcome(target.readiness())
        assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.UNAVAILABLE


async def test_committed_message_keeps_only_ack_facts(twin: Twin) -> None:
    """C-PRE-09, C-PRE-10: a committed replay carries coordinates and publication, not the body."""
    request = send("m-1", body=b"b" * 100)
    intent = await twin.created(request)
    message = await twin.commit(intent, publication(1))
    loaded = await twin.load_commit_for_request(request)
    assert loaded == LoadedCommitted(message)
    assert await twin.scan(FAR_FUTURE, MAX_SCAN_ITEMS) == []
    await twin.check()
