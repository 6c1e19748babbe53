"""Durable timers with fencing tokens (S-TIMER-*)."""

from __future__ import annotations

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from model.saga import (
    ClaimTimer,
    CommitFate,
    Decision,
    FireTimer,
    NoSuchTimer,
    OrchestratorStore,
    ReleaseTimer,
    RenewTimer,
    RolledBack,
    SagaStatus,
    StaleFencingToken,
    Timer,
    TimerClaimed,
    TimerFired,
    TimerLeased,
    TimerNotDue,
    TimerObsolete,
    TimerReleased,
    TimerRenewed,
    claim_timer,
    fence_holds,
    fire_timer,
    pending_commands,
    release_timer,
    renew_timer,
    timer_id_for,
)
from model.saga._timers import schedule_timer
from tests.model.saga.builders import Driver, always, participants, started, store_with, three_steps

ART = three_steps()
TIMEOUT = ART.steps[0].timeout_ms


def one_timer() -> tuple[OrchestratorStore, str]:
    store, _ = started(store_with(ART), ART.key)
    (command,) = pending_commands(store)
    return store, timer_id_for(command.command_id)


def claim(
    store: OrchestratorStore, timer_id: str, worker: str, now: int, lease: int = 100
) -> tuple[OrchestratorStore, TimerClaimed]:
    store, outcome = claim_timer(store, ClaimTimer(timer_id, worker, now, lease))
    assert isinstance(outcome, TimerClaimed), outcome
    return store, outcome


def test_s_timer_01_the_holder_renews_releases_and_fires_with_its_token() -> None:
    store, timer_id = one_timer()
    store, held = claim(store, timer_id, "w1", TIMEOUT)
    store, renewed = renew_timer(store, RenewTimer(timer_id, held.token, TIMEOUT + 50, 100))
    assert renewed == TimerRenewed(timer_id, held.token, TIMEOUT + 150)
    store, released = release_timer(store, ReleaseTimer(timer_id, held.token, TIMEOUT + 50))
    assert released == TimerReleased(timer_id) and store.timers.timers[timer_id].lease is None
    store, again = claim(store, timer_id, "w1", TIMEOUT + 60)
    store, fired = fire_timer(store, FireTimer(timer_id, again.token, TIMEOUT + 60))
    assert isinstance(fired, TimerFired) and timer_id not in store.timers.timers


def test_s_timer_02_a_worker_whose_lease_was_taken_over_changes_nothing() -> None:
    store, timer_id = one_timer()
    store, old = claim(store, timer_id, "w1", TIMEOUT, lease=100)
    store, new = claim(store, timer_id, "w2", TIMEOUT + 100)  # w1's lease ran out
    assert new.token > old.token
    for request in (
        RenewTimer(timer_id, old.token, TIMEOUT + 100, 100),
        ReleaseTimer(timer_id, old.token, TIMEOUT + 100),
        FireTimer(timer_id, old.token, TIMEOUT + 100),
    ):
        op = {RenewTimer: renew_timer, ReleaseTimer: release_timer, FireTimer: fire_timer}[type(request)]
        after, outcome = op(store, request)  # type: ignore[operator]
        assert outcome == StaleFencingToken(timer_id, old.token, new.token)
        assert after is store


def test_s_timer_02_unclaimed_or_removed_timers_refuse_fenced_operations() -> None:
    store, timer_id = one_timer()
    after, outcome = fire_timer(store, FireTimer(timer_id, 1, TIMEOUT))
    assert outcome == StaleFencingToken(timer_id, 1, None) and after is store
    after, missing = renew_timer(store, RenewTimer("tmr-none", 1, 0, 10))
    assert missing == NoSuchTimer("tmr-none") and after is store


def test_s_timer_03_no_claim_reuses_a_token_across_timers_and_removals() -> None:
    """S-TIMER-03 asks for unique tokens; the model's counter also makes them increase."""
    store, timer_id = one_timer()
    tokens = []
    now = TIMEOUT
    for _ in range(3):
        store, held = claim(store, timer_id, "w", now)
        tokens.append(held.token)
        store, fired = fire_timer(store, FireTimer(timer_id, held.token, now))
        assert isinstance(fired, TimerFired)
        assert fired.dispatched is not None
        timer_id = timer_id_for(fired.dispatched)
        now += 10 * TIMEOUT
    assert tokens == sorted(set(tokens)) and store.timers.last_token == tokens[-1]


def test_s_timer_04_claimable_only_when_due_and_not_under_a_live_lease() -> None:
    store, timer_id = one_timer()
    after, early = claim_timer(store, ClaimTimer(timer_id, "w1", TIMEOUT - 1, 100))
    assert early == TimerNotDue(timer_id, TIMEOUT) and after is store
    store, held = claim(store, timer_id, "w1", TIMEOUT, lease=100)
    after, busy = claim_timer(store, ClaimTimer(timer_id, "w2", TIMEOUT + 99, 100))
    assert busy == TimerLeased(timer_id, TIMEOUT + 100) and after is store
    # expired, not taken over: the holder lost its authority all the same (seed: 失权 worker 不能继续推进;
    # nasaga fences on claimed_until > now, docs/nasaga-findings.md N-04)
    lost = StaleFencingToken(timer_id, held.token, held.token)
    late = TIMEOUT + 100
    for request in (
        RenewTimer(timer_id, held.token, late, 100),
        ReleaseTimer(timer_id, held.token, late),
        FireTimer(timer_id, held.token, late),
    ):
        op = {RenewTimer: renew_timer, ReleaseTimer: release_timer, FireTimer: fire_timer}[type(request)]
        after, outcome = op(store, request)  # type: ignore[operator]
        assert outcome == lost and after is store
    store, again = claim(store, timer_id, "w1", late)  # claimable, a new token
    assert again.token != held.token


def test_s_timer_05_firing_and_the_timeout_transition_commit_together() -> None:
    store, timer_id = one_timer()
    store, held = claim(store, timer_id, "w1", TIMEOUT)
    rolled, outcome = fire_timer(store, FireTimer(timer_id, held.token, TIMEOUT, CommitFate.ROLLED_BACK))
    assert isinstance(outcome, RolledBack) and rolled is store
    after, fired = fire_timer(store, FireTimer(timer_id, held.token, TIMEOUT))
    assert isinstance(fired, TimerFired)
    assert timer_id not in after.timers.timers
    assert fired.dispatched is not None and timer_id_for(fired.dispatched) in after.timers.timers
    assert after.journal[-1] == fired.entry and fired.dispatched in after.outbox
    assert len(after.journal) == len(store.journal) + 1


def test_s_timer_05_a_settled_commands_timer_completes_without_transition() -> None:
    store, saga_id = started(store_with(ART), ART.key)
    driver = Driver(store, participants(store))
    driver.run(always(Decision.SUCCEED))
    done = driver.store
    assert done.instances[saga_id].status is SagaStatus.COMPLETED
    stray = Timer("tmr-stray", saga_id, "cmd-old", 0)
    store = attrs.evolve(done, timers=schedule_timer(done.timers, stray))
    store, held = claim(store, "tmr-stray", "w", 0)
    after, outcome = fire_timer(store, FireTimer("tmr-stray", held.token, 0))
    assert outcome == TimerObsolete("tmr-stray")
    assert after.journal == done.journal and "tmr-stray" not in after.timers.timers


class FencingMachine(RuleBasedStateMachine):
    """Several workers race over the timers of a few sagas with stale and fresh tokens."""

    @initialize()
    def setup(self) -> None:
        store = store_with(ART)
        for key in ("a", "b"):
            store, _ = started(store, ART.key, key)
        self.store = store
        self.now = 0
        self.held: list[tuple[str, int]] = []
        self.issued: list[int] = []

    def timer_ids(self) -> list[str]:
        return sorted(self.store.timers.timers)

    @rule(ms=st.integers(0, 2 * TIMEOUT))
    def advance(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.store.timers.timers)
    @rule(data=st.data(), lease=st.integers(1, 500))
    def claim(self, data: st.DataObject, lease: int) -> None:
        timer_id = data.draw(st.sampled_from(self.timer_ids()))
        self.store, outcome = claim_timer(self.store, ClaimTimer(timer_id, "w", self.now, lease))
        if isinstance(outcome, TimerClaimed):
            assert all(outcome.token > t for t in self.issued)
            self.issued.append(outcome.token)
            self.held.append((timer_id, outcome.token))

    @precondition(lambda self: self.held)
    @rule(
        data=st.data(),
        op=st.sampled_from(["renew", "release", "fire"]),
        fate=st.sampled_from(list(CommitFate)),
    )
    def fenced(self, data: st.DataObject, op: str, fate: CommitFate) -> None:
        timer_id, token = data.draw(st.sampled_from(self.held))
        before = self.store
        timer = before.timers.timers.get(timer_id)
        valid = timer is not None and fence_holds(timer, token, self.now)
        outcome: object
        if op == "renew":
            self.store, outcome = renew_timer(before, RenewTimer(timer_id, token, self.now, 100))
        elif op == "release":
            self.store, outcome = release_timer(before, ReleaseTimer(timer_id, token, self.now))
        else:
            self.store, outcome = fire_timer(before, FireTimer(timer_id, token, self.now, fate))
        if not valid:
            assert isinstance(outcome, StaleFencingToken | NoSuchTimer)
            assert self.store is before
        else:
            assert not isinstance(outcome, StaleFencingToken | NoSuchTimer)

    @invariant()
    def tokens_only_grow(self) -> None:
        if hasattr(self, "store"):
            last = self.store.timers.last_token
            assert last == (max(self.issued) if self.issued else 0)
            for timer in self.store.timers.timers.values():
                assert timer.lease is None or timer.lease.token <= last


FencingMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_s_timer_02_fencing_machine = FencingMachine.TestCase
