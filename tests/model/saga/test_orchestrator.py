"""The orchestrator's result transaction and transaction fates (S-ORCH-*, S-TX-*, S-DLV-*)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    STORED_ROW_KINDS,
    CommandDelivery,
    CommandProcessed,
    CommitFate,
    Decision,
    DeliveryVerdict,
    DuplicateResult,
    MessageRefused,
    OrchestratorStore,
    OutcomeUnknown,
    Phase,
    RefusalReason,
    ResultApplied,
    ResultDelivery,
    ResultEnvelope,
    RolledBack,
    StaleResult,
    StoredRowCorrupt,
    handle_command,
    handle_result,
    mark_command_published,
    pending_commands,
    refuse_corrupt,
    settle,
    timer_id_for,
)
from tests.model.saga.builders import Driver, participants, started, store_with, three_steps

ART = three_steps()


def first_result(kind: Decision = Decision.SUCCEED) -> tuple[OrchestratorStore, ResultEnvelope, str]:
    """A started saga and the genuine result of its first command, not yet delivered."""
    store, saga_id = started(store_with(ART), ART.key)
    driver = Driver(store, participants(store))
    (command,) = [e.command for e in store.outbox.values()]
    part = driver.parts[command.owner]
    _, outcome = handle_command(part, CommandDelivery(command, "orchestrator", kind))
    assert isinstance(outcome, CommandProcessed)
    return store, outcome.result, saga_id


FORGERIES = [
    ("saga_id", "saga-nope", "svc-a", RefusalReason.IDENTITY_MISMATCH),
    ("command_id", "cmd-nope", "svc-a", RefusalReason.IDENTITY_MISMATCH),
    ("definition_digest", "f" * 64, "svc-a", RefusalReason.DIGEST_MISMATCH),
    ("owner", "svc-b", "svc-b", RefusalReason.OWNER_MISMATCH),
    (None, None, "mallory", RefusalReason.UNTRUSTED_PRODUCER),
    (None, None, "svc-b", RefusalReason.UNTRUSTED_PRODUCER),
    ("effect_id", "eff-nope", "svc-a", RefusalReason.IDENTITY_MISMATCH),
    ("phase", Phase.COMPENSATE, "svc-a", RefusalReason.IDENTITY_MISMATCH),
    ("step_index", 1, "svc-a", RefusalReason.IDENTITY_MISMATCH),
]


@pytest.mark.parametrize(("field", "value", "producer", "reason"), FORGERIES)
def test_s_orch_01_forged_results_are_refused_before_the_inbox(
    field: str | None, value: object, producer: str, reason: RefusalReason
) -> None:
    store, genuine, _ = first_result()
    forged = genuine if field is None else attrs.evolve(genuine, **{field: value})  # type: ignore[arg-type]
    after, outcome = handle_result(store, ResultDelivery(forged, producer, 0))
    assert outcome == MessageRefused(forged.message_id, reason)
    assert outcome.verdict is DeliveryVerdict.DEAD_LETTER
    assert after is store and genuine.message_id not in after.inbox
    # the genuine twin still finds its dedupe key free
    _, applied = handle_result(after, ResultDelivery(genuine, "svc-a", 0))
    assert isinstance(applied, ResultApplied)


def test_s_orch_01_message_id_must_be_derived_from_the_command() -> None:
    store, genuine, _ = first_result()
    forged = attrs.evolve(genuine, message_id="res-squatter")
    after, outcome = handle_result(store, ResultDelivery(forged, "svc-a", 0))
    assert outcome == MessageRefused("res-squatter", RefusalReason.IDENTITY_MISMATCH)
    assert after is store


def test_s_orch_02_one_transaction_writes_inbox_instance_journal_timer_and_outbox() -> None:
    store, genuine, saga_id = first_result()
    after, outcome = handle_result(store, ResultDelivery(genuine, "svc-a", 5))
    assert isinstance(outcome, ResultApplied) and outcome.verdict is DeliveryVerdict.ACK
    assert after.inbox == store.inbox | {genuine.message_id}
    assert after.instances[saga_id].revision == store.instances[saga_id].revision + 1
    assert after.journal == (*store.journal, outcome.entry)
    assert outcome.dispatched is not None
    assert set(after.outbox) == set(store.outbox) | {outcome.dispatched}
    assert set(after.timers.timers) == {timer_id_for(outcome.dispatched)}
    assert after.timers.timers[timer_id_for(outcome.dispatched)].due_ms == 5 + ART.steps[1].timeout_ms


@pytest.mark.parametrize("fate", [CommitFate.ROLLED_BACK, CommitFate.UNKNOWN_NOT_APPLIED])
def test_s_orch_02_unapplied_transaction_writes_nothing(fate: CommitFate) -> None:
    store, genuine, _ = first_result()
    after, outcome = handle_result(store, ResultDelivery(genuine, "svc-a", 0, fate))
    assert after is store
    assert outcome.verdict is DeliveryVerdict.REDELIVER
    assert isinstance(outcome, RolledBack if fate is CommitFate.ROLLED_BACK else OutcomeUnknown)


def test_s_orch_02_unknown_but_applied_writes_everything_and_redelivery_is_absorbed() -> None:
    store, genuine, _ = first_result()
    committed, _ = handle_result(store, ResultDelivery(genuine, "svc-a", 0))
    after, outcome = handle_result(store, ResultDelivery(genuine, "svc-a", 0, CommitFate.UNKNOWN_APPLIED))
    assert isinstance(outcome, OutcomeUnknown) and after == committed
    again, duplicate = handle_result(after, ResultDelivery(genuine, "svc-a", 0))
    assert duplicate == DuplicateResult(genuine.message_id) and again is after


def test_s_orch_03_duplicates_are_absorbed() -> None:
    store, genuine, _ = first_result()
    store, _ = handle_result(store, ResultDelivery(genuine, "svc-a", 0))
    after, outcome = handle_result(store, ResultDelivery(genuine, "svc-a", 99))
    assert outcome == DuplicateResult(genuine.message_id) and outcome.verdict is DeliveryVerdict.ACK
    assert after is store


def test_s_orch_04_results_for_effects_no_longer_awaited_only_claim_their_key() -> None:
    store, saga_id = started(store_with(ART), ART.key)
    driver = Driver(store, participants(store))
    (attempt_1,) = pending_commands(driver.store)
    driver.store, _ = mark_command_published(driver.store, attempt_1.command_id)
    driver.now_ms = 10_000
    assert driver.fire_due() == 1  # attempt 1 timed out: attempt 2 goes out
    (attempt_2,) = pending_commands(driver.store)
    part = driver.parts["svc-a"]
    part, first = handle_command(part, CommandDelivery(attempt_1, "orchestrator", Decision.SUCCEED))
    part, second = handle_command(part, CommandDelivery(attempt_2, "orchestrator", Decision.SUCCEED))
    assert isinstance(first, CommandProcessed) and isinstance(second, CommandProcessed)
    assert second.absorbed and first.result.message_id != second.result.message_id
    store, applied = handle_result(driver.store, ResultDelivery(second.result, "svc-a", 0))
    assert isinstance(applied, ResultApplied)
    after, outcome = handle_result(store, ResultDelivery(first.result, "svc-a", 0))
    assert outcome == StaleResult(first.result.message_id, saga_id)
    assert outcome.verdict is DeliveryVerdict.ACK
    assert after == attrs.evolve(store, inbox=store.inbox | {first.result.message_id})


# -- transaction fates ------------------------------------------------------------------


@given(st.sampled_from(list(CommitFate)), st.integers(), st.integers())
def test_s_tx_01_writes_land_together_or_not_at_all(fate: CommitFate, before: int, after: int) -> None:
    state, outcome = settle(before, after, fate, "done")
    assert state == (after if fate.applied else before)
    if fate is CommitFate.COMMITTED:
        assert outcome == "done"
    elif fate is CommitFate.ROLLED_BACK:
        assert isinstance(outcome, RolledBack)


@given(st.sampled_from([CommitFate.UNKNOWN_APPLIED, CommitFate.UNKNOWN_NOT_APPLIED]))
def test_s_tx_02_commit_sent_without_answer_is_unknown_never_rollback(fate: CommitFate) -> None:
    _, outcome = settle("before", "after", fate, "done")
    assert isinstance(outcome, OutcomeUnknown) and not isinstance(outcome, RolledBack)
    assert outcome.verdict is DeliveryVerdict.REDELIVER


@given(st.sampled_from(STORED_ROW_KINDS), st.integers())
def test_s_tx_03_a_stored_row_that_does_not_decode_is_refused(kind: str, before: int) -> None:
    state, outcome = refuse_corrupt(before, kind)
    assert state is before
    assert outcome == StoredRowCorrupt(kind)
    assert outcome.verdict is DeliveryVerdict.REDELIVER


def test_s_dlv_02_rollbacks_and_unknowns_are_redelivered() -> None:
    assert RolledBack.verdict is DeliveryVerdict.REDELIVER
    assert OutcomeUnknown.verdict is DeliveryVerdict.REDELIVER
    assert MessageRefused.verdict is DeliveryVerdict.DEAD_LETTER


def test_s_tx_04_a_dropped_namespace_holds_no_row() -> None:
    """S-TX-04: the dropped store equals a store never written, with the deployment's settings."""
    from model.saga import OrchestratorStore, drop_namespace

    configured = OrchestratorStore(quota_limit=3, trusted_producers=frozenset({"p"}))
    written = attrs.evolve(configured, inbox=frozenset({"m1"}), registry_revision=4)
    assert drop_namespace(written) == configured
