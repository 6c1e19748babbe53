"""The CQL backend on a real Cassandra: what the contract tests cannot see from outside.

Sequence allocation under concurrency, the two-step commit's failure point, unknown outcomes of
lightweight transactions (settled by SERIAL reads), the compact COMMITTED row, readiness, and
the exception boundary. Faults come from seams (a store subclass that loses a reply after the
statement really ran, or fails before sending it) on the live server; nothing stands in for it.

The translation tests build driver exceptions directly: that is the one place it is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import pytest
from cassandra import (
    ConsistencyLevel,
    InvalidRequest,
    OperationTimedOut,
    ReadTimeout,
    Unavailable,
    WriteFailure,
    WriteTimeout,
    WriteType,
)
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import ErrorMessage

from impls.api import InMemoryMembership
from impls.cql import CqlMessageStore, CqlOutbox, CqlSettings, Operation, shutdown_sessions, translate
from impls.cql._bridge import Page, execute
from impls.cql._session import open_keyspace
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryQuery,
    LoadedCommitted,
    LoadedInFlight,
    MessageContent,
    MessageRecord,
    MessageStoreError,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
    ReserveCreated,
    ReserveInFlight,
    StoreErrorKind,
    StoreState,
)
from model.commit import history_page as model_history_page
from model.commit import mark_committed as model_mark_committed
from model.commit import mark_outbox_published as model_mark_outbox_published
from model.commit import put_record as model_put_record
from model.commit import reserve as model_reserve

TENANT = "t1"
CONVERSATION = "c1"
MEMBERS = frozenset({"alice", "bob", "carol"})
T0 = 1_700_000_000_000
RETENTION = 60_000

cassandra = pytest.mark.service("cassandra")


def send(
    cmid: str, *, sender: str = "alice", body: bytes = b"hello", conversation: str = CONVERSATION
) -> AuthenticatedSend:
    return AuthenticatedSend(
        tenant=TENANT,
        sender=sender,
        device="d1",
        conversation=conversation,
        client_message_id=cmid,
        content=MessageContent(MessageType.TEXT, body),
    )


def delivery(request: AuthenticatedSend, retention_ms: int = RETENTION) -> FrozenDeliveryInput:
    return FrozenDeliveryInput(request.conversation, tuple(sorted(MEMBERS)), 1, retention_ms)


def candidate(request: AuthenticatedSend, accepted_at_ms: int = T0) -> ReserveCandidate:
    return ReserveCandidate(MessageRecord.from_send(request), accepted_at_ms)


def directory() -> InMemoryMembership:
    members = InMemoryMembership()
    members.set_members(TENANT, CONVERSATION, MEMBERS)
    members.set_members(TENANT, "c2", MEMBERS)
    return members


def fresh_namespace() -> str:
    return f"cql-{uuid.uuid4().hex[:12]}"


@pytest.fixture(name="store")
async def cql_store() -> AsyncIterator[CqlMessageStore]:
    """A CQL store in a fresh namespace (this module's own; the conftest one spans backends)."""
    opened = CqlMessageStore(fresh_namespace(), directory())
    yield opened
    await opened.close()


async def reserve_new(store: CqlMessageStore, request: AuthenticatedSend, at: int = T0) -> CommitIntent:
    result = await store.reserve(request, delivery(request), candidate(request, at))
    assert isinstance(result, ReserveCreated), result
    return result.intent


async def commit(store: CqlMessageStore, outbox: CqlOutbox, request: AuthenticatedSend) -> CommittedMessage:
    intent = await reserve_new(store, request)
    await store.put_record(intent)
    publication = await outbox.publish(intent)
    await store.mark_outbox_published(intent, publication)
    return await store.mark_committed(intent)


async def raw_rows(store: CqlMessageStore, cql: str, params: tuple[object, ...]) -> Page:
    """An observer reading the backend directly (bypassing the store API) to see what it wrote."""
    keyspace = await open_keyspace(CqlSettings())
    prepared = keyspace.session.prepare(cql.format(ks=keyspace.settings.keyspace))
    return await execute(keyspace.session, prepared.bind(params), timeout=10)


# --- sequence allocation ------------------------------------------------------------------------


def workers(store: CqlMessageStore, count: int = 4) -> list[CqlMessageStore]:
    """Stores on one namespace that do not queue behind each other, as separate processes would.

    (One store sends one Paxos round per tenant at a time; several stores really race.)
    """
    return [store, *(CqlMessageStore(store.namespace, directory()) for _ in range(count - 1))]


@cassandra
async def test_concurrent_reserves_of_one_key_allocate_once(store: CqlMessageStore) -> None:
    request = send("m1")
    racers = workers(store)
    results = await asyncio.gather(
        *(
            racers[i % len(racers)].reserve(request, delivery(request), candidate(request, T0 + i))
            for i in range(16)
        )
    )
    created = [r for r in results if isinstance(r, ReserveCreated)]
    in_flight = [r for r in results if isinstance(r, ReserveInFlight)]
    assert len(created) == 1 and len(in_flight) == 15
    intent = created[0].intent
    assert {r.intent for r in in_flight} == {intent}  # the first accepted_at and delivery win
    assert (intent.coordinates.message_seq, intent.coordinates.conversation_seq) == (1, 1)
    # No number was burnt by the fifteen losers: the next key gets 2.
    following = await reserve_new(store, send("m2"))
    assert (following.coordinates.message_seq, following.coordinates.conversation_seq) == (2, 2)


@cassandra
async def test_concurrent_reserves_of_many_keys_are_dense(store: CqlMessageStore) -> None:
    # 24 keys, each reserved three times at once, spread over two conversations of one tenant.
    requests = [send(f"m{i}", conversation="c1" if i % 3 else "c2") for i in range(24)]
    attempts = [r for r in requests for _ in range(3)]
    racers = workers(store)
    results = await asyncio.gather(
        *(racers[i % len(racers)].reserve(r, delivery(r), candidate(r)) for i, r in enumerate(attempts))
    )
    by_key: dict[CommitKey, set[CommitIntent]] = {}
    for result in results:
        assert isinstance(result, ReserveCreated | ReserveInFlight)
        by_key.setdefault(result.intent.key, set()).add(result.intent)
    assert all(len(intents) == 1 for intents in by_key.values())
    intents = [next(iter(intents)) for intents in by_key.values()]
    assert sum(isinstance(r, ReserveCreated) for r in results) == 24
    assert sorted(i.coordinates.message_seq for i in intents) == list(range(1, 25))
    for conversation in ("c1", "c2"):
        seqs = sorted(i.coordinates.conversation_seq for i in intents if i.conversation == conversation)
        assert seqs == list(range(1, len(seqs) + 1))
        page = await store.history_page(
            HistoryQuery(TENANT, conversation, "alice", HistoryDirection.BEFORE, None, 10, 1024, T0)
        )
        assert page.available_through == len(seqs)


@cassandra
async def test_round_trips_per_call(store: CqlMessageStore) -> None:
    """The statement budget of each call (the benchmark reports the same counts)."""
    outbox = CqlOutbox(store.namespace)
    request = send("m1")
    counts: dict[str, int] = {}

    async def count(name: str, call: Any) -> Any:
        before = store.round_trips
        result = await call
        counts[name] = store.round_trips - before
        return result

    intent = (await count("reserve", store.reserve(request, delivery(request), candidate(request)))).intent
    await count("reserve again", store.reserve(request, delivery(request), candidate(request)))
    await count("put_record", store.put_record(intent))
    await count("put_record again", store.put_record(intent))
    publication = await outbox.publish(intent)
    await count("mark_outbox_published", store.mark_outbox_published(intent, publication))
    await count("mark_committed", store.mark_committed(intent))
    await count("load_commit", store.load_commit(intent.key, CONVERSATION))
    await count("readiness", store.readiness())
    assert counts == {
        "reserve": 3,  # SERIAL read, recovery hint, conditional batch
        "reserve again": 1,
        "put_record": 3,  # SERIAL read, history row, conditional update
        "put_record again": 1,
        "mark_outbox_published": 2,
        "mark_committed": 4,  # SERIAL read, history expiry, conditional update, hint delete
        "load_commit": 1,
        "readiness": 1,
    }


# --- the two-step commit ----------------------------------------------------------------------


class LosesSecondStep(CqlMessageStore):
    """A seam: ``mark_committed`` fails before reaching the server, as a dropped connection would."""

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: second step lost", intent.key)


@cassandra
async def test_two_step_commit_keeps_outboxed_when_the_second_step_fails() -> None:
    namespace = fresh_namespace()
    failing = LosesSecondStep(namespace, directory())
    assert failing.capabilities.atomic_publish_and_commit is False
    outbox = CqlOutbox(namespace)
    intent = await reserve_new(failing, send("m1"))
    await failing.put_record(intent)
    publication = await outbox.publish(intent)
    with pytest.raises(MessageStoreError) as caught:
        await failing.mark_published_and_committed(intent, publication)
    assert caught.value.kind is StoreErrorKind.UNAVAILABLE
    # The first step is durable and is the recoverable fact resume continues from.
    loaded = await failing.load_commit(intent.key, CONVERSATION)
    assert loaded == LoadedInFlight(intent, CommitStage.OUTBOXED, publication)
    healthy = CqlMessageStore(namespace, directory())
    message = await healthy.mark_committed(intent)
    assert message == CommittedMessage(intent.key, CONVERSATION, intent.coordinates, publication)
    # Publishing again (a committer that died at M-COMMIT-04) returns the same publication.
    assert await outbox.publish(intent) == publication


@cassandra
async def test_mark_published_and_committed_refuses_a_second_publication(store: CqlMessageStore) -> None:
    intent = await reserve_new(store, send("m1"))
    await store.put_record(intent)
    first = OutboxPublication("s", "1")
    await store.mark_published_and_committed(intent, first)
    with pytest.raises(MessageStoreError) as caught:
        await store.mark_published_and_committed(intent, OutboxPublication("s", "2"))
    assert caught.value.kind is StoreErrorKind.PUBLICATION_MISMATCH
    replay = await store.mark_published_and_committed(intent, first)
    assert replay.publication == first


# --- what COMMITTED keeps ---------------------------------------------------------------------


@cassandra
async def test_committed_row_drops_the_body_and_the_recovery_hint(store: CqlMessageStore) -> None:
    outbox = CqlOutbox(store.namespace)
    request = send("m1", body=b"x" * 100)
    message = await commit(store, outbox, request)
    key = request.commit_key
    ledger = await raw_rows(
        store,
        "SELECT stage, identity, intent, reserve_token, message_seq, pub_entry FROM {ks}.ledger "
        "WHERE ns = ? AND tenant = ? AND sender = ? AND cmid = ?",
        (store.namespace, key.tenant, key.sender, key.client_message_id),
    )
    (row,) = ledger.rows
    assert row["stage"] == CommitStage.COMMITTED.value
    assert row["intent"] is None and row["reserve_token"] is None
    assert row["identity"] and row["message_seq"] == 1
    assert row["pub_entry"] == message.publication.entry_id
    hints = await raw_rows(store, "SELECT cmid FROM {ks}.recovery WHERE ns = ?", (store.namespace,))
    assert hints.rows == ()
    history = await raw_rows(
        store,
        "SELECT expires_at_ms FROM {ks}.history WHERE ns = ? AND tenant = ? AND conversation = ?",
        (store.namespace, TENANT, CONVERSATION),
    )
    assert [r["expires_at_ms"] for r in history.rows] == [T0 + RETENTION]
    assert await store.scan_recoverable_commits(T0 + 1, 10) == []


@cassandra
async def test_undecodable_row_is_corrupt(store: CqlMessageStore) -> None:
    intent = await reserve_new(store, send("m1"))
    key = intent.key
    await raw_rows(
        store,
        "UPDATE {ks}.ledger SET intent = ? WHERE ns = ? AND tenant = ? AND sender = ? AND cmid = ?",
        (b"\x07garbage", store.namespace, key.tenant, key.sender, key.client_message_id),
    )
    with pytest.raises(MessageStoreError) as caught:
        await store.load_commit(key, CONVERSATION)
    assert caught.value.kind is StoreErrorKind.CORRUPT
    assert "ledger" not in str(caught.value) and "intent" not in caught.value.detail


# --- unknown outcomes, on the live server -------------------------------------------------------


@attrs.define
class LostReplies:
    """Which conditional writes the seam disturbs, and how, consumed in order."""

    after_applying: int = 0  # the statement runs, its reply is lost (OUTCOME_UNKNOWN)
    before_applying: int = 0  # the statement never leaves (OUTCOME_UNKNOWN all the same)
    reads_fail: bool = False  # every read fails once a reply was lost


class UnknownOutcomes(CqlMessageStore):
    """A seam at the statement boundary: the server is real, only the replies are disturbed."""

    def __init__(self, namespace: str, faults: LostReplies) -> None:
        super().__init__(namespace, directory())
        self.faults = faults
        self.lost = 0

    async def _send(
        self, keyspace: Any, statement: Any, operation: Operation, key: Any, paging_state: Any = None
    ) -> Page:
        unknown = MessageStoreError(StoreErrorKind.OUTCOME_UNKNOWN, "injected", key)
        if operation is Operation.CONDITIONAL_WRITE:
            if self.faults.before_applying > 0:
                self.faults.before_applying -= 1
                self.lost += 1
                raise unknown
            if self.faults.after_applying > 0:
                self.faults.after_applying -= 1
                await super()._send(keyspace, statement, operation, key, paging_state)
                self.lost += 1
                raise unknown
        if operation is Operation.READ and self.faults.reads_fail and self.lost:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected", key)
        return await super()._send(keyspace, statement, operation, key, paging_state)


@cassandra
@pytest.mark.parametrize("where", ["after_applying", "before_applying"])
async def test_lost_reserve_reply_is_settled_without_a_second_number(where: str) -> None:
    namespace = fresh_namespace()
    faults = LostReplies()
    setattr(faults, where, 1)
    disturbed = UnknownOutcomes(namespace, faults)
    request = send("m1")
    result = await disturbed.reserve(request, delivery(request), candidate(request))
    assert disturbed.lost == 1
    # Applied or not, the caller learns it created the commit, with the first numbers.
    assert isinstance(result, ReserveCreated)
    assert result.intent.coordinates.message_seq == 1
    following = await reserve_new(CqlMessageStore(namespace, directory()), send("m2"))
    assert following.coordinates.message_seq == 2


@cassandra
@pytest.mark.parametrize("where", ["after_applying", "before_applying"])
async def test_lost_transition_replies_converge(where: str) -> None:
    namespace = fresh_namespace()
    plain = CqlMessageStore(namespace, directory())
    intent = await reserve_new(plain, send("m1"))
    disturbed = UnknownOutcomes(namespace, LostReplies())
    publication = OutboxPublication("s", "1")
    for step in ("put_record", "mark_outbox_published", "mark_committed"):
        setattr(disturbed.faults, where, 1)
        if step == "put_record":
            await disturbed.put_record(intent)
        elif step == "mark_outbox_published":
            await disturbed.mark_outbox_published(intent, publication)
        else:
            message = await disturbed.mark_committed(intent)
            assert message.publication == publication
    assert disturbed.lost == 3
    assert await plain.load_commit(intent.key, CONVERSATION) == LoadedCommitted(
        CommittedMessage(intent.key, CONVERSATION, intent.coordinates, publication)
    )
    assert await plain.scan_recoverable_commits(T0 + 1, 10) == []


@cassandra
async def test_unsettled_conditional_write_is_outcome_unknown() -> None:
    namespace = fresh_namespace()
    intent = await reserve_new(CqlMessageStore(namespace, directory()), send("m1"))
    disturbed = UnknownOutcomes(namespace, LostReplies(after_applying=1, reads_fail=True))
    with pytest.raises(MessageStoreError) as caught:
        await disturbed.put_record(intent)
    assert caught.value.kind is StoreErrorKind.OUTCOME_UNKNOWN
    request = send("m2")
    disturbed = UnknownOutcomes(namespace, LostReplies(before_applying=1, reads_fail=True))
    with pytest.raises(MessageStoreError) as caught:
        await disturbed.reserve(request, delivery(request), candidate(request))
    assert caught.value.kind is StoreErrorKind.OUTCOME_UNKNOWN


@cassandra
async def test_outbox_publish_is_idempotent_under_concurrency(store: CqlMessageStore) -> None:
    outbox = CqlOutbox(store.namespace)
    intent = await reserve_new(store, send("m1"))
    publications = await asyncio.gather(*(outbox.publish(intent) for _ in range(8)))
    assert len(set(publications)) == 1
    assert publications[0].stream == outbox.stream


# --- history against the model -------------------------------------------------------------------


@cassandra
async def test_history_pages_match_the_model(store: CqlMessageStore) -> None:
    """Expiry at as_of_ms, anchors both ways, limits, byte budgets and the bounds, as the model."""
    state = StoreState()
    members = MEMBERS
    outbox = CqlOutbox(store.namespace)
    bodies = [b"", b"a" * 10, b"b" * 30, b"c" * 5, b"d" * 50, b"e" * 1, b"f" * 20, b"g" * 8]
    for i, body in enumerate(bodies):
        request = send(f"m{i}", sender="bob" if i % 2 else "alice", body=body)
        d = delivery(request, retention_ms=1_000 * (i % 3 + 1))
        c = candidate(request, T0 + 100 * i)
        state, expected = model_reserve(state, request, d, c)
        result = await store.reserve(request, d, c)
        assert result == expected
        assert isinstance(result, ReserveCreated)
        intent = result.intent
        if i == len(bodies) - 1:
            continue  # stays RESERVED: allocated, not readable
        state, _ = model_put_record(state, intent)
        await store.put_record(intent)
        if i % 4 == 3:
            continue  # stays RECORDED: readable, never expires
        publication = await outbox.publish(intent)
        state, _ = model_mark_outbox_published(state, intent, publication)
        state, _ = model_mark_committed(state, intent)
        await store.mark_outbox_published(intent, publication)
        await store.mark_committed(intent)

    checked = 0
    for direction in HistoryDirection:
        for anchor in (None, 0, 1, 3, 5, 8, 9):
            for limit, max_bytes in ((1, 1), (2, 1024), (3, 25), (100, 40), (100, 1 << 20)):
                for as_of in (T0, T0 + 1_050, T0 + 2_500, T0 + 10_000):
                    query = HistoryQuery(
                        TENANT, CONVERSATION, "carol", direction, anchor, limit, max_bytes, as_of
                    )
                    page = model_history_page(state, query, members)
                    assert await store.history_page(query) == page, query
                    checked += 1
    assert checked == 2 * 7 * 5 * 4


@cassandra
async def test_history_refuses_non_members_before_reading(store: CqlMessageStore) -> None:
    before = store.round_trips
    with pytest.raises(MessageStoreError) as caught:
        await store.history_page(
            HistoryQuery(TENANT, CONVERSATION, "mallory", HistoryDirection.BEFORE, None, 10, 1024, T0)
        )
    assert caught.value.kind is StoreErrorKind.NOT_A_MEMBER
    assert store.round_trips == before


# --- readiness and the exception boundary -------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[str]:
    """A loopback port nothing listens on (bound, never listened, so connects are refused)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


async def every_call_fails_with(store: CqlMessageStore, kind: StoreErrorKind) -> None:
    request = send("m1")
    calls: list[Any] = [
        store.readiness(),
        store.reserve(request, delivery(request), candidate(request)),
        store.load_commit(request.commit_key, CONVERSATION),
        store.load_commit_for_request(request),
        store.scan_recoverable_commits(T0, 10),
        store.history_page(
            HistoryQuery(TENANT, CONVERSATION, "alice", HistoryDirection.AFTER, None, 10, 1024, T0)
        ),
    ]
    for call in calls:
        with pytest.raises(MessageStoreError) as caught:
            await call
        assert type(caught.value) is MessageStoreError and caught.value.kind is kind
        # The driver's exception is neither the cause nor shown as context.
        assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_readiness_fails_on_a_closed_port(closed_port: str) -> None:
    store = CqlMessageStore(fresh_namespace(), directory(), CqlSettings(contact=closed_port))
    await every_call_fails_with(store, StoreErrorKind.UNAVAILABLE)
    outbox = CqlOutbox("x", CqlSettings(contact=closed_port))
    with pytest.raises(MessageStoreError) as caught:
        await outbox.readiness()
    assert caught.value.kind is StoreErrorKind.UNAVAILABLE


@cassandra
async def test_readiness_queries_the_live_server_every_time(store: CqlMessageStore) -> None:
    for expected in (1, 2, 3):
        await store.readiness()
        assert store.round_trips == expected
    await CqlOutbox(store.namespace).readiness()


class LoopbackProxy:
    """A TCP forwarder to the real server that the test can take down and bring back.

    Going down closes the listening socket and aborts every forwarded connection, which is what
    the driver sees when the server dies; coming back listens on the same port again.
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def contact(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._links:
            writer.transport.abort()
        self._links.clear()
        self._server = None

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._links |= {writer, upstream_writer}

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
            sink.transport.abort()

        await asyncio.gather(
            pump(reader, upstream_writer), pump(upstream_reader, writer), return_exceptions=True
        )


async def eventually_ready(store: CqlMessageStore, within_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        try:
            await store.readiness()
            return
        except MessageStoreError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


@cassandra
async def test_readiness_fails_while_the_server_is_away_and_recovers() -> None:
    proxy = LoopbackProxy(CqlSettings().contact)
    await proxy.up()
    store = CqlMessageStore(fresh_namespace(), directory(), CqlSettings(contact=proxy.contact))
    try:
        await store.readiness()
        intent = await reserve_new(store, send("m1"))
        await proxy.down()
        with pytest.raises(MessageStoreError) as caught:
            await store.readiness()
        assert caught.value.kind is StoreErrorKind.UNAVAILABLE
        with pytest.raises(MessageStoreError) as caught:
            await store.put_record(intent)
        assert caught.value.kind is StoreErrorKind.UNAVAILABLE
        await proxy.up()
        # The shared session reconnects on its own (the driver's reconnection schedule).
        await eventually_ready(store, within_s=30)
        await store.put_record(intent)
        loaded = await store.load_commit(intent.key, CONVERSATION)
        assert isinstance(loaded, LoadedInFlight) and loaded.stage is CommitStage.RECORDED
    finally:
        shutdown_sessions(proxy.contact)
        with contextlib.suppress(AssertionError):
            await proxy.down()


@cassandra
@pytest.mark.parametrize(
    "settings",
    [
        CqlSettings(keyspace="k" * 60),  # longer than the server allows
        CqlSettings(keyspace="ratchet_bad_rf", replication={"class": "NoSuchStrategy"}),
        CqlSettings(keyspace="bad-name"),  # refused before it reaches DDL text
    ],
    ids=["too-long", "bad-strategy", "not-an-identifier"],
)
async def test_server_refusals_leave_as_store_errors(settings: CqlSettings) -> None:
    store = CqlMessageStore(fresh_namespace(), directory(), settings)
    await every_call_fails_with(store, StoreErrorKind.UNAVAILABLE)


# --- the translation table, with the driver's own exception classes -----------------------------


def cas_timeout() -> WriteTimeout:
    return WriteTimeout(
        "timeout",
        consistency=ConsistencyLevel.SERIAL,
        required_responses=1,
        received_responses=0,
        write_type=WriteType.CAS,
    )


@pytest.mark.parametrize(
    ("exc", "operation", "kind"),
    [
        (cas_timeout(), Operation.CONDITIONAL_WRITE, StoreErrorKind.OUTCOME_UNKNOWN),
        (
            OperationTimedOut(errors={"h": "t"}, last_host="h"),
            Operation.CONDITIONAL_WRITE,
            StoreErrorKind.OUTCOME_UNKNOWN,
        ),
        (
            WriteFailure("f", write_type=WriteType.CAS),
            Operation.CONDITIONAL_WRITE,
            StoreErrorKind.OUTCOME_UNKNOWN,
        ),
        (
            ErrorMessage(0x1700, "cas write unknown", None),
            Operation.CONDITIONAL_WRITE,
            StoreErrorKind.OUTCOME_UNKNOWN,
        ),
        (WriteTimeout("t", write_type=WriteType.SIMPLE), Operation.WRITE, StoreErrorKind.UNAVAILABLE),
        (
            WriteTimeout("t", write_type=WriteType.SIMPLE),
            Operation.CONDITIONAL_WRITE,
            StoreErrorKind.UNAVAILABLE,
        ),
        (OperationTimedOut(), Operation.READ, StoreErrorKind.UNAVAILABLE),
        (OperationTimedOut(), Operation.WRITE, StoreErrorKind.UNAVAILABLE),
        (
            NoHostAvailable("none", {"h": ConnectionRefusedError()}),
            Operation.CONDITIONAL_WRITE,
            StoreErrorKind.UNAVAILABLE,
        ),
        (
            Unavailable("u", consistency=ConsistencyLevel.QUORUM, required_replicas=2, alive_replicas=1),
            Operation.WRITE,
            StoreErrorKind.UNAVAILABLE,
        ),
        (ReadTimeout("r", data_retrieved=False), Operation.READ, StoreErrorKind.UNAVAILABLE),
        (InvalidRequest("unconfigured table ledger"), Operation.READ, StoreErrorKind.UNAVAILABLE),
        (ErrorMessage(0x2000, "line 1:7 syntax error", None), Operation.SETUP, StoreErrorKind.UNAVAILABLE),
        (ConnectionResetError("reset"), Operation.READ, StoreErrorKind.UNAVAILABLE),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(getattr(v, "value", v)),
)
def test_translation(exc: BaseException, operation: Operation, kind: StoreErrorKind) -> None:
    key = CommitKey(TENANT, "alice", "m1")
    translated = translate(exc, operation, key)
    assert type(translated) is MessageStoreError
    assert translated.kind is kind
    assert translated.key == key
    for leak in ("ledger", "syntax", "timeout", "info=", "cas write", "SELECT", str(exc)):
        assert not leak or leak not in translated.detail
    assert translate(translated, Operation.READ) is translated
