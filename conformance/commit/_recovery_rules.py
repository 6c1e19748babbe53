"""Recovery sweeps (C-POST-02): the ``recover`` rule, and the shipped ``CommitRecovery`` at quiescence.

Mixed into the commit machine (its world: oracle, committer, drive). ``recover`` sweeps mid-run,
through ``recover_due`` or ``CommitRecovery.run_once``. Two directed checks at quiescence, both
C-POST-02 ("a client that never retries cannot leave an unrecoverable RESERVED"), which holds in a
deployment only if the sweeper finishes what it finds and keeps sweeping:

* ``sweep_in_small_batches``: when two or more commits are due, one ``run_once`` in batches of one
  finishes all of them (a full batch means there may be more; target ``recovery-batches-continued``).
  The ``recover`` rule sweeps in batches too, but a random program seldom leaves two keys due with
  nothing armed, so a sweep that stopped after its first full batch passed (docs/sensitivity.md).
* ``sweep_loop_survives_a_failure``: ``run_forever`` with its first sweep failed by a store fault
  (scan UNAVAILABLE) must sweep again, not end, and must sweep at all while its stop event is unset
  (target ``recovery-loop-swept-after-failure``). No suite ran the loop a deployment runs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._faults import CRASH, FAILED_BEFORE, RECOVERY_SWEEP
from conformance._machine import ConformanceMachine, step
from conformance._outage import BackendLost, bounded
from conformance.commit import _vocabulary as v
from conformance.commit._faults import WorkerKilled
from impls.api import Clock
from impls.commit import CommitRecovery, MessageCommitter
from model.commit import (
    MAX_SCAN_ITEMS,
    CommitError,
    CommitErrorKind,
    CommitStage,
    FaultPoint,
    TimestampMillis,
)
from model.commit import scan_recoverable_commits as model_scan

#: Sweeps the loop may make before the check stops it (each is a scan of an empty candidate set).
_LOOP_SWEEPS = 20
#: Every how many examples two commits are left in flight for ``sweep_in_small_batches`` (the first,
#: then one in four: the check needs one example to catch a sweep that stops early, not all).
_LEAVE_DUE_EVERY = 4


class _SweepProbe:
    """Stands in front of a committer for ``CommitRecovery``: records each ``recover_due`` outcome
    and sets ``stop`` after the first sweep that succeeds once the armed failure has been seen."""

    def __init__(self, committer: MessageCommitter, stop: asyncio.Event, failure_armed: bool) -> None:
        self._committer = committer
        self._stop = stop
        self._failure_armed = failure_armed
        self.outcomes: list[str] = []

    async def recover_due(self, older_than: TimestampMillis, max_items: int) -> int:
        try:
            recovered = await self._committer.recover_due(older_than, max_items)
        except CommitError:
            self.outcomes.append("failed")
            if len(self.outcomes) >= _LOOP_SWEEPS:
                self._stop.set()
            raise
        self.outcomes.append("ok")
        if "failed" in self.outcomes or not self._failure_armed or len(self.outcomes) >= _LOOP_SWEEPS:
            self._stop.set()
        return recovered


class RecoveryRules(ConformanceMachine):
    """Mixed into the commit machine; ``at_quiescence`` calls the two sweeps (nothing armed)."""

    if TYPE_CHECKING:
        oracle: Any
        membership: Any
        now: int
        crash_at: set[FaultPoint]

        def committer(self, gate: Any = None, conversation: str = "c1") -> MessageCommitter: ...

        def drive(self, body: Any) -> Any: ...

        def note_continuations(self) -> None: ...

    @rule(age=st.sampled_from(("everything", "older-than-5s")), batch=st.sampled_from((None, 1, 2)))
    @step
    def recover(self, age: str, batch: int | None) -> None:
        """A recovery sweep: every due intent is resumed from its stored facts (C-POST-02); with a
        ``batch``, the shipped ``CommitRecovery`` sweeps (minimum age 0 or 5 s) in batches that size."""
        min_age = 0 if age == "everything" else 5_000
        older_than = self.now + 1 if batch is None and age == "everything" else self.now - min_age
        due = model_scan(self.oracle.state, older_than, MAX_SCAN_ITEMS)
        assert isinstance(due, list)
        before = self.oracle.disturbances
        committer = self.committer()
        sweep = (
            CommitRecovery(committer, cast(Clock, self), min_age_ms=min_age, batch=batch) if batch else None
        )
        outcome = self.drive(
            lambda gate: sweep.run_once() if sweep else committer.recover_due(older_than, MAX_SCAN_ITEMS)
        )
        self.context.inject(RECOVERY_SWEEP.name)
        disturbed = self.oracle.disturbances > before
        if isinstance(outcome.error, WorkerKilled):
            return
        if outcome.error is not None:
            if (
                isinstance(outcome.error, CommitError)
                and outcome.error.kind is CommitErrorKind.UNAVAILABLE
                and disturbed
            ):
                return
            raise self.oracle.fail(
                "C-ERR-02" if not isinstance(outcome.error, CommitError) else "C-POST-02",
                f"recover_due failed: {outcome.error!r}"[:300],
            ).violation
        if disturbed:
            return
        stranded = [
            intent.key
            for intent in due
            if (entry := self.oracle.state.commits.get(intent.key)) is None
            or entry.stage is not CommitStage.COMMITTED
        ]
        if stranded:
            raise self.oracle.fail(
                "C-POST-02", f"recovery left {', '.join(v.key_name(k) for k in stranded)} unfinished"
            ).violation
        if outcome.value != len(due):
            raise self.oracle.fail(
                "C-POST-02", f"recover_due reported {outcome.value} recovered; {len(due)} were due"
            ).violation
        if due:
            self.context.reach("recovered")

    def sweep_in_small_batches(self) -> None:
        """C-POST-02: with two or more commits due, one sweep in batches of one finishes them all
        (``_leave_due`` leaves two in flight first, in one example of ``_LEAVE_DUE_EVERY``)."""
        if self.context.stats.examples % _LEAVE_DUE_EVERY == 1:  # its cost: two sends and their replays
            self._leave_due(2)
        self.now += 1  # a sweep of minimum age 0 takes what was accepted before now
        due = model_scan(self.oracle.state, self.now, MAX_SCAN_ITEMS)
        assert isinstance(due, list)
        if len(due) < 2:
            return
        before = self.oracle.disturbances
        sweep = CommitRecovery(self.committer(), cast(Clock, self), min_age_ms=0, batch=1)
        outcome = self.drive(lambda gate: sweep.run_once())
        self.note_continuations()
        if self.oracle.disturbances > before or isinstance(outcome.error, CommitError):
            return  # a backend's own uncertain answer (a wire backend reconnecting): not judged here
        if outcome.error is not None:
            raise self.oracle.fail(
                "C-ERR-02", f"CommitRecovery.run_once raised {outcome.error!r}"[:300]
            ).violation
        stranded = [
            v.key_name(intent.key)
            for intent in due
            if (entry := self.oracle.state.commits.get(intent.key)) is None
            or entry.stage is not CommitStage.COMMITTED
        ]
        if stranded or outcome.value != len(due):
            raise self.oracle.fail(
                "C-POST-02",
                f"one recovery sweep in batches of 1 committed {outcome.value} of the {len(due)} due "
                f"with nothing armed; left unfinished: {', '.join(stranded) or 'none'}",
            ).violation
        self.context.reach("recovery-batches-continued")
        self.context.reach("recovered")

    def _leave_due(self, wanted: int) -> None:
        """Until ``wanted`` commits are in flight: a fresh key sent by a member, its committer killed
        once its reserve is durable (M-COMMIT-02), as a client that never comes back leaves it."""
        point = FaultPoint.M_COMMIT_02
        if not self.context.faults.allows(CRASH.name, point.value):
            return
        for name in v.KEYS:
            in_flight = model_scan(self.oracle.state, self.now + 1, MAX_SCAN_ITEMS)
            assert isinstance(in_flight, list)
            if len(in_flight) >= wanted:
                return
            key = v.parse_key(name)
            request = v.request(key)
            if key in self.oracle.state.commits or key.sender not in self.membership.snapshot(
                key.tenant, request.conversation
            ):
                continue
            self.crash_at.add(point)
            committer = self.committer(conversation=request.conversation)
            self.drive(lambda gate, c=committer, r=request: c.send(r))
            self.crash_at.discard(point)
        self.note_continuations()

    def sweep_loop_survives_a_failure(self) -> None:
        """C-POST-02: the deployment's sweep loop sweeps, and a failed sweep does not end it."""
        failure_armed = self.context.faults.allows(FAILED_BEFORE.name)
        stop = asyncio.Event()
        probe = _SweepProbe(self.committer(), stop, failure_armed)
        loop = CommitRecovery(cast(MessageCommitter, probe), cast(Clock, self), min_age_ms=0)
        if failure_armed:
            self.oracle.arm(FAILED_BEFORE, 1)  # the first sweep's scan fails before it applies
        try:
            outcome = self.drive(
                lambda gate: bounded("CommitRecovery.run_forever", loop.run_forever(stop, 0.0), self.context)
            )
        finally:
            self.oracle.arm(None)
        self.note_continuations()
        if isinstance(outcome.error, BackendLost):
            raise outcome.error
        if outcome.error is not None:
            raise self.oracle.fail(
                "C-POST-02",
                f"the recovery loop ended with {outcome.error!r} after sweeps {probe.outcomes}: "
                "a failed sweep must be retried by the next one"[:300],
            ).violation
        if not probe.outcomes or (failure_armed and "ok" not in probe.outcomes and len(probe.outcomes) < 2):
            raise self.oracle.fail(
                "C-POST-02",
                f"the recovery loop returned after sweeps {probe.outcomes or 'none'} while its stop "
                "event was unset: nothing recovers a client that never retries",
            ).violation
        if failure_armed and probe.outcomes[0] == "failed" and len(probe.outcomes) > 1:
            self.context.reach("recovery-loop-swept-after-failure")
