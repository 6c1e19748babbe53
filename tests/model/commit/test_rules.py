"""Example tests, one or more per contract rule, for the commit model's exact outcomes."""

from __future__ import annotations

import hashlib

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.commit import (
    FAULT_POINT_BEFORE,
    TRANSITIONS,
    AuthenticatedSend,
    CommitKey,
    CommitStage,
    CommitStep,
    CommittedMessage,
    FaultPoint,
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
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    StoreCapabilities,
    StoreErrorKind,
    StoreOperation,
    StoreState,
    canonical_identity,
    drop_namespace,
    fault_points_for,
    history_page,
    holds_data,
    identity_matches,
    is_valid_client_message_id,
    legacy_full_identity,
    load_commit,
    load_commit_for_request,
    mark_committed,
    mark_outbox_published,
    mark_published_and_committed,
    next_step,
    put_record,
    record_history_ahead,
    register_expiry_ahead,
    reserve,
    reserve_identity_digest,
    scan_recoverable_commits,
)
from tests.model.commit.strategies import candidate_for, delivery_for, sends

PUB = OutboxPublication("outbox", "1-0")
ATOMIC = StoreCapabilities(atomic_publish_and_commit=True)
TWO_STEP = StoreCapabilities(atomic_publish_and_commit=False)


def send(
    cmid: str = "m1", body: bytes = b"hello", conversation: str = "c1", **kw: object
) -> AuthenticatedSend:
    fields: dict[str, object] = {
        "tenant": "t1",
        "sender": "alice",
        "device": "d1",
        "conversation": conversation,
        "client_message_id": cmid,
        "content": MessageContent(MessageType.TEXT, body),
    }
    fields.update(kw)
    return AuthenticatedSend(**fields)  # type: ignore[arg-type]


def reserved(
    state: StoreState, request: AuthenticatedSend, at: int = 10
) -> tuple[StoreState, ReserveCreated]:
    new_state, outcome = reserve(state, request, delivery_for(request), candidate_for(request, at))
    assert isinstance(outcome, ReserveCreated)
    return new_state, outcome


def committed(
    state: StoreState, request: AuthenticatedSend, at: int = 10
) -> tuple[StoreState, CommittedMessage]:
    state, created = reserved(state, request, at)
    state, _ = put_record(state, created.intent)
    state, ack = mark_published_and_committed(state, created.intent, PUB)
    assert isinstance(ack, CommittedMessage)
    return state, ack


# C-PRE-01 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmid", ["", "a" * 65, "has space", "ü", "a/b", "x\n"])
def test_invalid_client_message_ids_are_refused(cmid: str) -> None:
    assert not is_valid_client_message_id(cmid)
    state, outcome = reserve(StoreState(), send(cmid), delivery_for(send()), candidate_for(send(cmid), 1))
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT
    assert state == StoreState()


@pytest.mark.parametrize("cmid", ["a", "A-1_b.c:d", "0" * 64])
def test_valid_client_message_ids(cmid: str) -> None:
    assert is_valid_client_message_id(cmid)


# C-PRE-02 / C-POST-02 ---------------------------------------------------------------------------
def test_repeat_reserve_keeps_first_delivery_and_timestamp() -> None:
    request = send()
    state, created = reserved(StoreState(), request, at=10)
    changed = FrozenDeliveryInput("c1", ("carol",), 7, 99)
    state2, again = reserve(state, request, changed, candidate_for(request, 50))
    assert again == ReserveInFlight(created.intent, CommitStage.RESERVED, None)
    assert again.intent.delivery == delivery_for(request)
    assert state2 == state


def test_candidate_must_be_the_canonical_record() -> None:
    request = send()
    other = MessageRecord.from_send(send(body=b"other"))
    state, outcome = reserve(StoreState(), request, delivery_for(request), ReserveCandidate(other, 1))
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT
    assert state == StoreState()


# C-PRE-03 / C-PRE-07 ----------------------------------------------------------------------------
DIFFERENT = {
    "device": {"device": "d2"},
    "conversation": {"conversation": "c2"},
    "content": {"content": MessageContent(MessageType.TEXT, b"changed")},
    "type": {"content": MessageContent(MessageType.IMAGE, b"hello")},
    "mentions": {"mentions": ("bob",)},
    "reply": {"reply_to": 3},
}


@pytest.mark.parametrize("field", sorted(DIFFERENT))
def test_conflicting_request_never_replays(field: str) -> None:
    state, ack = committed(StoreState(), send())
    conflicting = send(**DIFFERENT[field])
    assert conflicting.commit_key == send().commit_key
    outcome = load_commit_for_request(state, conflicting)
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.IDENTITY_CONFLICT
    after, reserved_again = reserve(
        state, conflicting, delivery_for(conflicting), candidate_for(conflicting, 20)
    )
    assert isinstance(reserved_again, MessageStoreError)
    assert reserved_again.kind is StoreErrorKind.IDENTITY_CONFLICT
    assert after == state
    assert load_commit_for_request(state, send()) == LoadedCommitted(ack)


def test_digest_is_domain_separated_and_headed() -> None:
    request = send()
    digest = reserve_identity_digest(request)
    assert digest[:4] == b"QIMD" and len(digest) == 36
    assert digest[4:] != hashlib.sha256(canonical_identity(request)).digest()
    assert digest[4:] == hashlib.sha256(b"QIMD\x00" + canonical_identity(request)).digest()


def test_legacy_full_identity_compared_byte_for_byte() -> None:
    request = send()
    legacy = legacy_full_identity(request)
    assert legacy.startswith(b"QIMC")
    assert identity_matches(legacy, request)
    assert not identity_matches(legacy, send(device="d2"))
    assert not identity_matches(legacy + b"\x00", request)
    assert not identity_matches(b"XXXX" + legacy[4:], request)


@given(sends, sends)
def test_canonical_encoding_is_injective(a: AuthenticatedSend, b: AuthenticatedSend) -> None:
    assert (canonical_identity(a) == canonical_identity(b)) == (a == b)
    assert (reserve_identity_digest(a) == reserve_identity_digest(b)) == (a == b)


def test_mentions_are_a_set() -> None:
    assert send(mentions=("bob", "alice", "bob")) == send(mentions=("alice", "bob"))


def test_none_differs_from_empty_custom_type() -> None:
    plain = send(content=MessageContent(MessageType.CUSTOM, b"x", None))
    empty = send(content=MessageContent(MessageType.CUSTOM, b"x", ""))
    assert canonical_identity(plain) != canonical_identity(empty)


# C-PRE-04 / C-POST-03 ---------------------------------------------------------------------------
def test_put_record_writes_the_record_and_converges() -> None:
    state, created = reserved(StoreState(), send(body=b"payload"))
    once, outcome = put_record(state, created.intent)
    assert outcome is None
    twice, outcome = put_record(once, created.intent)
    assert outcome is None and twice == once
    page = history_page(
        once,
        HistoryQuery("t1", "c1", "alice", HistoryDirection.BEFORE, None, 10, 100, 0),
        frozenset({"alice"}),
    )
    assert not isinstance(page, MessageStoreError)
    assert [e.body for e in page.entries] == [b"payload"]


def test_forged_intent_is_refused() -> None:
    state, created = reserved(StoreState(), send())
    forged = attrs.evolve(created.intent, record=MessageRecord.from_send(send(body=b"evil")))
    after, outcome = put_record(state, forged)
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INTENT_MISMATCH
    assert after == state


def test_unknown_key_is_not_found() -> None:
    _, created = reserved(StoreState(), send())
    _, outcome = put_record(StoreState(), created.intent)
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.NOT_FOUND


def test_mark_committed_needs_both_evidences() -> None:
    state, created = reserved(StoreState(), send())
    for _ in range(2):
        after, outcome = mark_committed(state, created.intent)
        assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.MISSING_EVIDENCE
        assert after == state
        state, _ = put_record(state, created.intent)
    state, outcome2 = mark_outbox_published(state, created.intent, PUB)
    assert outcome2 is None
    state, ack = mark_committed(state, created.intent)
    assert isinstance(ack, CommittedMessage) and ack.publication == PUB


def test_outbox_publication_idempotent_and_mismatch_refused() -> None:
    state, created = reserved(StoreState(), send())
    state, _ = put_record(state, created.intent)
    state, _ = mark_outbox_published(state, created.intent, PUB)
    same, outcome = mark_outbox_published(state, created.intent, PUB)
    assert outcome is None and same == state
    other, refused = mark_outbox_published(state, created.intent, OutboxPublication("outbox", "2-0"))
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.PUBLICATION_MISMATCH
    assert other == state


# C-POST-04 / C-POST-05 --------------------------------------------------------------------------
def test_atomic_commit_replays_and_refuses_without_partial_writes() -> None:
    state, created = reserved(StoreState(), send())
    refused_state, refused = mark_published_and_committed(state, created.intent, PUB)
    assert isinstance(refused, MessageStoreError) and refused.kind is StoreErrorKind.MISSING_EVIDENCE
    assert refused_state == state
    state, _ = put_record(state, created.intent)
    state, ack = mark_published_and_committed(state, created.intent, PUB)
    assert ack == CommittedMessage(created.intent.key, "c1", created.intent.coordinates, PUB)
    replay_state, replay = mark_published_and_committed(state, created.intent, PUB)
    assert replay == ack and replay_state == state
    other_state, other = mark_published_and_committed(state, created.intent, OutboxPublication("o", "2"))
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.PUBLICATION_MISMATCH
    assert other_state == state


def test_commit_removes_candidate_and_registers_expiry() -> None:
    request = send()
    state, created = reserved(StoreState(), request, at=100)
    assert scan_recoverable_commits(state, 101, 10) == [created.intent]
    state, _ = put_record(state, created.intent)
    state, _ = mark_published_and_committed(state, created.intent, PUB)
    assert scan_recoverable_commits(state, 10_000, 10) == []
    query = HistoryQuery("t1", "c1", "alice", HistoryDirection.AFTER, None, 10, 1000, 0)
    members = frozenset({"alice"})
    expires = 100 + delivery_for(request).retention_ms
    before = history_page(state, attrs.evolve(query, as_of_ms=expires - 1), members)
    at = history_page(state, attrs.evolve(query, as_of_ms=expires), members)
    assert not isinstance(before, MessageStoreError) and not isinstance(at, MessageStoreError)
    assert len(before.entries) == 1 and at.entries == ()
    assert at.available_from is None and at.available_through == 1  # expired, not lost


def test_expiry_registered_ahead_is_the_due_one_on_an_outboxed_commit_only() -> None:
    """C-POST-06 / C-POST-05: a two-step store may register the due expiry before OUTBOXED ->
    COMMITTED; the state it leaves is the commit unchanged with the expiry a commit would register."""
    request = send()
    state, created = reserved(StoreState(), request, at=100)
    assert register_expiry_ahead(state, created.intent) == state  # RESERVED: no entry to expire
    state, _ = put_record(state, created.intent)
    assert register_expiry_ahead(state, created.intent) == state  # RECORDED: no publication yet
    state, _ = mark_outbox_published(state, created.intent, PUB)
    ahead = register_expiry_ahead(state, created.intent)
    assert ahead.commits == state.commits
    committed_state, _ = mark_committed(state, created.intent)
    assert ahead.history == committed_state.history  # the very expiry the commit registers
    assert ahead != state
    other = attrs.evolve(created.intent, delivery=attrs.evolve(created.intent.delivery, retention_ms=1))
    assert register_expiry_ahead(state, other) == state  # not the reserved intent
    assert register_expiry_ahead(committed_state, created.intent) == committed_state


def test_history_recorded_ahead_is_the_recorded_entry_on_a_reserved_commit_only() -> None:
    """C-POST-11 / C-POST-06: a two-step store may write a reserved intent's history entry before
    RESERVED -> RECORDED; the state it leaves is the commit unchanged with the entry put_record writes."""
    request = send()
    state, created = reserved(StoreState(), request, at=100)
    ahead = record_history_ahead(state, created.intent)
    assert ahead.commits == state.commits and ahead != state
    recorded, _ = put_record(state, created.intent)
    assert ahead.history == recorded.history  # the very entry RECORDED shows
    query = HistoryQuery("t1", "c1", "alice", HistoryDirection.AFTER, None, 10, 1000, 0)
    members = frozenset({"alice"})
    assert history_page(ahead, query, members) == history_page(recorded, query, members)
    other = attrs.evolve(created.intent, delivery=attrs.evolve(created.intent.delivery, retention_ms=1))
    assert record_history_ahead(state, other) == state  # not the reserved intent
    assert record_history_ahead(recorded, created.intent) == recorded  # RECORDED: nothing ahead


# C-POST-01 --------------------------------------------------------------------------------------
def test_repeats_consume_no_sequence_numbers() -> None:
    state, first = committed(StoreState(), send("m1"))
    for _ in range(3):
        state, outcome = reserve(state, send("m1"), delivery_for(send()), candidate_for(send("m1"), 99))
        assert outcome == ReserveCommitted(first)
    state, second = reserved(state, send("m2"))
    assert second.intent.coordinates.conversation_seq == first.coordinates.conversation_seq + 1
    assert second.intent.coordinates.message_seq == first.coordinates.message_seq + 1


def test_message_seq_is_per_tenant_and_conversation_seq_per_conversation() -> None:
    state, a = reserved(StoreState(), send("m1", conversation="c1"))
    state, b = reserved(state, send("m2", conversation="c2"))
    state, c = reserved(state, send("m3", tenant="t2"))
    assert (a.intent.coordinates.message_seq, b.intent.coordinates.message_seq) == (1, 2)
    assert (a.intent.coordinates.conversation_seq, b.intent.coordinates.conversation_seq) == (1, 1)
    assert c.intent.coordinates.message_seq == 1


# C-PRE-09 / C-PRE-10 ----------------------------------------------------------------------------
def test_committed_keeps_only_ack_coordinates() -> None:
    state, ack = committed(StoreState(), send())
    entry = state.commits[send().commit_key]
    assert entry.intent is None and entry.publication == PUB
    assert load_commit(state, ack.key, "c1") == LoadedCommitted(ack)
    other = load_commit(state, ack.key, "c2")
    assert isinstance(other, MessageStoreError) and other.kind is StoreErrorKind.IDENTITY_CONFLICT
    assert load_commit(state, CommitKey("t1", "alice", "zz"), "c1") is None


def test_in_flight_loads_carry_stage_and_publication() -> None:
    state, created = reserved(StoreState(), send())
    state, _ = put_record(state, created.intent)
    state, _ = mark_outbox_published(state, created.intent, PUB)
    assert load_commit(state, created.intent.key, "c1") == LoadedInFlight(
        created.intent, CommitStage.OUTBOXED, PUB
    )


# C-POST-02 scan ---------------------------------------------------------------------------------
def test_scan_orders_oldest_first_then_key_and_bounds_items() -> None:
    state = StoreState()
    intents = {}
    for cmid, at in (("m3", 5), ("m1", 7), ("m2", 5)):
        state, created = reserved(state, send(cmid), at)
        intents[cmid] = created.intent
    assert scan_recoverable_commits(state, 100, 10) == [intents["m2"], intents["m3"], intents["m1"]]
    assert scan_recoverable_commits(state, 7, 10) == [intents["m2"], intents["m3"]]  # strictly older
    assert scan_recoverable_commits(state, 100, 1) == [intents["m2"]]
    for bad in (0, 1001):
        outcome = scan_recoverable_commits(state, 100, bad)
        assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT


# C-POST-12 a dropped namespace ------------------------------------------------------------------
def test_dropped_namespace_holds_nothing() -> None:
    state, created = reserved(StoreState(), send("m1"), 5)
    state, _ = put_record(state, created.intent)
    assert holds_data(state) and not holds_data(StoreState())
    dropped = drop_namespace(state)
    assert dropped == StoreState() and not holds_data(dropped)
    assert load_commit(dropped, created.intent.key, created.intent.conversation) is None
    assert scan_recoverable_commits(dropped, 100, 10) == []


# C-PRE-05 / C-POST-11 history -------------------------------------------------------------------
def _history_state() -> StoreState:
    state = StoreState()
    for i, body in enumerate((b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10), start=1):
        state, created = reserved(state, send(f"m{i}", body=body), at=i)
        if i != 3:  # m3 stays RESERVED: a hole in the history, not a loss
            state, _ = put_record(state, created.intent)
    return state


def _page(state: StoreState, **kw: object) -> object:
    fields: dict[str, object] = {
        "tenant": "t1",
        "conversation": "c1",
        "actor": "alice",
        "direction": HistoryDirection.BEFORE,
        "anchor": None,
        "limit": 10,
        "max_bytes": 1000,
        "as_of_ms": 0,
    }
    fields.update(kw)
    return history_page(state, HistoryQuery(**fields), frozenset({"alice"}))  # type: ignore[arg-type]


def test_history_authorizes_before_reading() -> None:
    outcome = _page(_history_state(), actor="mallory")
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.NOT_A_MEMBER


def test_history_directions_anchor_limit_bytes_and_bounds() -> None:
    state = _history_state()
    newest = _page(state)
    assert [e.coordinates.conversation_seq for e in newest.entries] == [4, 2, 1]  # type: ignore[attr-defined]
    assert newest.available_from == 1 and newest.available_through == 4  # type: ignore[attr-defined]
    after = _page(state, direction=HistoryDirection.AFTER, anchor=1, limit=1)
    assert [e.coordinates.conversation_seq for e in after.entries] == [2]  # type: ignore[attr-defined]
    assert after.has_more  # type: ignore[attr-defined]
    capped = _page(state, max_bytes=15)
    assert len(capped.entries) == 1 and capped.has_more  # type: ignore[attr-defined]
    tiny = _page(state, max_bytes=1)
    assert len(tiny.entries) == 1  # the first entry always comes, so paging progresses  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad", [{"limit": 0}, {"limit": 101}, {"max_bytes": 0}, {"anchor": -1}, {"actor": ""}]
)
def test_history_bad_queries_are_invalid(bad: dict[str, object]) -> None:
    outcome = _page(_history_state(), **bad)
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT


def test_history_keeps_type_and_custom_type() -> None:
    request = send(content=MessageContent(MessageType.CUSTOM, b"{}", "poll"), reply_to=1)
    state, created = reserved(StoreState(), request)
    state, _ = put_record(state, created.intent)
    page = _page(state)
    (entry,) = page.entries  # type: ignore[attr-defined]
    assert (entry.message_type, entry.custom_type, entry.body, entry.reply_to) == (
        MessageType.CUSTOM,
        "poll",
        b"{}",
        1,
    )


# C-POST-06 / C-POST-07 / C-POST-09 committer branches ------------------------------------------
def test_branches_follow_the_durable_stage() -> None:
    state, created = reserved(StoreState(), send())
    loaded = load_commit(state, created.intent.key, "c1")
    assert next_step(None, ATOMIC, None) is CommitStep.RESERVE
    assert next_step(loaded, ATOMIC, None) is CommitStep.PUT_RECORD  # type: ignore[arg-type]
    state, _ = put_record(state, created.intent)
    recorded = load_commit(state, created.intent.key, "c1")
    assert next_step(recorded, ATOMIC, None) is CommitStep.PUBLISH_OUTBOX  # type: ignore[arg-type]
    assert next_step(recorded, ATOMIC, PUB) is CommitStep.MARK_PUBLISHED_AND_COMMITTED  # type: ignore[arg-type]
    assert next_step(recorded, TWO_STEP, PUB) is CommitStep.MARK_OUTBOX_PUBLISHED  # type: ignore[arg-type]
    state, _ = mark_outbox_published(state, created.intent, PUB)
    outboxed = load_commit(state, created.intent.key, "c1")
    for caps in (ATOMIC, TWO_STEP):
        assert next_step(outboxed, caps, PUB) is CommitStep.MARK_COMMITTED  # type: ignore[arg-type]
    state, _ = mark_committed(state, created.intent)
    assert next_step(load_commit(state, created.intent.key, "c1"), ATOMIC, None) is CommitStep.REPLAY_ACK  # type: ignore[arg-type]


def test_fault_point_four_sits_before_the_marking_call() -> None:
    assert FAULT_POINT_BEFORE[CommitStep.MARK_PUBLISHED_AND_COMMITTED] is FaultPoint.M_COMMIT_04
    assert FAULT_POINT_BEFORE[CommitStep.MARK_OUTBOX_PUBLISHED] is FaultPoint.M_COMMIT_04
    assert FaultPoint.M_COMMIT_05 not in fault_points_for(ATOMIC)
    assert fault_points_for(TWO_STEP) == tuple(FaultPoint)


def test_transition_table_is_total_and_forward_only() -> None:
    for operation in StoreOperation:
        for stage in CommitStage:
            move = TRANSITIONS[(operation, stage)]
            if move.target is not None:
                assert move.target.rank > stage.rank


@given(st.sampled_from(list(CommitStage)))
def test_ranks_are_ordered(stage: CommitStage) -> None:
    assert 0 < stage.rank <= CommitStage.COMMITTED.rank


# C-ERR-04 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_",
    [
        send(tenant=""),
        send(device="d 1"),
        send(content=MessageContent(MessageType.TEXT, b"x" * (64 * 1024 + 1))),
        send(content=MessageContent(MessageType.CUSTOM, b"x")),
        send(content=MessageContent(MessageType.TEXT, b"x", "poll")),
        send(reply_to=0),
        send(mentions=tuple(f"u{i}" for i in range(33))),
    ],
)
def test_invalid_requests_change_nothing(request_: AuthenticatedSend) -> None:
    state, outcome = reserve(StoreState(), request_, delivery_for(request_), candidate_for(request_, 1))
    assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT
    assert state == StoreState()
