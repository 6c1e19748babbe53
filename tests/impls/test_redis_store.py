"""What only the Redis store has: its hash formats, its scripts and its door to redis-py.

These tests read and write the server raw (bypassing the store) where the point is what is really
stored: the pre-upgrade full format, the compact committed hash, keys of the wrong type.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest
from redis.asyncio import Redis

import impls.redis
from impls.api import InMemoryMembership
from impls.redis import (
    RedisMessageStore,
    RedisOutbox,
    fakeredis_client,
    redis_client,
    redis_url,
)
from impls.redis._gateway import Gateway
from impls.redis._keys import Keys
from impls.redis._scripts import Script
from model.commit import (
    CommitEntry,
    CommitIntent,
    CommitStage,
    CommittedMessage,
    HistoryDirection,
    HistoryQuery,
    LoadedCommitted,
    MessageCoordinates,
    MessageStoreError,
    OutboxPublication,
    ReserveCommitted,
    ReserveCreated,
    StoreErrorKind,
    StoreState,
    legacy_full_identity,
)
from tests.impls.conftest import CONVERSATION, MEMBERS, OTHER_CONVERSATION, TENANT
from tests.impls.test_store_contract import (
    T0,
    Twin,
    _forgeries,
    candidate_for,
    delivery_for,
    outcome,
    publication,
    query,
    send,
)

REDIS_BACKENDS = [
    pytest.param("fakeredis", id="fakeredis"),
    pytest.param("redis", id="redis", marks=pytest.mark.service("redis")),
]
real_redis = pytest.mark.service("redis")

# Text that must never appear in a MessageStoreError detail (C-ERR-01).
LEAKS = ("redis", "wrongtype", "script", "rt:{", "eval", "err ", "connection", "lua")


def new_client(backend: str) -> Redis:
    return fakeredis_client() if backend == "fakeredis" else redis_client()


@pytest.fixture(params=REDIS_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def namespace() -> str:
    return f"redis-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def membership() -> InMemoryMembership:
    directory = InMemoryMembership()
    directory.set_members(TENANT, CONVERSATION, MEMBERS)
    return directory


@pytest.fixture
async def raw(backend: str) -> AsyncIterator[Redis]:
    """A plain client of the same server: the observer that reads what the store really wrote."""
    client = new_client(backend)
    yield client
    await client.aclose()


@pytest.fixture
async def store(
    backend: str, namespace: str, membership: InMemoryMembership
) -> AsyncIterator[RedisMessageStore]:
    opened = RedisMessageStore(new_client(backend), namespace, membership)
    yield opened
    await opened.close()


@pytest.fixture
async def outbox(backend: str, namespace: str) -> AsyncIterator[RedisOutbox]:
    opened = RedisOutbox(new_client(backend), namespace)
    yield opened
    await opened.close()


def assert_clean(error: Any, kind: StoreErrorKind) -> None:
    """A MessageStoreError of ``kind`` whose detail says nothing about Redis internals."""
    assert isinstance(error, MessageStoreError), f"expected MessageStoreError({kind}), got {error!r}"
    assert error.kind is kind, error
    assert not any(leak in error.detail.lower() for leak in LEAKS), error.detail
    chained: BaseException | None = error
    while chained is not None:  # not even as a cause: the door drops redis-py's exception
        assert not type(chained).__module__.startswith("redis"), repr(chained)
        chained = chained.__cause__ or (None if chained.__suppress_context__ else chained.__context__)


# --- the pre-upgrade full format ------------------------------------------------------------


async def test_legacy_full_format_is_still_read(
    raw: Redis, store: RedisMessageStore, namespace: str, membership: InMemoryMembership
) -> None:
    """C-PRE-07: a committed hash written before the upgrade (whole record, QIMC identity)."""
    request = send("m-legacy", body=b"L" * 100, mentions=("bob",))
    key = request.commit_key
    coordinates = MessageCoordinates(7, 3, T0)
    legacy_publication = OutboxPublication("legacy-stream", "1690000000000-0")
    keys = Keys(namespace)
    # Written with plain commands, field by field, as the old code did.
    await raw.hset(
        keys.commit(key),
        mapping={
            "stage": "committed",
            "identity": legacy_full_identity(request),
            "conversation": CONVERSATION,
            "message_seq": "7",
            "conversation_seq": "3",
            "accepted_at_ms": str(T0),
            "device": request.device,
            "message_type": "text",
            "custom_type": "",
            "body": request.content.body,
            "mentions": "bob",
            "reply_to": "",
            "recipients": "alice,bob,carol",
            "membership_version": "1",
            "retention_ms": "60000",
            "stream": legacy_publication.stream,
            "entry_id": legacy_publication.entry_id,
        },
    )
    await raw.set(keys.message_seq(TENANT), "7")
    await raw.set(keys.conversation_seq(TENANT, CONVERSATION), "3")

    twin = Twin(store, membership)
    message = CommittedMessage(key, CONVERSATION, coordinates, legacy_publication)
    twin.state = StoreState(
        commits={
            key: CommitEntry(
                CommitStage.COMMITTED,
                legacy_full_identity(request),
                CONVERSATION,
                coordinates,
                None,
                legacy_publication,
            )
        },
        message_seq={TENANT: 7},
        conversation_seq={(TENANT, CONVERSATION): 3},
    )
    twin.keys[key] = CONVERSATION

    assert await twin.load_commit_for_request(request) == LoadedCommitted(message)
    assert await twin.load_commit(key, CONVERSATION) == LoadedCommitted(message)
    assert await twin.reserve(request) == ReserveCommitted(message)
    for different in (send("m-legacy", body=b"L" * 100), send("m-legacy", body=b"L" * 99, mentions=("bob",))):
        conflict = await twin.load_commit_for_request(different)
        assert_clean(conflict, StoreErrorKind.IDENTITY_CONFLICT)
        assert_clean(await twin.reserve(different), StoreErrorKind.IDENTITY_CONFLICT)
    assert_clean(await twin.load_commit(key, OTHER_CONVERSATION), StoreErrorKind.IDENTITY_CONFLICT)

    # The transitions converge on it like on any committed commit; a new key continues the counters.
    legacy_intent = CommitIntent(
        key, legacy_full_identity(request), coordinates, candidate_for(request).record, delivery_for(request)
    )
    assert await twin.mark_committed(legacy_intent) == message
    assert await twin.mark_published_and_committed(legacy_intent, legacy_publication) == message
    assert_clean(
        await twin.mark_published_and_committed(legacy_intent, publication(1)),
        StoreErrorKind.PUBLICATION_MISMATCH,
    )
    assert await twin.put_record(legacy_intent) is None
    following = await twin.created(send("m-new"))
    assert following.coordinates == MessageCoordinates(8, 4, T0)
    await twin.check()
    assert await raw.hget(keys.commit(key), "stage") == b"committed"  # read, never rewritten


async def test_legacy_hash_that_is_not_committed_is_corrupt(
    raw: Redis, store: RedisMessageStore, namespace: str
) -> None:
    request = send("m-legacy")
    await raw.hset(
        Keys(namespace).commit(request.commit_key), mapping={"stage": "reserved", "identity": b"QIMC"}
    )
    assert_clean(await outcome(store.load_commit_for_request(request)), StoreErrorKind.CORRUPT)
    assert_clean(
        await outcome(store.reserve(request, delivery_for(request), candidate_for(request))),
        StoreErrorKind.CORRUPT,
    )


# --- the compact committed hash --------------------------------------------------------------


async def test_committed_hash_is_compact(
    raw: Redis, store: RedisMessageStore, outbox: RedisOutbox, namespace: str
) -> None:
    """C-PRE-10: at COMMITTED only identity digest, conversation, coordinates and publication stay."""
    keys = Keys(namespace)
    for n, two_step in enumerate((False, True)):
        request = send(f"m-{n}", body=b"B" * 100)
        reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
        assert isinstance(reserved, ReserveCreated)
        intent = reserved.intent
        await store.put_record(intent)
        pub = await outbox.publish(intent)
        if two_step:
            await store.mark_outbox_published(intent, pub)
            await store.mark_committed(intent)
        else:
            await store.mark_published_and_committed(intent, pub)
        stored = await raw.hgetall(keys.commit(intent.key))
        # The outbox's own stream is the default one, so only the entry id is kept (in ``c``).
        assert pub.stream == "outbox"
        assert set(stored) == {b"i", b"v", b"c"}
        assert stored[b"i"] == intent.identity and stored[b"v"] == CONVERSATION.encode()
        assert stored[b"c"] == f"{n + 1}:{n + 1}:{T0}:{pub.entry_id}".encode()
        assert all(len(value) <= 64 for value in stored.values())
        message = CommittedMessage(intent.key, CONVERSATION, intent.coordinates, pub)
        assert await store.load_commit(intent.key, CONVERSATION) == LoadedCommitted(message)
        assert await store.mark_committed(intent) == message

    # Another stream (a publication from elsewhere) is kept in ``p``.
    request = send("m-other", body=b"B" * 100)
    reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
    assert isinstance(reserved, ReserveCreated)
    await store.put_record(reserved.intent)
    other = OutboxPublication("contract-stream", "7-0")
    message = await store.mark_published_and_committed(reserved.intent, other)
    stored = await raw.hgetall(keys.commit(request.commit_key))
    assert stored[b"p"] == b"contract-stream" and stored[b"c"] == f"3:3:{T0}:7-0".encode()
    assert await store.load_commit(request.commit_key, CONVERSATION) == LoadedCommitted(message)
    assert_clean(
        await outcome(store.mark_published_and_committed(reserved.intent, publication(8))),
        StoreErrorKind.PUBLICATION_MISMATCH,
    )


async def test_first_release_compact_form_is_still_read(
    raw: Redis, store: RedisMessageStore, namespace: str, membership: InMemoryMembership
) -> None:
    """The compact form written before entry ids moved into ``c``: ``i v c p e``, stream always kept."""
    twin = Twin(store, membership)
    intent = await twin.created(send("m-1"))
    await twin.put_record(intent)
    first = OutboxPublication("outbox", "1690000000000-0")
    message = await twin.mark_published_and_committed(intent, first)
    name = Keys(namespace).commit(intent.key)
    await raw.delete(name)
    await raw.hset(
        name,
        mapping={
            "i": intent.identity,
            "v": CONVERSATION,
            "c": f"1:1:{T0}",
            "p": first.stream,
            "e": first.entry_id,
        },
    )
    assert await twin.load_commit(intent.key, CONVERSATION) == LoadedCommitted(message)
    assert await twin.mark_committed(intent) == message
    assert await twin.mark_published_and_committed(intent, first) == message
    assert_clean(
        await twin.mark_published_and_committed(intent, OutboxPublication("outbox", "2-0")),
        StoreErrorKind.PUBLICATION_MISMATCH,
    )
    await twin.check()
    await raw.hset(name, "c", f"1:1:{T0}:1690000000000-0")  # an entry id in both places
    assert_clean(await outcome(store.load_commit(intent.key, CONVERSATION)), StoreErrorKind.CORRUPT)
    assert_clean(await outcome(store.mark_committed(intent)), StoreErrorKind.CORRUPT)


# --- the intent fingerprint ------------------------------------------------------------------


async def test_transitions_send_a_fingerprint_not_the_intent(
    raw: Redis, store: RedisMessageStore, outbox: RedisOutbox, namespace: str
) -> None:
    """C-POST-03: reserve stores the fingerprint; transitions carry it, never the body or record."""
    body = b"\xfe" * 5000
    request = send("m-1", body=body)
    reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
    assert isinstance(reserved, ReserveCreated)
    assert len(await raw.hget(Keys(namespace).commit(request.commit_key), "f") or b"") == 32
    sent: list[tuple[Any, ...]] = []
    gateway = store._gateway
    original = gateway._execute

    async def spy(*args: Any) -> Any:
        sent.append(args)
        return await original(*args)

    gateway._execute = spy  # type: ignore[method-assign]
    await store.put_record(reserved.intent)
    await store.mark_published_and_committed(reserved.intent, await outbox.publish(reserved.intent))
    assert len(sent) == 2
    assert all(not any(isinstance(a, bytes) and body[:64] in a for a in args) for args in sent)
    assert all(sum(len(a) for a in args if isinstance(a, bytes | str)) < 1000 for args in sent)
    page = await store.history_page(query())
    assert [entry.body for entry in page.entries] == [body]  # copied server-side from the reserve


@pytest.mark.parametrize("stage", [CommitStage.RESERVED, CommitStage.RECORDED, CommitStage.OUTBOXED])
async def test_in_flight_hash_without_fingerprint_is_compared_whole(
    raw: Redis,
    store: RedisMessageStore,
    namespace: str,
    membership: InMemoryMembership,
    stage: CommitStage,
) -> None:
    """A commit reserved before fingerprints existed: forged intents are still refused, field by
    field, and the real one finishes (one extra round trip per call while ``f`` is absent)."""
    twin = Twin(store, membership)
    intent = await twin.created(send("m-1"))
    if stage.rank >= CommitStage.RECORDED.rank:
        await twin.put_record(intent)
    if stage.rank >= CommitStage.OUTBOXED.rank:
        await twin.mark_outbox_published(intent, publication(1))
    await raw.hdel(Keys(namespace).commit(intent.key), "f")
    for forged in _forgeries(intent).values():
        await twin.put_record(forged)
        await twin.mark_outbox_published(forged, publication(1))
        await twin.mark_committed(forged)
        await twin.mark_published_and_committed(forged, publication(1))
        await twin.check()
    before = store.round_trips
    await twin.put_record(intent)
    assert store.round_trips - before == 2
    await twin.mark_published_and_committed(intent, publication(1))
    await twin.check()


@real_redis
@pytest.mark.parametrize("backend", ["redis"])
async def test_committed_hash_is_listpack_and_small_on_real_redis(
    raw: Redis, store: RedisMessageStore, outbox: RedisOutbox, namespace: str
) -> None:
    """Seed target: 100-byte body, committed hash ``listpack`` and MEMORY USAGE <= 256 bytes."""
    request = send("m-1", body=b"B" * 100)
    reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
    assert isinstance(reserved, ReserveCreated)
    intent = reserved.intent
    await store.put_record(intent)
    in_flight = await store.commit_hash_footprint(intent.key)
    assert in_flight is not None and in_flight.encoding == "hashtable"  # the 100-byte body is over 64
    await store.mark_published_and_committed(intent, await outbox.publish(intent))
    committed = await store.commit_hash_footprint(intent.key)
    key_name = Keys(namespace).commit(intent.key)
    print(
        f"\nin-flight hash: {in_flight.encoding}, {in_flight.memory_usage} B, {in_flight.fields} fields"
        f"\ncommitted hash: {committed and committed.encoding}, {committed and committed.memory_usage} B, "
        f"{committed and committed.fields} fields "
        f"(key name {len(key_name)} B, namespace {len(namespace)} chars)"
    )
    assert committed is not None
    assert committed.encoding == "listpack"
    assert committed.memory_usage <= 256
    assert await raw.object("ENCODING", key_name) == b"listpack"


# --- scripts: idempotent re-sends and a flushed script cache -------------------------------------


class ResendingClient:
    """A real client whose every script call reaches the server twice, as redis-py's retry does
    when a reply is lost after the script ran; the caller sees the second reply."""

    def __init__(self, client: Redis) -> None:
        self._client = client

    async def execute_command(self, *args: Any) -> Any:
        result = await self._client.execute_command(*args)
        if args[0] in ("EVALSHA", "EVAL"):
            result = await self._client.execute_command(*args)
        return result

    async def aclose(self) -> None:
        await self._client.aclose()


async def test_every_script_converges_when_it_runs_twice(
    backend: str, namespace: str, membership: InMemoryMembership
) -> None:
    store = RedisMessageStore(ResendingClient(new_client(backend)), namespace, membership)  # type: ignore[arg-type]
    outbox = RedisOutbox(ResendingClient(new_client(backend)), namespace)  # type: ignore[arg-type]
    try:
        twin = Twin(store, membership)
        first = await twin.created(send("m-1"))  # ReserveCreated, not InFlight: the token matches
        second = await twin.created(send("m-2"))
        assert (first.coordinates.message_seq, second.coordinates.message_seq) == (1, 2)
        await twin.put_record(first)
        pub = await outbox.publish(first)
        assert await outbox.publish(first) == pub
        assert isinstance(await twin.mark_published_and_committed(first, pub), CommittedMessage)
        await twin.put_record(second)
        await twin.mark_outbox_published(second, await outbox.publish(second))
        assert isinstance(await twin.mark_committed(second), CommittedMessage)
        page = await twin.history(query())
        assert len(page.entries) == 2
        await twin.check()
    finally:
        await store.close()
        await outbox.close()


async def test_scripts_survive_a_flushed_script_cache(
    raw: Redis, store: RedisMessageStore, backend: str, membership: InMemoryMembership
) -> None:
    twin = Twin(store, membership)
    await twin.created(send("m-1"))
    await raw.script_flush()
    before = store.round_trips
    intent = await twin.created(send("m-2"))
    # EVALSHA refused with NOSCRIPT, then EVAL. On a shared real server another client may have
    # reloaded the script in between, so only fakeredis (one per process) pins the count.
    assert store.round_trips - before == 2 or (backend == "redis" and store.round_trips - before == 1)
    await raw.script_flush()
    await twin.put_record(intent)
    await twin.put_record(intent)
    await twin.check()


async def test_round_trips_per_call(store: RedisMessageStore, outbox: RedisOutbox, backend: str) -> None:
    """One round trip per store call once the scripts are cached (the benchmark reads the same)."""
    warm = send("m-warm")
    reserved = await store.reserve(warm, delivery_for(warm), candidate_for(warm))
    assert isinstance(reserved, ReserveCreated)
    await store.put_record(reserved.intent)
    await store.mark_published_and_committed(reserved.intent, await outbox.publish(reserved.intent))
    await store.scan_recoverable_commits(T0, 1)
    await store.history_page(query())

    request = send("m-1")
    costs: dict[str, int] = {}

    async def cost(name: str, call: Callable[[], Awaitable[Any]]) -> Any:
        before = store.round_trips + outbox.round_trips
        result = await outcome(call())
        costs[name] = store.round_trips + outbox.round_trips - before
        return result

    reserved = await cost(
        "reserve", lambda: store.reserve(request, delivery_for(request), candidate_for(request))
    )
    intent = reserved.intent
    await cost(
        "reserve (repeat)", lambda: store.reserve(request, delivery_for(request), candidate_for(request))
    )
    await cost("put_record", lambda: store.put_record(intent))
    pub = await cost("outbox.publish", lambda: outbox.publish(intent))
    await cost("mark_outbox_published", lambda: store.mark_outbox_published(intent, pub))
    await cost("mark_committed", lambda: store.mark_committed(intent))
    await cost("mark_published_and_committed", lambda: store.mark_published_and_committed(intent, pub))
    await cost("load_commit", lambda: store.load_commit(intent.key, CONVERSATION))
    await cost("load_commit_for_request", lambda: store.load_commit_for_request(request))
    await cost("scan_recoverable_commits", lambda: store.scan_recoverable_commits(T0 + 1, 100))
    await cost("history_page", lambda: store.history_page(query()))
    await cost("readiness", store.readiness)
    print(f"\nround trips per call ({backend}): {costs}")
    assert set(costs.values()) == {1}


# --- errors stop at the door ---------------------------------------------------------------------


async def test_keys_of_the_wrong_type_are_corrupt_and_nothing_half_written(
    raw: Redis, store: RedisMessageStore, namespace: str, membership: InMemoryMembership
) -> None:
    """Scripts check every key's type before their first write (Redis does not roll back)."""
    keys = Keys(namespace)
    twin = Twin(store, membership)
    intent = await twin.created(send("m-1"))

    # The commit hash itself is a string: the plain HGETALL hits WRONGTYPE, the scripts refuse.
    wrong = send("m-wrong")
    await raw.set(keys.commit(wrong.commit_key), "not a hash")
    assert_clean(await outcome(store.load_commit(wrong.commit_key, CONVERSATION)), StoreErrorKind.CORRUPT)
    assert_clean(await outcome(store.load_commit_for_request(wrong)), StoreErrorKind.CORRUPT)
    assert_clean(
        await outcome(store.reserve(wrong, delivery_for(wrong), candidate_for(wrong))), StoreErrorKind.CORRUPT
    )

    # The recovery index is a string: reserve must not have bumped either counter.
    await raw.rename(keys.recovery, b"elsewhere-" + namespace.encode())
    await raw.set(keys.recovery, "not a zset")
    fresh = send("m-2")
    assert_clean(
        await outcome(store.reserve(fresh, delivery_for(fresh), candidate_for(fresh))), StoreErrorKind.CORRUPT
    )
    assert await raw.get(keys.message_seq(TENANT)) == b"1"
    assert await raw.get(keys.conversation_seq(TENANT, CONVERSATION)) == b"1"
    await raw.delete(keys.recovery)
    await raw.rename(b"elsewhere-" + namespace.encode(), keys.recovery)

    # The history index is a hash: put_record must leave the commit RESERVED.
    await raw.hset(keys.history_index(TENANT, CONVERSATION), "x", "y")
    assert_clean(await outcome(store.put_record(intent)), StoreErrorKind.CORRUPT)
    assert await raw.hget(keys.commit(intent.key), "s") == b"1"
    assert_clean(await outcome(store.history_page(query())), StoreErrorKind.CORRUPT)
    await raw.delete(keys.history_index(TENANT, CONVERSATION))

    # A counter that is not a number.
    await raw.set(keys.conversation_seq(TENANT, CONVERSATION), "many")
    assert_clean(
        await outcome(store.reserve(fresh, delivery_for(fresh), candidate_for(fresh))), StoreErrorKind.CORRUPT
    )
    assert await raw.get(keys.message_seq(TENANT)) == b"1"
    await raw.set(keys.conversation_seq(TENANT, CONVERSATION), "1")

    await twin.put_record(intent)
    await twin.check()


async def test_undecodable_commit_hash_is_corrupt(
    raw: Redis, store: RedisMessageStore, namespace: str
) -> None:
    request = send("m-1")
    reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
    assert isinstance(reserved, ReserveCreated)
    name = Keys(namespace).commit(request.commit_key)
    await raw.hset(name, "d", b"{not json")
    assert_clean(await outcome(store.load_commit_for_request(request)), StoreErrorKind.CORRUPT)
    assert_clean(await outcome(store.scan_recoverable_commits(T0 + 1, 10)), StoreErrorKind.CORRUPT)
    await raw.hset(name, "s", b"9")
    assert_clean(await outcome(store.put_record(reserved.intent)), StoreErrorKind.CORRUPT)


async def test_a_script_error_reply_is_unavailable_without_its_text(backend: str) -> None:
    gateway = Gateway(new_client(backend))
    try:
        failing = Script("failing", b"return redis.error_reply('ERR something internal at rt:{x}')")
        assert_clean(await outcome(gateway.run(failing, [], [])), StoreErrorKind.UNAVAILABLE)
        broken = Script("broken", b"this is not lua")
        assert_clean(await outcome(gateway.run(broken, [], [])), StoreErrorKind.UNAVAILABLE)
    finally:
        await gateway.close()


def every_call(store: RedisMessageStore, outbox: RedisOutbox) -> dict[str, Callable[[], Awaitable[Any]]]:
    request = send("m-1")
    intent = CommitIntent(
        request.commit_key,
        b"QIMD" + bytes(32),
        MessageCoordinates(1, 1, T0),
        candidate_for(request).record,
        delivery_for(request),
    )
    return {
        "reserve": lambda: store.reserve(request, delivery_for(request), candidate_for(request)),
        "put_record": lambda: store.put_record(intent),
        "mark_outbox_published": lambda: store.mark_outbox_published(intent, publication(1)),
        "mark_published_and_committed": lambda: store.mark_published_and_committed(intent, publication(1)),
        "mark_committed": lambda: store.mark_committed(intent),
        "load_commit": lambda: store.load_commit(intent.key, CONVERSATION),
        "load_commit_for_request": lambda: store.load_commit_for_request(request),
        "scan_recoverable_commits": lambda: store.scan_recoverable_commits(T0, 10),
        "history_page": lambda: store.history_page(query()),
        "readiness": store.readiness,
        "outbox.publish": lambda: outbox.publish(intent),
        "outbox.readiness": outbox.readiness,
    }


async def assert_every_call_unavailable(store: RedisMessageStore, outbox: RedisOutbox) -> None:
    for name, call in every_call(store, outbox).items():
        try:
            await call()
        except MessageStoreError as error:
            assert_clean(error, StoreErrorKind.UNAVAILABLE)
        else:
            pytest.fail(f"{name} succeeded against a server that is down")


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    yield port


async def test_unreachable_server_is_unavailable_everywhere(
    closed_port: int, namespace: str, membership: InMemoryMembership
) -> None:
    url = f"redis://127.0.0.1:{closed_port}/0"
    store = await impls.redis.open_redis_store(namespace, membership, url)
    outbox = await impls.redis.open_redis_outbox(namespace, url)
    try:
        await assert_every_call_unavailable(store, outbox)
    finally:
        await store.close()
        await outbox.close()


@pytest.mark.parametrize("backend", ["fakeredis"])
async def test_fakeredis_down_and_back(store: RedisMessageStore, outbox: RedisOutbox) -> None:
    """Readiness follows the server: fakeredis's own switch takes it down and brings it back
    (the real server's version is test_real_redis_down_and_back)."""
    server = impls.redis._fake_server
    assert server is not None
    await store.readiness()
    server.connected = False
    try:
        await assert_every_call_unavailable(store, outbox)
    finally:
        server.connected = True
    await store.readiness()
    await outbox.readiness()


@attrs.define
class TcpRelay:
    """A loopback TCP relay in front of the real server, so a test can cut the network and restore
    it while the store keeps its client (a real network path, no fake)."""

    target: tuple[str, int]
    port: int = 0
    _server: asyncio.Server | None = None
    _writers: list[asyncio.StreamWriter] = attrs.field(factory=list)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, upstream_writer]

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@real_redis
async def test_real_redis_down_and_back(namespace: str, membership: InMemoryMembership) -> None:
    """C-PRE-06: readiness fails while the server cannot be reached and recovers when it can."""
    target = urlsplit(redis_url())
    relay = TcpRelay((target.hostname or "127.0.0.1", target.port or 6379))
    await relay.start()
    url = f"redis://127.0.0.1:{relay.port}{target.path}"
    store = await impls.redis.open_redis_store(namespace, membership, url)
    outbox = await impls.redis.open_redis_outbox(namespace, url)
    try:
        await store.readiness()
        await outbox.readiness()
        await relay.stop()
        await assert_every_call_unavailable(store, outbox)
        await relay.start()
        await store.readiness()
        await outbox.readiness()
        request = send("m-1")
        assert isinstance(
            await store.reserve(request, delivery_for(request), candidate_for(request)), ReserveCreated
        )
    finally:
        await store.close()
        await outbox.close()
        await relay.stop()


async def test_namespaces_are_isolated(backend: str, membership: InMemoryMembership) -> None:
    one = RedisMessageStore(new_client(backend), f"iso-{uuid.uuid4().hex[:8]}", membership)
    two = RedisMessageStore(new_client(backend), f"iso-{uuid.uuid4().hex[:8]}", membership)
    try:
        request = send("m-1")
        for opened in (one, two):
            reserved = await opened.reserve(request, delivery_for(request), candidate_for(request))
            assert isinstance(reserved, ReserveCreated) and reserved.intent.coordinates.message_seq == 1
        await one.put_record(reserved.intent)
        assert len((await two.history_page(query())).entries) == 0
    finally:
        await one.close()
        await two.close()


async def test_a_namespace_cannot_break_the_hash_tag(membership: InMemoryMembership) -> None:
    with pytest.raises(MessageStoreError) as refused:
        RedisMessageStore(fakeredis_client(), "a}b", membership)
    assert refused.value.kind is StoreErrorKind.INVALID_ARGUMENT


async def test_history_expiry_uses_exact_integers(
    raw: Redis, store: RedisMessageStore, membership: InMemoryMembership
) -> None:
    """Expiry is compared as decimal integers in the script, exact beyond 2**53."""
    twin = Twin(store, membership)
    base = 2**60
    request = send("m-1")
    intent = await twin.created(request, at=base)
    await twin.commit(intent, publication(1))
    expiry = base + 60_000
    for as_of in (expiry - 1, expiry, expiry + 1, -(2**70), 2**70):
        for direction in HistoryDirection:
            await twin.history(HistoryQuery(TENANT, CONVERSATION, "bob", direction, None, 10, 1000, as_of))
