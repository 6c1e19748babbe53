"""The stage set, the reconciliation and the label policy of the saga metrics (S-OBS-01..08)."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    FORBIDDEN_LABELS,
    LABEL_VALUES,
    OPERATION_OUTCOMES,
    PROCESSING_METRIC,
    STAGE_BUCKETS,
    STAGE_METRIC,
    TRANSPORT_METRIC,
    UNIT_OUTCOMES,
    AlreadyExists,
    ClaimTimer,
    CommandDelivery,
    CommandProcessed,
    DeadLettered,
    Decision,
    DuplicateCommand,
    EligibilityRevoked,
    MessageRefused,
    Operation,
    OutcomeUnknown,
    Published,
    RefusalReason,
    RolledBack,
    SagaStatus,
    Series,
    Stage,
    StaleFencingToken,
    TimerClaimed,
    Unit,
    bucket_of,
    claim_timer,
    command_stages,
    fire_lateness,
    handle_command,
    label_violations,
    outcome_label,
    pending_commands,
    store_facts,
    unit_tally,
)

from .builders import ORCHESTRATOR, Driver, always, participants, started, store_with, three_steps


def _one_saga() -> tuple[Driver, str]:
    art = three_steps()
    store, saga_id = started(store_with(art), art.key)
    return Driver(store, participants(store)), saga_id


def test_s_obs_01_five_fixed_stages_over_fixed_bounds() -> None:
    assert [s.value for s in Stage] == [
        "participant_handler",
        "participant_transaction",
        "start_transaction",
        "transition_transaction",
        "timer_lateness",
    ]
    assert list(STAGE_BUCKETS) == sorted(STAGE_BUCKETS) and STAGE_BUCKETS[-1] == 60.0
    assert LABEL_VALUES["stage"] == {s.value for s in Stage}
    # ``le`` semantics: a value on a bound is in that bound's bucket; beyond the last is +Inf.
    assert bucket_of(0.0) == 0 and bucket_of(0.001) == 0 and bucket_of(0.0011) == 1
    assert bucket_of(60.0) == len(STAGE_BUCKETS) - 1 and bucket_of(61) == len(STAGE_BUCKETS)


def test_s_obs_02_every_attempt_that_reached_its_transaction_is_observed() -> None:
    assert unit_tally(Unit.START, EligibilityRevoked(0)).stages == ()
    for outcome in (EligibilityRevoked(1), RolledBack(), OutcomeUnknown(), AlreadyExists("s", "d")):
        assert unit_tally(Unit.START, outcome).stages == (Stage.START_TRANSACTION,)
    for unit in (Unit.RESULT, Unit.TIMER_FIRE):
        assert unit_tally(unit, RolledBack()).stages == (Stage.TRANSITION_TRANSACTION,)
    assert unit_tally(Unit.TIMER_CLAIM, RolledBack()).stages == ()


def test_s_obs_02_participant_stages_follow_the_inbox_and_the_gate() -> None:
    driver, _ = _one_saga()
    command = pending_commands(driver.store)[0]
    part = driver.parts[command.owner]
    both = (Stage.PARTICIPANT_TRANSACTION, Stage.HANDLER)
    assert (
        command_stages(part, command, MessageRefused(command.command_id, RefusalReason.OWNER_MISMATCH)) == ()
    )
    assert command_stages(part, command, RolledBack()) == both  # a transient failure ran the handler
    after, outcome = handle_command(part, CommandDelivery(command, ORCHESTRATOR, Decision.SUCCEED))
    assert isinstance(outcome, CommandProcessed)
    # The copy meets the inbox; another attempt at the same effect meets the gate: no handler.
    assert command_stages(after, command, DuplicateCommand(command.command_id)) == both[:1]
    retry = attrs.evolve(command, attempt=2, command_id="cmd-other")
    assert command_stages(after, retry, CommandProcessed(outcome.result, True)) == both[:1]
    # A dead letter is claimed in the inbox: its copy is a duplicate's transaction (S-PART-04).
    dead = attrs.evolve(part, dead_letters=frozenset({command.command_id}))
    assert command_stages(dead, command, DuplicateCommand(command.command_id)) == both[:1]
    # The try that spends the budget runs one more transaction, recording the dead letter, even
    # when the database refused to record it (answered RolledBack).
    spent = attrs.evolve(
        part, delivery_failures={command.command_id: part.config.transient_failure_budget - 1}
    )
    lettered = (*both, Stage.PARTICIPANT_TRANSACTION)
    assert command_stages(spent, command, DeadLettered(command.command_id, 2)) == lettered
    assert command_stages(spent, command, RolledBack()) == lettered


def test_s_obs_03_lateness_is_taken_only_after_the_fence_held() -> None:
    driver, _ = _one_saga()
    timer = next(iter(driver.store.timers.timers.values()))
    store, claim = claim_timer(driver.store, ClaimTimer(timer.timer_id, "w", timer.due_ms + 250, 100))
    assert isinstance(claim, TimerClaimed)
    token = claim.token
    assert fire_lateness(store, timer.timer_id, token, timer.due_ms + 300) == 0.3
    assert fire_lateness(store, timer.timer_id, token + 1, timer.due_ms + 300) is None
    assert fire_lateness(store, "tmr-none", token, timer.due_ms + 300) is None
    assert fire_lateness(store, timer.timer_id, token, timer.due_ms - 5) == 0  # never negative
    assert unit_tally(Unit.TIMER_FIRE, StaleFencingToken(timer.timer_id, token + 1, token)).stages == (
        Stage.TRANSITION_TRANSACTION,
    )


def test_s_obs_04_each_call_counts_once_by_its_outcome() -> None:
    tally = unit_tally(Unit.COMMAND, DuplicateCommand("cmd-1"))
    assert tally.counters == (
        (PROCESSING_METRIC, (("unit", "command"), ("outcome", "duplicate_command"))),
        (TRANSPORT_METRIC, (("direction", "command"), ("verdict", "ack"))),
    )
    assert unit_tally(Unit.RESULT, RolledBack()).counters[1][1] == (
        ("direction", "result"),
        ("verdict", "redeliver"),
    )
    assert unit_tally(Operation.PUBLISH, Published(three_steps().key, "d")).counters == (
        ("nasaga_governance", (("operation", "publish"), ("outcome", "published"))),
    )


def test_s_obs_05_one_bounded_bucket_source() -> None:
    """Every duration falls in exactly one of the fixed buckets, so any rendering of the same
    counts (snapshot or text) is the same finite set of samples."""

    @given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
    def within(seconds: float) -> None:
        index = bucket_of(seconds)
        assert 0 <= index <= len(STAGE_BUCKETS)
        assert index == len(STAGE_BUCKETS) or seconds <= STAGE_BUCKETS[index]
        assert index == 0 or seconds > STAGE_BUCKETS[index - 1]

    within()


def test_s_obs_06_store_facts_are_the_committed_state() -> None:
    driver, _ = _one_saga()
    facts = store_facts(driver.store)
    assert facts.instances[SagaStatus.RUNNING] == 1 and sum(facts.instances.values()) == 1
    assert (facts.attempts, facts.retries, facts.timers_scheduled, facts.quota_used) == (1, 0, 1, 1)
    driver.run(always(Decision.REJECT))
    facts = store_facts(driver.store)
    assert facts.instances[SagaStatus.COMPENSATED] == 1 and facts.conflicts == 1
    assert facts.timers_scheduled == facts.timers_leased == 0


def test_s_obs_07_label_values_are_closed_sets() -> None:
    for outcomes in (*UNIT_OUTCOMES.values(), *OPERATION_OUTCOMES.values()):
        assert outcomes <= LABEL_VALUES["outcome"]
    assert outcome_label(RolledBack()) == "rolled_back"
    good = Series(PROCESSING_METRIC, f"{PROCESSING_METRIC}_total", {"unit": "start", "outcome": "started"})
    assert label_violations([good]) == ()
    unknown = Series(STAGE_METRIC, f"{STAGE_METRIC}_count", {"stage": "order-saga"})
    assert [rule for rule, _ in label_violations([unknown])] == ["S-OBS-07"]
    extra = Series(TRANSPORT_METRIC, f"{TRANSPORT_METRIC}_total", {"direction": "command"})
    assert [rule for rule, _ in label_violations([extra])] == ["S-OBS-07"]


def test_s_obs_08_identities_are_never_labels() -> None:
    assert {"saga_id", "tenant", "datasource", "endpoint", "body"} <= FORBIDDEN_LABELS
    by_name = Series("nasaga_starts", "nasaga_starts_total", {"tenant": "acme"})
    by_value = Series(PROCESSING_METRIC, f"{PROCESSING_METRIC}_total", {"unit": "start", "outcome": "acme"})
    assert next(r for r, _ in label_violations([by_name])) == "S-OBS-08"
    assert [r for r, _ in label_violations([by_value], frozenset({"acme"}))] == ["S-OBS-08"]
