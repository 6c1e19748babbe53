"""The clock and fenced timer workers: claims, fires, renewals, lease takeovers (S-TIMER-*)."""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from conformance._machine import step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._base import SagaMachineBase, fates, indexes, unwrapped
from conformance.saga._faults import LEASE_LOST
from conformance.saga._metrics_checks import check_facts
from conformance.saga._port import DueTimersPort
from model import saga as m


class TimerRules(SagaMachineBase):
    #: The database facts were compared once while a timer was leased (``claim_timer``).
    leased_facts_checked = False

    # -- clock and timers ----------------------------------------------------------------

    @rule(ms=st.sampled_from([10, 60, 120, 500]))
    @step
    def advance_clock(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.caps.timers)
    @rule(worker=st.sampled_from(w.WORKERS), index=indexes)
    @step
    def claim_timer(self, worker: str, index: int) -> None:
        due = m.due_timers(self.model.timers, self.now)
        if not due and self.model.timers.timers:
            # Nothing due yet: the worker waits until the next timer or lease expiry.
            self.now = max(
                self.now,
                min(
                    max(t.due_ms, 0 if t.lease is None else t.lease.expires_ms)
                    for t in self.model.timers.timers.values()
                ),
            )
            due = m.due_timers(self.model.timers, self.now)
        if self.caps.lists_due_timers:  # the runtime's own list of claimable timers (S-TIMER-04)
            listed = cast(DueTimersPort, self.runtime).due_timer_ids(self.now)
            if listed != tuple(sorted(t.timer_id for t in due)):
                raise Violation(
                    "S-TIMER-04",
                    "the timers the runtime lists as claimable differ from the model's",
                    {"expected": ", ".join(sorted(t.timer_id for t in due)), "actual": ", ".join(listed)},
                )
        if not due:
            return
        # Expired leases first: taking one over is the interesting case (a stale holder remains).
        due = tuple(sorted(due, key=lambda t: t.lease is None))
        if not self._allows(LEASE_LOST):
            # Only timers no other worker still holds a token for: a takeover is the fault.
            taken = {timer_id for other, (timer_id, _) in self.leases.items() if other != worker}
            due = tuple(t for t in due if t.timer_id not in taken)
            if not due:
                return
        timer = due[index % len(due)] if index % 2 else due[0]
        request = m.ClaimTimer(timer.timer_id, worker, self.now, w.LEASE_MS)
        self.model, expected = m.claim_timer(self.model, request)
        actual = self.runtime.claim_timer(timer.timer_id, worker, self.now, w.LEASE_MS)
        self.expect("S-TIMER-03", expected, actual)
        if isinstance(expected, m.TimerClaimed):
            for other, (held, _token) in self.leases.items():
                if other != worker and held == timer.timer_id:
                    self.context.inject(LEASE_LOST.name)  # the other worker still holds a stale token
            self.leases[worker] = (timer.timer_id, expected.token)
            if not self.leased_facts_checked:
                # once per example, while the lease is held: the timer gauges split scheduled from
                # leased (S-OBS-06), and a renewal by the holder extends it (S-TIMER-01)
                self.leased_facts_checked = True
                if self.caps.metrics:
                    check_facts(self)
                    self.context.reach("obs:facts-with-a-leased-timer")
                unwrapped(type(self).renew_or_release)(self, worker=worker, renew=True)
                self.context.reach("timer-renewed-while-held")

    @precondition(lambda self: self.caps.timers)
    @rule(worker=st.sampled_from(w.WORKERS), fate=fates)
    @step
    def fire_timer(self, worker: str, fate: str) -> None:
        if worker not in self.leases:
            return
        timer_id, token = self.leases[worker]
        commit = self._set_fate(fate)
        before = self.model
        self.model, expected = m.fire_timer(before, m.FireTimer(timer_id, token, self.now, commit))
        actual = self.runtime.fire_timer(timer_id, token, self.now)
        self.fate = m.CommitFate.COMMITTED
        if self.database_refused(commit, actual):
            refused = m.FireTimer(timer_id, token, self.now, m.CommitFate.ROLLED_BACK)
            self.model, expected = m.fire_timer(before, refused)
            self.refated()
        stale = isinstance(expected, m.StaleFencingToken)
        if stale:
            self.context.reach("fenced-write-refused")
        rule_id = "S-TIMER-02" if stale else "S-TIMER-05"
        self.expect("S-MGT-05" if isinstance(expected, m.TimerDeferred) else rule_id, expected, actual)
        if not isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            del self.leases[worker]

    @precondition(lambda self: self.caps.timers)
    @rule(fate=fates)
    @step
    def stale_worker_advances(self, fate: str) -> None:
        """w1 claims a timer, its lease lapses, w2 takes it over, w1 still tries to fire (S-TIMER-02)."""
        if not self.model.timers.timers or not self._allows(LEASE_LOST):
            return
        self.leases.pop("w1", None)
        self.leases.pop("w2", None)
        unwrapped(type(self).claim_timer)(self, worker="w1", index=0)
        if "w1" not in self.leases:
            return
        self.now += w.LEASE_MS
        unwrapped(type(self).claim_timer)(self, worker="w2", index=0)
        unwrapped(type(self).fire_timer)(self, worker="w1", fate=fate)

    @precondition(lambda self: self.caps.timers)
    @rule(worker=st.sampled_from(w.WORKERS), renew=st.booleans())
    @step
    def renew_or_release(self, worker: str, renew: bool) -> None:
        if worker not in self.leases:
            return
        timer_id, token = self.leases[worker]
        expected: object
        if renew:
            self.model, renewed = m.renew_timer(
                self.model, m.RenewTimer(timer_id, token, self.now, w.LEASE_MS)
            )
            expected = renewed
            actual: object = self.runtime.renew_timer(timer_id, token, self.now, w.LEASE_MS)
        else:
            self.model, released = m.release_timer(self.model, m.ReleaseTimer(timer_id, token, self.now))
            expected = released
            actual = self.runtime.release_timer(timer_id, token, self.now)
            del self.leases[worker]
        self.expect(
            "S-TIMER-02" if isinstance(expected, m.StaleFencingToken) else "S-TIMER-01", expected, actual
        )
