"""A divergence between the model and a backend is reported under the rule it breaks."""

from __future__ import annotations

from conformance.commit import _vocabulary as v
from conformance.commit._judge import verdict
from model.commit import (
    CommitStage,
    LoadedCommitted,
    LoadedInFlight,
    MessageStoreError,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    StoreErrorKind,
    StoreState,
    mark_published_and_committed,
    put_record,
    reserve,
)

KEY = v.parse_key("t1/alice/m1")


def reserved() -> tuple[StoreState, ReserveCreated]:
    send = v.request(KEY)
    state, created = reserve(
        StoreState(), send, v.delivery(send.conversation, frozenset({"alice"}), 1), v.candidate(send, v.T0)
    )
    assert isinstance(created, ReserveCreated)
    return state, created


def error(kind: StoreErrorKind) -> MessageStoreError:
    return MessageStoreError(kind, "", KEY)


def test_agreement_is_no_verdict_and_errors_compare_by_kind() -> None:
    _, created = reserved()
    assert verdict("reserve", created, created) is None
    assert (
        verdict(
            "put_record", error(StoreErrorKind.NOT_FOUND), MessageStoreError(StoreErrorKind.NOT_FOUND, "x")
        )
        is None
    )


def test_a_replayed_conflict_is_c_pre_03() -> None:
    _, created = reserved()
    replayed = ReserveInFlight(created.intent, CommitStage.RESERVED, None)
    rule, message = verdict("reserve", error(StoreErrorKind.IDENTITY_CONFLICT), replayed) or ("", "")
    assert rule == "C-PRE-03"
    assert "conflicting request" in message


def test_new_coordinates_are_c_post_01() -> None:
    _, created = reserved()
    c = created.intent.coordinates
    moved = ReserveCreated(v.intent_variant(created.intent, "other-coordinates"))
    assert moved.intent.coordinates != c
    assert verdict("reserve", created, moved) == (
        "C-POST-01",
        f"reserve returned ReserveCreated(seq {c.message_seq + 7}/{c.conversation_seq + 7} @T0+0); "
        f"the contract says ReserveCreated(seq {c.message_seq}/{c.conversation_seq} @T0+0)",
    )


def test_a_repeat_answered_as_a_fresh_reservation_is_c_post_01() -> None:
    _, created = reserved()
    repeat = ReserveInFlight(created.intent, CommitStage.RESERVED, None)
    assert (verdict("reserve", repeat, created) or ("",))[0] == "C-POST-01"


def test_a_stage_behind_the_model_is_c_post_08() -> None:
    state, created = reserved()
    state, _ = put_record(state, created.intent)
    state, message = mark_published_and_committed(state, created.intent, v.publication("p1"))
    assert not isinstance(message, MessageStoreError)
    behind = LoadedInFlight(created.intent, CommitStage.RECORDED, None)
    assert (verdict("load_commit", LoadedCommitted(message), behind) or ("",))[0] == "C-POST-08"


def test_a_success_where_the_atomic_step_must_refuse_is_c_post_05() -> None:
    rule = (
        verdict("mark_published_and_committed", error(StoreErrorKind.PUBLICATION_MISMATCH), None) or ("",)
    )[0]
    assert rule == "C-POST-05"


def test_a_missing_refusal_of_a_non_member_is_c_pre_05() -> None:
    assert (verdict("history_page", error(StoreErrorKind.NOT_A_MEMBER), None) or ("",))[0] == "C-PRE-05"


def test_a_committed_read_with_another_publication_is_c_post_04() -> None:
    state, created = reserved()
    state, _ = put_record(state, created.intent)
    state, message = mark_published_and_committed(state, created.intent, v.publication("p1"))
    assert not isinstance(message, MessageStoreError)
    other = type(message)(message.key, message.conversation, message.coordinates, v.publication("p2"))
    assert (verdict("reserve", ReserveCommitted(message), ReserveCommitted(other)) or ("",))[0] == "C-POST-04"
