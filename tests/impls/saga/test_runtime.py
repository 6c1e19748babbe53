"""The saga runtime (impls.saga) over every saga backend: the contract's flows end to end."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from impls.saga import (
    Orchestrator,
    Participant,
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaCapabilities,
    SagaTransaction,
    UnfencedTimers,
)
from impls.saga import _unit as unit
from impls.saga._unit import READ_ATTEMPTS, read_only
from impls.saga.memory._backend import MemorySagaBackend
from model.saga import (
    AlreadyExists,
    ChangeLifecycle,
    CommandEnvelope,
    CommandProcessed,
    CommitFate,
    DeadLettered,
    Decision,
    DuplicateCommand,
    DuplicateResult,
    EligibilityRevoked,
    InstanceReleased,
    LifecycleAction,
    LifecycleChanged,
    MessageRefused,
    Phase,
    QuotaExhausted,
    QuotaMode,
    ReferenceKind,
    ResultApplied,
    RetirementBlocked,
    RolledBack,
    SagaStatus,
    StaleFencingToken,
    Started,
    StartSaga,
    TimerClaimed,
    TimerRenewed,
    saga_id_for,
)

from .conftest import KEY, ORCHESTRATOR, Rig, make_rig


def _status(rig: Rig, saga_id: str) -> SagaStatus:
    instance = rig.orch.instance(saga_id)
    assert instance is not None
    return instance.status


def _effects(rig: Rig) -> dict[str, list[str]]:
    return {owner: [e.effect_id for e in part.effects()] for owner, part in rig.parts.items()}


def test_happy_saga_completes_and_applies_each_effect_once(rig: Rig) -> None:
    started = rig.start()
    rig.drive()
    assert _status(rig, started.saga_id) is SagaStatus.COMPLETED
    assert [(c.step_index, c.phase) for c in rig.delivered] == [(i, Phase.EXECUTE) for i in range(3)]
    assert all(len(effects) == 1 for effects in _effects(rig).values())
    assert rig.orch.start_saga(StartSaga(KEY, "k1", json_payload=b'{"qty":1}'), 0) == AlreadyExists(
        started.saga_id, started.start_digest
    )


def test_failing_step_compensates_completed_steps_in_reverse_order(rig: Rig) -> None:
    """S-STEP-02: charge rejected -> unhold, then unreserve -> Compensated."""
    started = rig.start()

    def reject_charge(command: CommandEnvelope) -> Decision:
        return Decision.REJECT if command.step_index == 2 else Decision.SUCCEED

    rig.drive(reject_charge)
    assert _status(rig, started.saga_id) is SagaStatus.COMPENSATED
    compensations = [c.step_index for c in rig.delivered if c.phase is Phase.COMPENSATE]
    assert compensations == [1, 0]


def test_uncertain_effect_is_resolved_then_completes(rig: Rig) -> None:
    """S-STEP-04: reserve left unknown -> resolve by effect_id -> confirmed -> the saga goes on."""
    started = rig.start()
    first = True

    def reserve_unknown_once(command: CommandEnvelope) -> Decision:
        nonlocal first
        if first:
            first = False
            return Decision.UNKNOWN
        return Decision.SUCCEED

    rig.drive(reserve_unknown_once)
    assert _status(rig, started.saga_id) is SagaStatus.COMPLETED
    resolve = [c for c in rig.delivered if c.phase is Phase.RESOLVE]
    assert len(resolve) == 1 and resolve[0].target_effect_id == rig.delivered[0].effect_id
    assert _effects(rig)["p0"] == [rig.delivered[0].effect_id]  # applied once, by the resolve


def test_uncertain_effect_under_manual_policy_awaits_intervention(rig: Rig) -> None:
    """S-STEP-05: charge left unknown with the manual-intervention policy -> no retry, no compensation."""
    started = rig.start()

    def charge_unknown(command: CommandEnvelope) -> Decision:
        return Decision.UNKNOWN if command.step_index == 2 else Decision.SUCCEED

    rig.drive(charge_unknown)
    assert _status(rig, started.saga_id) is SagaStatus.AWAITING_MANUAL_INTERVENTION
    assert not rig.orch.pending_commands()
    assert all(c.phase is Phase.EXECUTE for c in rig.delivered)


def test_duplicate_command_and_result_are_absorbed(rig: Rig) -> None:
    """S-PART-02, S-ORCH-03: redelivered envelopes change nothing; the effect is applied once."""
    started = rig.start()
    command, first = rig.command()
    assert isinstance(first, CommandProcessed) and not first.absorbed
    again = rig.parts["p0"].handle_command(command, ORCHESTRATOR, Decision.SUCCEED)
    assert again == DuplicateCommand(command.command_id)
    envelope, applied = rig.result("p0")
    assert isinstance(applied, ResultApplied)
    assert rig.orch.handle_result(envelope, "p0", rig.now) == DuplicateResult(envelope.message_id)
    assert _effects(rig)["p0"] == [command.effect_id]
    assert len(rig.orch.journal(started.saga_id)) == 2  # start + one applied result


def test_a_dead_letter_outlives_the_participant_process(rig: Rig) -> None:
    """S-PART-04, S-PART-02: the spent budget's dead letter is claimed in the inbox, so a copy met
    by a participant built anew on the same rows (a restarted process) is a duplicate and never
    runs; kept in memory, saga-durability's seed 20261130 ran it after a reopen."""
    rig.start()
    command, first = rig.command(lambda _: Decision.TRANSIENT_FAILURE)
    assert isinstance(first, RolledBack)
    part = rig.parts["p0"]
    assert part.handle_command(command, ORCHESTRATOR, Decision.TRANSIENT_FAILURE) == DeadLettered(
        command.command_id, 2
    )
    restarted = Participant(part.backend, part.config)
    assert restarted.handle_command(command, ORCHESTRATOR, Decision.SUCCEED) == DuplicateCommand(
        command.command_id
    )
    assert _effects(rig)["p0"] == [] and restarted.pending_results() == ()


def test_a_restarted_participant_counts_failures_afresh(rig: Rig) -> None:
    """S-PART-04 (decided, docs/saga-contract.md): the failure count is the consuming process's."""
    rig.start()
    command, first = rig.command(lambda _: Decision.TRANSIENT_FAILURE)
    assert isinstance(first, RolledBack)
    restarted = Participant(rig.parts["p0"].backend, rig.parts["p0"].config)
    assert isinstance(restarted.handle_command(command, ORCHESTRATOR, Decision.TRANSIENT_FAILURE), RolledBack)
    processed = restarted.handle_command(command, ORCHESTRATOR, Decision.SUCCEED)
    assert isinstance(processed, CommandProcessed)


def test_forged_result_is_refused_and_takes_no_inbox_key(rig: Rig) -> None:
    """S-ORCH-01: wrong owner, wrong digest or untrusted producer: refused before the claim."""
    rig.start()
    rig.command()
    envelope = rig.parts["p0"].pending_results()[0]
    forgeries = [
        (attrs.evolve(envelope, owner="p1"), "p1"),
        (attrs.evolve(envelope, definition_digest="0" * 64), "p0"),
        (envelope, "mallory"),
    ]
    for forged, producer in forgeries:
        assert isinstance(rig.orch.handle_result(forged, producer, rig.now), MessageRefused)
        assert not read_only(rig.orch.backend, lambda tx: tx.result_claimed(envelope.message_id))
    assert isinstance(rig.orch.handle_result(envelope, "p0", rig.now), ResultApplied)


def test_stale_timer_token_is_refused(rig: Rig) -> None:
    """S-TIMER-02: w1's lease lapses, w2 takes over; w1 can neither renew nor fire."""
    rig.start()
    (timer,) = rig.orch.due_timers(10_000)
    first = rig.orch.claim_timer(timer.timer_id, "w1", 10_000, 50)
    assert isinstance(first, TimerClaimed)
    second = rig.orch.claim_timer(timer.timer_id, "w2", 10_050, 50)
    assert isinstance(second, TimerClaimed) and second.token > first.token
    stale = StaleFencingToken(timer.timer_id, first.token, second.token)
    assert rig.orch.renew_timer(timer.timer_id, first.token, 10_060, 50) == stale
    assert rig.orch.fire_timer(timer.timer_id, first.token, 10_060) == stale
    assert isinstance(rig.orch.renew_timer(timer.timer_id, second.token, 10_060, 50), TimerRenewed)


class _UnfencedBackend(MemorySagaBackend):
    """A store that does not fence its timer writes (or does not say it does)."""

    @property
    def capabilities(self) -> SagaCapabilities:
        return SagaCapabilities(fenced_timers=False)


def test_an_orchestrator_refuses_a_backend_without_fenced_timers() -> None:
    """S-TIMER-01..04 rest on the store's fence (seed: 由 store 提供的 fencing capability 约束), and
    the runtime checks none itself: it refuses to run on a store that does not offer one."""
    with pytest.raises(UnfencedTimers):
        Orchestrator(_UnfencedBackend("unfenced"), frozenset({"p0"}))
    assert Orchestrator(MemorySagaBackend("fenced"), frozenset({"p0"})).backend.capabilities.fenced_timers


def test_an_expired_lease_lost_authority_without_a_takeover(rig: Rig) -> None:
    """S-TIMER-04 (N-04): w1's lease ran out, nobody claimed since; w1 can no longer renew,
    release or fire, the timer is unchanged and claimable again."""
    rig.start()
    (timer,) = rig.orch.due_timers(10_000)
    held = rig.orch.claim_timer(timer.timer_id, "w1", 10_000, 50)
    assert isinstance(held, TimerClaimed)
    lost = StaleFencingToken(timer.timer_id, held.token, held.token)
    assert rig.orch.renew_timer(timer.timer_id, held.token, 10_050, 50) == lost
    assert rig.orch.release_timer(timer.timer_id, held.token, 10_050) == lost
    assert rig.orch.fire_timer(timer.timer_id, held.token, 10_050) == lost
    assert isinstance(rig.orch.claim_timer(timer.timer_id, "w2", 10_050, 50), TimerClaimed)


def test_rolled_back_start_leaves_nothing(open_backend: Callable[[str], SagaBackend]) -> None:
    """S-START-08, S-TX-01: a start that fails before COMMIT, or whose host revokes it, writes nothing."""

    def fates(unit: str) -> CommitFate:
        return CommitFate.ROLLED_BACK if unit == "start" else CommitFate.COMMITTED

    rig = make_rig(open_backend, fates)
    request = StartSaga(KEY, "k1", json_payload=b'{"qty":1}')
    started_id = saga_id_for(KEY.tenant, KEY.workflow, "k1")
    assert rig.orch.start_saga(request, 0) == RolledBack()
    assert rig.orch.start_saga(request, 0, lambda checkpoint: checkpoint == 0) == EligibilityRevoked(1)

    def everything(tx: SagaTransaction) -> tuple[object, ...]:
        return (
            tx.load_receipt(started_id),
            tx.list_instances(),
            tx.journal(),
            tx.list_commands(),
            tx.list_timers(),
            tx.quota_used(KEY.tenant),
        )

    assert read_only(rig.orch.backend, everything) == (None, (), (), (), (), 0)


def test_s_cat_07_published_commands_block_retirement_until_released_with_their_instance(rig: Rig) -> None:
    """N-11: a finished saga's published commands are retained messages: retirement is refused
    while they stay, and releasing the instance releases them under the same policy."""
    started = rig.start()
    rig.drive()
    assert _status(rig, started.saga_id) is SagaStatus.COMPLETED
    rig.orch.change_lifecycle(ChangeLifecycle(KEY, LifecycleAction.DEPRECATE), 0)
    blocked = rig.orch.change_lifecycle(ChangeLifecycle(KEY, LifecycleAction.RETIRE), 0)
    assert isinstance(blocked, RetirementBlocked)
    assert {r.kind for r in blocked.references} == {ReferenceKind.INSTANCE, ReferenceKind.OUTBOX}
    assert rig.orch.release_instance(started.saga_id) == InstanceReleased(started.saga_id)
    assert not read_only(rig.orch.backend, lambda tx: tx.list_commands())
    retired = rig.orch.change_lifecycle(ChangeLifecycle(KEY, LifecycleAction.RETIRE), 0)
    assert isinstance(retired, LifecycleChanged)


@pytest.mark.parametrize("mode", list(QuotaMode))
def test_s_start_13_a_completed_saga_returns_its_unit_in_flight(rig: Rig, mode: QuotaMode) -> None:
    """N-10: with the quota counting instances in flight, the transition that completes a saga
    returns its unit (the next key starts); counting admitted starts, it stays refused."""
    rig.orch.quota_limit, rig.orch.quota_mode = 1, mode
    rig.start("k1")
    rig.drive()
    after = rig.orch.start_saga(StartSaga(KEY, "k2", json_payload=b'{"qty":1}'), 0)
    if mode is QuotaMode.IN_FLIGHT:
        assert isinstance(after, Started)
    else:
        assert after == QuotaExhausted(KEY.tenant, 1)
    replay = rig.orch.start_saga(StartSaga(KEY, "k1", json_payload=b'{"qty":1}'), 0)
    assert isinstance(replay, AlreadyExists)  # a replay takes no unit in either mode


@pytest.mark.parametrize(("refusals", "answered"), [(READ_ATTEMPTS - 1, True), (READ_ATTEMPTS, False)])
def test_a_read_the_database_refused_is_run_again_bounded(
    refusals: int, answered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S-TX-01: a read has no effect, so a definite rollback of it (PostgreSQL's SSI picks a
    read-only transaction as its victim too) is run again, at most ``READ_ATTEMPTS`` times; a
    contended saga run on PostgreSQL ended in a harness error on the observer's read before."""
    monkeypatch.setattr(unit, "READ_BACKOFF_S", 0.0)  # the attempts, not their pauses
    backend = MemorySagaBackend("reads")
    begin, left = backend.begin, [refusals]

    def refused_read() -> SagaTransaction:
        tx = begin()
        if left[0]:
            left[0] -= 1

            def list_effects() -> tuple[()]:
                raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")

            tx.list_effects = list_effects  # type: ignore[method-assign]
        return tx

    backend.begin = refused_read  # type: ignore[method-assign]
    if answered:
        assert read_only(backend, lambda tx: tx.list_effects()) == ()
    else:
        with pytest.raises(SagaBackendError):
            read_only(backend, lambda tx: tx.list_effects())
    assert left == [0]


def test_a_read_that_failed_otherwise_is_not_run_again() -> None:
    backend = MemorySagaBackend("reads")
    calls = []

    def unavailable(tx: SagaTransaction) -> None:
        calls.append(tx)
        raise SagaBackendError(SagaBackendErrorKind.UNAVAILABLE, "the database did not answer")

    with pytest.raises(SagaBackendError):
        read_only(backend, unavailable)
    assert len(calls) == 1


def test_a_read_whose_begin_the_database_refused_is_run_again() -> None:
    """S-TX-01: a BEGIN the database refused started nothing, so the read runs again like any
    other refused read (route03's contended PostgreSQL run ended in a harness error on it)."""
    backend = MemorySagaBackend("reads")
    begin, left = backend.begin, [2]

    def refused_begin() -> SagaTransaction:
        if left[0]:
            left[0] -= 1
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "statement failed")
        return begin()

    backend.begin = refused_begin  # type: ignore[method-assign]
    assert read_only(backend, lambda tx: tx.list_effects()) == ()
    assert left == [0]
