"""A divergence between the model and a backend is reported under the rule it breaks."""

from __future__ import annotations

from pathlib import Path

from conformance.commit import _vocabulary as v
from conformance.commit._judge import OUTBOX_CHECKS, refusal_rule, uncertain_rule, verdict
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


def test_the_combined_step_answers_to_its_path() -> None:
    """C-POST-05 on an atomic store, C-POST-06 on the default two-step path; refusals likewise."""
    mismatch = StoreErrorKind.PUBLICATION_MISMATCH
    assert refusal_rule("mark_published_and_committed", mismatch) == "C-POST-05"
    assert refusal_rule("mark_published_and_committed", mismatch, atomic=False) == "C-POST-06"
    assert uncertain_rule("mark_published_and_committed", atomic=True) == "C-POST-05"
    assert uncertain_rule("mark_published_and_committed", atomic=False) == "C-POST-06"
    assert uncertain_rule("put_record", atomic=False) == "C-POST-03"
    state, created = reserved()
    state, _ = put_record(state, created.intent)
    _, committed = mark_published_and_committed(state, created.intent, v.publication("p1"))
    refused = error(StoreErrorKind.MISSING_EVIDENCE)
    found = verdict("mark_published_and_committed", refused, committed, atomic=False)
    assert found is not None and found[0] == "C-POST-06"


def test_every_outbox_check_names_a_contract_rule() -> None:
    assert OUTBOX_CHECKS["republish-new-entry"] == "C-POST-07"
    assert OUTBOX_CHECKS["entry-of-two-keys"] == "C-POST-07"
    assert OUTBOX_CHECKS["published-before-recorded"] == "C-POST-07"
    assert OUTBOX_CHECKS["publication-not-the-entry"] == "C-POST-04"
    assert OUTBOX_CHECKS["replay-changed"] == "C-POST-09"
    assert OUTBOX_CHECKS["readiness-ignored-outbox"] == "C-PRE-06"
    contract = (Path(__file__).parents[2] / "docs" / "commit-contract.md").read_text()
    assert all(f"**{rule}**" in contract for rule in OUTBOX_CHECKS.values())
