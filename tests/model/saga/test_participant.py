"""The participant transaction: inbox, gate, facts, outbox, verdicts (S-PART-*, S-DLV-*)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    JSON_CONTRACT,
    CommandDelivery,
    CommandEnvelope,
    CommandProcessed,
    CommitFate,
    DeadLettered,
    Decision,
    DeliveryVerdict,
    DuplicateCommand,
    MessageRefused,
    OrchestratorStore,
    OutcomeUnknown,
    ParticipantState,
    PayloadContract,
    Phase,
    RefusalReason,
    ResultKind,
    RolledBack,
    SagaPayload,
    ack_is_earned,
    dead_letter_unrecorded,
    effect_counts,
    handle_command,
    mark_command_published,
    pending_commands,
    restart_participant,
)
from model.saga._instance import make_command
from tests.model.saga.builders import (
    ORCHESTRATOR,
    Driver,
    commit_fates,
    decisions,
    participants,
    started,
    store_with,
    three_steps,
)

ART = three_steps()


def setup(budget: int = 3) -> tuple[OrchestratorStore, ParticipantState, CommandEnvelope]:
    store, _ = started(store_with(ART), ART.key)
    (command,) = pending_commands(store)
    return store, participants(store, budget)["svc-a"], command


def attempt(store: OrchestratorStore, command: CommandEnvelope, number: int) -> CommandEnvelope:
    instance = store.instances[command.saga_id]
    return make_command(instance, ART, command.phase, command.step_index, number)


def deliver(
    part: ParticipantState,
    command: CommandEnvelope,
    decision: Decision = Decision.SUCCEED,
    commit: CommitFate = CommitFate.COMMITTED,
    producer: str = ORCHESTRATOR,
) -> tuple[ParticipantState, object]:
    return handle_command(part, CommandDelivery(command, producer, decision, commit))


def business(part: ParticipantState) -> tuple[object, ...]:
    """Everything the participant transaction writes (not the delivery bookkeeping)."""
    return (part.inbox, part.gate, part.effects, part.outbox)


def test_s_part_01_inbox_gate_fact_and_outbox_commit_together() -> None:
    _, part, command = setup()
    after, outcome = deliver(part, command)
    assert isinstance(outcome, CommandProcessed) and not outcome.absorbed
    assert after.inbox == {command.command_id}
    assert after.gate[command.effect_id].kind is ResultKind.SUCCEEDED
    assert after.effects == (command.effect_id,)
    assert after.outbox == (outcome.result,)
    assert outcome.result.command_id == command.command_id and outcome.result.kind is ResultKind.SUCCEEDED


@pytest.mark.parametrize("decision", [Decision.REJECT, Decision.UNKNOWN])
def test_s_part_01_rejections_and_unknowns_are_recorded_without_an_effect(decision: Decision) -> None:
    _, part, command = setup()
    after, outcome = deliver(part, command, decision)
    assert isinstance(outcome, CommandProcessed)
    assert after.effects == () and after.gate[command.effect_id].kind.value == outcome.result.kind.value
    assert command.command_id in after.inbox


def test_s_part_01_unknown_commit_applies_all_or_nothing() -> None:
    _, part, command = setup()
    committed, _ = deliver(part, command)
    applied, outcome = deliver(part, command, commit=CommitFate.UNKNOWN_APPLIED)
    assert isinstance(outcome, OutcomeUnknown) and applied == committed
    not_applied, outcome = deliver(part, command, commit=CommitFate.UNKNOWN_NOT_APPLIED)
    assert isinstance(outcome, OutcomeUnknown) and not_applied is part


def test_s_part_02_duplicate_command_is_absorbed_by_the_inbox() -> None:
    _, part, command = setup()
    part, _ = deliver(part, command)
    after, outcome = deliver(part, command, Decision.REJECT)
    assert outcome == DuplicateCommand(command.command_id) and outcome.verdict is DeliveryVerdict.ACK
    assert after is part


def test_s_part_03_other_attempts_are_answered_from_the_gate() -> None:
    store, part, command = setup()
    part, first = deliver(part, command, Decision.SUCCEED)
    assert isinstance(first, CommandProcessed) and not first.absorbed
    second_attempt = attempt(store, command, 2)
    assert second_attempt.effect_id == command.effect_id
    after, outcome = deliver(part, second_attempt, Decision.REJECT)
    assert isinstance(outcome, CommandProcessed) and outcome.absorbed
    assert outcome.result.kind is ResultKind.SUCCEEDED
    assert outcome.result.command_id == second_attempt.command_id
    assert after.effects == part.effects == (command.effect_id,)


deliveries = st.lists(st.tuples(st.integers(1, 3), decisions, commit_fates), min_size=1, max_size=15)


@given(deliveries)
def test_s_part_03_each_effect_takes_effect_at_most_once(
    script: list[tuple[int, Decision, CommitFate]],
) -> None:
    store, part, command = setup(budget=2)
    kinds: set[ResultKind] = set()
    for number, decision, fate in script:
        part, outcome = deliver(part, attempt(store, command, number), decision, fate)
        assert ack_is_earned(outcome)  # type: ignore[arg-type]
        if isinstance(outcome, CommandProcessed):
            kinds.add(outcome.result.kind)
    assert all(count <= 1 for count in effect_counts(part).values())
    # every attempt at one effect got the same verdict, reported or not
    written = {r.kind for r in part.outbox}
    assert len(written) <= 1 and kinds <= written


def test_s_part_04_transient_failures_roll_back_then_dead_letter() -> None:
    _, part, command = setup(budget=2)
    after, outcome = deliver(part, command, Decision.TRANSIENT_FAILURE)
    assert isinstance(outcome, RolledBack) and outcome.verdict is DeliveryVerdict.REDELIVER
    assert business(after) == business(part)
    after, outcome = deliver(after, command, commit=CommitFate.ROLLED_BACK)
    assert outcome == DeadLettered(command.command_id, 2) and outcome.verdict is DeliveryVerdict.DEAD_LETTER
    assert business(after) == business(part)
    again, duplicate = deliver(after, command)
    assert isinstance(duplicate, DuplicateCommand) and again is after


def test_s_part_04_a_restart_counts_afresh_and_keeps_its_dead_letters() -> None:
    _, part, command = setup(budget=2)
    once, _ = deliver(part, command, Decision.TRANSIENT_FAILURE)
    restarted = restart_participant(once)
    assert restarted.delivery_failures == {}
    again, outcome = deliver(restarted, command, Decision.TRANSIENT_FAILURE)
    assert isinstance(outcome, RolledBack)
    dead, outcome = deliver(again, command, Decision.TRANSIENT_FAILURE)
    assert isinstance(outcome, DeadLettered)
    _, duplicate = deliver(restart_participant(dead), command)
    assert isinstance(duplicate, DuplicateCommand)


def test_s_part_04_a_dead_letter_left_unrecorded_meets_the_spent_budget_again() -> None:
    _, part, command = setup(budget=1)
    dead, outcome = deliver(part, command, Decision.TRANSIENT_FAILURE)
    assert isinstance(outcome, DeadLettered)
    unrecorded = dead_letter_unrecorded(dead, command.command_id)
    assert unrecorded.dead_letters == frozenset() and unrecorded.delivery_failures == {command.command_id: 1}
    _, outcome = deliver(unrecorded, command, Decision.TRANSIENT_FAILURE)
    assert outcome == DeadLettered(command.command_id, 2)
    _, processed = deliver(unrecorded, command)
    assert isinstance(processed, CommandProcessed)


def test_s_part_04_unknown_commits_never_spend_the_transient_budget() -> None:
    _, part, command = setup(budget=1)
    for _ in range(5):
        part, outcome = deliver(part, command, commit=CommitFate.UNKNOWN_NOT_APPLIED)
        assert isinstance(outcome, OutcomeUnknown) and outcome.verdict is DeliveryVerdict.REDELIVER
    assert part.delivery_failures == {} and part.dead_letters == frozenset()
    part, outcome = deliver(part, command)
    assert isinstance(outcome, CommandProcessed)


def refusal_cases(
    store: OrchestratorStore, command: CommandEnvelope
) -> list[tuple[CommandEnvelope, str, RefusalReason]]:
    later = make_command(store.instances[command.saga_id], ART, Phase.EXECUTE, 1, 1)
    return [
        (command, "mallory", RefusalReason.UNTRUSTED_PRODUCER),
        (attrs.evolve(command, owner="svc-b"), ORCHESTRATOR, RefusalReason.OWNER_MISMATCH),
        (later, ORCHESTRATOR, RefusalReason.OWNER_MISMATCH),  # svc-a does not serve step 1
        (attrs.evolve(command, definition_digest="e" * 64), ORCHESTRATOR, RefusalReason.DIGEST_MISMATCH),
        (attrs.evolve(command, command_id="cmd-x"), ORCHESTRATOR, RefusalReason.IDENTITY_MISMATCH),
        (attrs.evolve(command, attempt=2), ORCHESTRATOR, RefusalReason.IDENTITY_MISMATCH),
        (
            attrs.evolve(command, payload=SagaPayload(b"{}", PayloadContract("application/json", "s"))),
            ORCHESTRATOR,
            RefusalReason.PAYLOAD_CONTRACT_MISMATCH,
        ),
        (
            attrs.evolve(command, payload=SagaPayload(b"{oops", JSON_CONTRACT)),
            ORCHESTRATOR,
            RefusalReason.PAYLOAD_CONTRACT_MISMATCH,
        ),
    ]


def test_s_part_05_commands_are_verified_before_the_inbox_claim() -> None:
    store, part, command = setup()
    for forged, producer, reason in refusal_cases(store, command):
        after, outcome = deliver(part, forged, producer=producer)
        assert outcome == MessageRefused(forged.command_id, reason), (forged, producer)
        assert after is part


def test_s_part_05_payload_only_on_first_step_execute() -> None:
    store, saga_id = started(store_with(ART), ART.key)
    svc_b = participants(store)["svc-b"]
    later = make_command(store.instances[saga_id], ART, Phase.EXECUTE, 1, 1)
    assert later.payload is None
    carrying = attrs.evolve(later, payload=store.instances[saga_id].first_payload)
    after, outcome = deliver(svc_b, carrying)
    assert outcome == MessageRefused(later.command_id, RefusalReason.PAYLOAD_CONTRACT_MISMATCH)
    assert after is svc_b
    _, accepted = deliver(svc_b, later)
    assert isinstance(accepted, CommandProcessed)


def test_s_part_05_a_first_execute_without_input_is_accepted_a_present_one_still_checked() -> None:
    """A start without first-step input sends none (S-START-10, N-15); a present body is still
    held to the declared contract."""
    store, saga_id = started(store_with(ART), ART.key)
    first = make_command(store.instances[saga_id], ART, Phase.EXECUTE, 0, 1)
    owner = participants(store)[first.owner]
    _, accepted = deliver(owner, attrs.evolve(first, payload=None))
    assert isinstance(accepted, CommandProcessed)
    wrong = attrs.evolve(first, payload=SagaPayload(b"{}", PayloadContract("application/json", "other")))
    after, refused = deliver(owner, wrong)
    assert refused == MessageRefused(first.command_id, RefusalReason.PAYLOAD_CONTRACT_MISMATCH)
    assert after is owner


def resolve_after_unknown() -> tuple[Driver, CommandEnvelope]:
    store, _ = started(store_with(ART), ART.key)
    driver = Driver(store, participants(store))
    driver.deliver_pending(lambda _c: Decision.UNKNOWN)
    (resolve,) = pending_commands(driver.store)
    assert resolve.phase is Phase.RESOLVE
    driver.store, _ = mark_command_published(driver.store, resolve.command_id)
    return driver, resolve


@pytest.mark.parametrize(
    ("decision", "kind", "applied"),
    [
        (Decision.SUCCEED, ResultKind.SUCCEEDED, True),
        (Decision.REJECT, ResultKind.REJECTED, False),
        (Decision.UNKNOWN, ResultKind.UNKNOWN, False),
    ],
)
def test_s_part_06_resolve_asks_the_world_about_an_unknown_effect(
    decision: Decision, kind: ResultKind, applied: bool
) -> None:
    driver, resolve = resolve_after_unknown()
    part = driver.parts["svc-a"]
    after, outcome = deliver(part, resolve, decision)
    assert isinstance(outcome, CommandProcessed) and outcome.result.kind is kind
    assert outcome.result.effect_id == resolve.effect_id
    target = resolve.target_effect_id
    assert target is not None
    assert (target in after.effects) is applied
    assert after.gate[target].kind is kind


def test_s_part_06_resolve_answers_a_decided_effect_from_the_gate() -> None:
    store, part, command = setup()
    part, _ = deliver(part, command, Decision.REJECT)
    resolve = make_command(store.instances[command.saga_id], ART, Phase.RESOLVE, 0, 1)
    after, outcome = deliver(part, resolve, Decision.SUCCEED)
    assert isinstance(outcome, CommandProcessed) and outcome.result.kind is ResultKind.REJECTED
    assert after.effects == ()


def test_s_part_06_resolve_fences_an_effect_that_never_ran() -> None:
    store, part, command = setup()
    resolve = make_command(store.instances[command.saga_id], ART, Phase.RESOLVE, 0, 1)
    part, outcome = deliver(part, resolve, Decision.SUCCEED)
    assert isinstance(outcome, CommandProcessed) and outcome.result.kind is ResultKind.REJECTED
    late, late_outcome = deliver(part, command, Decision.SUCCEED)
    assert isinstance(late_outcome, CommandProcessed) and late_outcome.absorbed
    assert late_outcome.result.kind is ResultKind.REJECTED
    assert late.effects == ()


@given(st.lists(st.tuples(decisions, commit_fates, st.sampled_from([ORCHESTRATOR, "mallory"])), max_size=10))
def test_s_dlv_01_only_commits_and_duplicates_are_acknowledged(
    script: list[tuple[Decision, CommitFate, str]],
) -> None:
    _, part, command = setup(budget=3)
    for decision, fate, producer in script:
        before = part
        part, outcome = deliver(part, command, decision, fate, producer)
        assert ack_is_earned(outcome)  # type: ignore[arg-type]
        unacked = outcome.verdict is not DeliveryVerdict.ACK  # type: ignore[attr-defined]
        if unacked and fate is not CommitFate.UNKNOWN_APPLIED:
            assert business(part) == business(before)


def test_s_dlv_03_refused_messages_are_dead_lettered_untouched() -> None:
    store, part, command = setup()
    for forged, producer, _ in refusal_cases(store, command):
        after, outcome = deliver(part, forged, producer=producer)
        assert isinstance(outcome, MessageRefused) and outcome.verdict is DeliveryVerdict.DEAD_LETTER
        assert after is part


@given(decisions, commit_fates)
def test_s_dlv_04_retryable_is_never_reported_committed(decision: Decision, fate: CommitFate) -> None:
    _, part, command = setup()
    _, outcome = deliver(part, command, decision, fate)
    if decision is Decision.TRANSIENT_FAILURE or fate is not CommitFate.COMMITTED:
        assert not isinstance(outcome, CommandProcessed)
        assert outcome.verdict is not DeliveryVerdict.ACK  # type: ignore[attr-defined]
