"""Step outcomes and the instance/journal tables (S-STEP-*)."""

from __future__ import annotations

import itertools

import attrs
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    JSON_CONTRACT,
    SAGA_TRANSITIONS,
    SETTLED_STATUSES,
    STEP_TRANSITIONS,
    TERMINAL_STATUSES,
    AttemptTimedOut,
    Cause,
    CommandEnvelope,
    Decision,
    DefinitionArtifact,
    IllegalTransition,
    JournalEntry,
    Phase,
    Reaction,
    ResultKind,
    SagaInstance,
    SagaPayload,
    SagaStatus,
    StepAnswered,
    StepStatus,
    UncertainPolicy,
    definition_digest,
    effect_id_for,
    journal_of,
    journal_violations,
    mark_command_published,
    react,
    saga_transition_legal,
    step_transition_legal,
)
from model.saga._instance import PHASE_STATUS, awaiting_shape, begin, plan, plan_is_sound, reaction_is_sound
from tests.model.saga.builders import (
    Decide,
    Driver,
    always,
    artifact,
    artifacts,
    effects_of,
    participants,
    started,
    step,
    store_with,
    three_steps,
)

ART = three_steps()
KEY = ART.key


def run(art: DefinitionArtifact, decide: Decide) -> tuple[Driver, str]:
    store, saga_id = started(store_with(art), art.key)
    driver = Driver(store, participants(store))
    driver.run(decide)
    return driver, saga_id


def commands(driver: Driver) -> list[CommandEnvelope]:
    return [e.command for e in driver.store.outbox.values()]


def at(step_index: int, decision: Decision, otherwise: Decision = Decision.SUCCEED) -> Decide:
    return lambda c: decision if c.step_index == step_index and c.phase is Phase.EXECUTE else otherwise


def test_s_step_01_successes_advance_and_complete() -> None:
    driver, saga_id = run(ART, always(Decision.SUCCEED))
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.COMPLETED
    assert instance.steps == (StepStatus.SUCCEEDED,) * 3 and instance.awaiting is None
    assert [c.step_index for c in commands(driver)] == [0, 1, 2]
    assert len(effects_of(driver.parts)) == 3


def test_s_step_02_rejection_compensates_completed_steps_in_reverse() -> None:
    driver, saga_id = run(ART, at(2, Decision.REJECT))
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.COMPENSATED
    assert instance.steps == (StepStatus.COMPENSATED, StepStatus.COMPENSATED, StepStatus.FAILED)
    compensations = [c.step_index for c in commands(driver) if c.phase is Phase.COMPENSATE]
    assert compensations == [1, 0]


def test_s_step_02_first_step_rejected_needs_no_compensation() -> None:
    driver, saga_id = run(ART, at(0, Decision.REJECT))
    assert driver.store.instances[saga_id].status is SagaStatus.COMPENSATED
    assert all(c.phase is Phase.EXECUTE for c in commands(driver))


def test_s_step_03_unknown_goes_to_resolution_polling_the_execute_effect() -> None:
    store, saga_id = started(store_with(ART), KEY)
    driver = Driver(store, participants(store))
    driver.deliver_pending(always(Decision.SUCCEED))
    driver.deliver_pending(always(Decision.UNKNOWN))
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.RESOLVING
    assert instance.steps[1] is StepStatus.UNCERTAIN
    resolve = commands(driver)[-1]
    assert resolve.phase is Phase.RESOLVE
    assert resolve.target_effect_id == effect_id_for(saga_id, 1, Phase.EXECUTE)


def test_s_step_03_unknown_with_manual_policy_awaits_intervention_without_compensating() -> None:
    driver, saga_id = run(three_steps(policy=UncertainPolicy.MANUAL_INTERVENTION), at(1, Decision.UNKNOWN))
    assert driver.store.instances[saga_id].status is SagaStatus.AWAITING_MANUAL_INTERVENTION
    assert not any(c.phase in (Phase.COMPENSATE, Phase.RESOLVE) for c in commands(driver))


def test_s_step_04_resolved_success_continues() -> None:
    # UNKNOWN at execute; the outside world then says it happened
    driver, saga_id = run(ART, at(1, Decision.UNKNOWN))
    assert driver.store.instances[saga_id].status is SagaStatus.COMPLETED
    assert effect_id_for(saga_id, 1, Phase.EXECUTE) in effects_of(driver.parts)


def test_s_step_04_resolved_failure_compensates() -> None:
    def decide(c: CommandEnvelope) -> Decision:
        if c.step_index == 1 and c.phase is Phase.EXECUTE:
            return Decision.UNKNOWN
        return Decision.REJECT if c.phase is Phase.RESOLVE else Decision.SUCCEED

    driver, saga_id = run(ART, decide)
    assert driver.store.instances[saga_id].status is SagaStatus.COMPENSATED
    assert driver.store.instances[saga_id].steps[1] is StepStatus.FAILED


def test_s_step_04_still_unknown_exhausts_the_resolve_budget_into_manual() -> None:
    driver, saga_id = run(ART, at(1, Decision.UNKNOWN, otherwise=Decision.UNKNOWN))
    # step 0 answered UNKNOWN too: resolution of step 0 never converges
    polls = [c for c in commands(driver) if c.phase is Phase.RESOLVE]
    assert [c.attempt for c in polls] == list(range(1, ART.steps[0].resolve_budget + 1))
    assert driver.store.instances[saga_id].status is SagaStatus.AWAITING_MANUAL_INTERVENTION


def test_s_step_05_timeouts_retry_the_same_effect_then_resolve_never_compensate() -> None:
    art = artifact([step("a", "svc-a", max_attempts=3), step("b", "svc-b")])
    store, saga_id = started(store_with(art), art.key)
    driver = Driver(store, participants(store))
    for _ in range(3):  # every attempt is lost in transit
        for command in list(driver.store.outbox.values()):
            driver.store, _ = mark_command_published(driver.store, command.command.command_id)
        driver.now_ms += 10_000
        driver.fire_due()
    executes = [c for c in commands(driver) if c.phase is Phase.EXECUTE]
    assert [c.attempt for c in executes] == [1, 2, 3]
    assert len({c.effect_id for c in executes}) == 1 and len({c.command_id for c in executes}) == 3
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.RESOLVING
    assert commands(driver)[-1].phase is Phase.RESOLVE
    assert not any(c.phase is Phase.COMPENSATE for c in commands(driver))


def test_s_step_06_compensation_that_fails_awaits_manual_intervention() -> None:
    def decide(c: CommandEnvelope) -> Decision:
        if c.phase is Phase.COMPENSATE:
            return Decision.REJECT
        return Decision.REJECT if c.step_index == 1 else Decision.SUCCEED

    driver, saga_id = run(ART, decide)
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.AWAITING_MANUAL_INTERVENTION
    assert instance.steps[0] is StepStatus.COMPENSATION_UNCONFIRMED


def test_s_step_06_compensation_out_of_attempts_awaits_manual_intervention() -> None:
    def decide(c: CommandEnvelope) -> Decision:
        if c.phase is Phase.COMPENSATE:
            return Decision.TRANSIENT_FAILURE  # participant never commits it
        return Decision.REJECT if c.step_index == 1 else Decision.SUCCEED

    driver, saga_id = run(ART, decide)
    compensations = [c for c in commands(driver) if c.phase is Phase.COMPENSATE]
    assert [c.attempt for c in compensations] == [1, 2]
    assert driver.store.instances[saga_id].status is SagaStatus.AWAITING_MANUAL_INTERVENTION


def test_s_step_07_terminal_statuses_are_exactly_three_and_absorbing() -> None:
    assert {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.MANUALLY_CLOSED,
    } == TERMINAL_STATUSES
    assert {s for s, nxt in SAGA_TRANSITIONS.items() if s is not None and not nxt} == TERMINAL_STATUSES
    driver, saga_id = run(ART, always(Decision.SUCCEED))
    instance = driver.store.instances[saga_id]
    last = commands(driver)[-1]
    assert isinstance(react(instance, ART, AttemptTimedOut(last.command_id)), IllegalTransition)
    answered = StepAnswered(Phase.EXECUTE, 2, last.effect_id, ResultKind.REJECTED)
    assert isinstance(react(instance, ART, answered), IllegalTransition)


def test_s_step_08_tables_forbid_leaving_terminal_and_failed_states() -> None:
    for status in TERMINAL_STATUSES:
        assert not any(saga_transition_legal(status, after) for after in SagaStatus)
    assert not saga_transition_legal(SagaStatus.COMPENSATING, SagaStatus.RUNNING)
    assert not saga_transition_legal(None, SagaStatus.COMPLETED)
    assert not step_transition_legal(StepStatus.FAILED, StepStatus.COMPENSATING)
    assert not step_transition_legal(StepStatus.UNCERTAIN, StepStatus.COMPENSATING)
    assert set(STEP_TRANSITIONS) == set(StepStatus)


def test_s_step_08_journal_violations_detects_broken_histories() -> None:
    driver, saga_id = run(ART, at(1, Decision.REJECT))
    journal = journal_of(driver.store, saga_id)
    assert journal_violations(journal) == ()
    skipped = journal[:1] + journal[2:]
    assert journal_violations(skipped)
    illegal = (*journal, attrs.evolve(journal[-1], revision=len(journal) + 1, before=journal[-1].after))
    assert journal_violations(illegal)
    restarted = (attrs.evolve(journal[0], before=SagaStatus.RUNNING), *journal[1:])
    assert journal_violations(restarted)


# -- properties of react ----------------------------------------------------------------


def fresh_instance(art: DefinitionArtifact) -> SagaInstance:
    instance, _, _ = begin("saga-x", art, definition_digest(art), "d", "k", SagaPayload(b"{}", JSON_CONTRACT))
    return instance


moves = st.lists(
    st.one_of(
        st.sampled_from(list(ResultKind)).map(lambda k: ("answer", k)),
        st.just(("timeout", None)),
        st.sampled_from(["stale-answer", "stale-timeout"]).map(lambda k: (k, None)),
    ),
    max_size=25,
)


@given(artifacts(), moves)
def test_s_step_08_every_reaction_is_sound_and_journals_legally(
    art: DefinitionArtifact, script: list[tuple[str, ResultKind | None]]
) -> None:
    instance = fresh_instance(art)
    journal: list[JournalEntry] = [
        JournalEntry("saga-x", 1, None, SagaStatus.RUNNING, 0, Phase.EXECUTE, Cause.STARTED, None)
    ]
    for move, kind in script:
        awaiting = instance.awaiting
        if awaiting is None:
            break
        if move == "answer":
            assert kind is not None
            event: StepAnswered | AttemptTimedOut = StepAnswered(
                awaiting.phase, awaiting.step_index, awaiting.effect_id, kind
            )
        elif move == "timeout":
            event = AttemptTimedOut(awaiting.command_id)
        elif move == "stale-answer":
            event = StepAnswered(awaiting.phase, awaiting.step_index, "eff-other", ResultKind.SUCCEEDED)
        else:
            event = AttemptTimedOut("cmd-other")
        result = react(instance, art, event)
        assert reaction_is_sound(instance, result)
        if move.startswith("stale"):
            assert isinstance(result, IllegalTransition)
            continue
        assert isinstance(result, Reaction)
        entry = result.entry
        # S-STEP-03/05: an unconfirmed effect never jumps straight to compensation
        if entry.cause in (Cause.UNKNOWN, Cause.TIMED_OUT) and awaiting.phase is not Phase.COMPENSATE:
            assert entry.after not in (SagaStatus.COMPENSATING, SagaStatus.COMPENSATED)
        # only succeeded steps are ever compensated
        if result.dispatch is not None and result.dispatch.phase is Phase.COMPENSATE:
            assert instance.steps[result.dispatch.step_index] in (
                StepStatus.SUCCEEDED,
                StepStatus.COMPENSATING,
            )
        journal.append(entry)
        instance = result.instance
    assert journal_violations(journal) == ()


@given(artifacts(), moves)
def test_s_step_07_timeouts_alone_end_every_saga_in_a_terminal_state(
    art: DefinitionArtifact, prefix: list[tuple[str, ResultKind | None]]
) -> None:
    instance = fresh_instance(art)
    for move, kind in prefix:
        if instance.awaiting is None or move != "answer" or kind is None:
            continue
        aw = instance.awaiting
        result = react(instance, art, StepAnswered(aw.phase, aw.step_index, aw.effect_id, kind))
        assert isinstance(result, Reaction)
        instance = result.instance
    bound = sum(s.max_attempts + s.resolve_budget for s in art.steps) * 2 + 2
    for _ in range(bound):
        if instance.awaiting is None:
            break
        result = react(instance, art, AttemptTimedOut(instance.awaiting.command_id))
        assert isinstance(result, Reaction)
        instance = result.instance
    # Settled: terminal, or awaiting manual intervention, which only management leaves (S-STEP-07).
    assert instance.status in SETTLED_STATUSES and instance.awaiting is None


def test_s_step_08_plan_is_sound_on_every_shape_up_to_three_steps() -> None:
    """Exhaustive over all awaited shapes, signals, attempts, budgets and policies (n <= 3)."""
    checked = 0
    for n in (1, 2, 3):
        for steps in itertools.product(list(StepStatus), repeat=n):
            for phase, status in PHASE_STATUS.items():
                for index in range(n):
                    if not awaiting_shape(status, steps, phase, index):
                        continue
                    policies = [UncertainPolicy.RESOLVE] if phase is Phase.RESOLVE else list(UncertainPolicy)
                    for signal, attempt, budget, policy in itertools.product(
                        [None, *ResultKind], (1, 2, 3), (1, 2, 3), policies
                    ):
                        result = plan(status, steps, phase, index, attempt, signal, policy, budget, budget)
                        assert plan_is_sound(status, steps, phase, signal, result), (steps, phase, signal)
                        checked += 1
    assert checked > 1_000
