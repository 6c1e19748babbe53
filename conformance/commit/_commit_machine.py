"""Commit level: MessageCommitter + store + outbox + manual clock + membership, under faults.

Every committer the machine starts talks to the store through ``ObservedStore``, so each store call
it makes is applied to the model in lock step and judged; the committer's own outcome (an ACK or a
``CommitError``) is judged against what the model allowed *before* the call:

* an ACK only for a key the model holds COMMITTED, equal to the model's ``CommittedMessage`` and to
  its first coordinates (C-POST-10, C-POST-01);
* a conflicting retry is CONFLICT, never an ACK (C-PRE-03); a new key from a non-member is
  NOT_A_MEMBER (C-PRE-08); RECOVERABLE carries the key, and only when something went wrong in the
  call (a fault, an uncertain outcome, a concurrent worker) (C-ERR-03, C-POST-08);
* nothing but ``CommitError`` leaves the committer (C-ERR-02);
* the outbox holds one entry per committed key, and it is the publication the store committed
  (C-POST-07, C-POST-04: ``_outbox.py``); ``readiness`` reaches the outbox (C-PRE-06).

Faults are rules: ``arm_crash`` kills the next committer that reaches a named fault point (a
``BaseException`` from the fault hook; the committer is abandoned and a new one resumes later),
``arm_store_fault`` loses the next store response or fails the next call before it applies,
``arm_outbox_fault`` loses the outbox's answer after it appended, fails a publish before it reaches
the outbox, or takes the outbox down for a few calls,
``concurrent`` runs two or three committers on one key interleaved at store-call boundaries by the
deterministic scheduler (the schedule is a drawn list of ints), ``recover`` sweeps, and
``advance_clock`` moves time. At quiescence recovery runs until nothing is due, and every reserved
key must be COMMITTED with its first coordinates (C-POST-02, C-POST-09); then each key is replayed
(the original ``CommittedMessage``, C-POST-09) and published again (its one entry, C-POST-07).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, multiple, rule

from conformance._faults import CRASH, INTERLEAVE
from conformance._machine import step
from conformance._outage import bounded
from conformance._scheduler import Gate, Scheduler, SchedulerHang, WorkerOutcome
from conformance._violations import HarnessEnvironmentError
from conformance.commit import _vocabulary as v
from conformance.commit._config_rules import ConfigRules
from conformance.commit._faults import OUTBOX_FAULTS, WorkerKilled
from conformance.commit._judge import OUTBOX_CHECKS, show
from conformance.commit._oracle import HaltExample, ObservedStore
from conformance.commit._outbox import (
    WIRE_KINDS_ON_PUBLISH,
    ObservedOutbox,
    OutboxOracle,
    long_listing,
    publish_on_wire,
)
from conformance.commit._quota_rules import QuotaRules
from conformance.commit._readiness_rules import ReadinessRules
from conformance.commit._recovery_rules import RecoveryRules
from conformance.commit._settle import gave_up_unsettled, own_crash
from conformance.commit._store_machine import CONVERSATIONS, KEYS, STORE_FAULTS, VARIANTS, CommitWorld
from conformance.commit._target import CommitTarget
from impls.api import ListableOutbox, MessageStore, Outbox
from impls.commit import MessageCommitter, Quota
from model.commit import (
    MAX_SCAN_ITEMS,
    CommitError,
    CommitErrorKind,
    CommitKey,
    CommitStage,
    CommittedMessage,
    FaultPoint,
    MessageStoreError,
    identity_matches,
)
from model.commit import scan_recoverable_commits as model_scan

ACK = "ack"
NONE = "none"
_RECOVERABLE = CommitErrorKind.RECOVERABLE.value
_WIRE_RECONNECT_ROUNDS = 11  # about 12 s of backoff, as the oracle read-backs
_QUIESCENCE_ROUNDS = 6
# Small, so that an outage of three calls (arm_store_fault(calls=3)) exhausts a call and RECOVERABLE
# (C-ERR-03) is reached; any value >= 1 is a legal configuration of the committer.
COMMITTER_ATTEMPTS = 3


class CommitMachine(RecoveryRules, QuotaRules, ReadinessRules, ConfigRules, CommitWorld):
    reserved = Bundle("reserved")

    def __init__(self) -> None:
        super().__init__()
        target: CommitTarget = self.context.target
        self.outbox: Outbox | None = None
        self.outbox = self.run(target.open_outbox(self.namespace))
        self.outbox_oracle = OutboxOracle(self.oracle, self.outbox)
        details = self.context.stats.details
        details.setdefault("outbox_lists_entries", str(isinstance(self.outbox, ListableOutbox)))
        details.setdefault("outbox_on_wire", str(target.outbox_on_wire))
        if target.wire is not None and not target.outbox_on_wire:  # wire-request-lost: a publish's only
            details.setdefault("outbox_on_wire_kinds", "not applicable: the outbox factory takes no endpoint")
        self.crash_at: set[FaultPoint] = set()  # armed crashes; each fires once
        self.step_stores: list[ObservedStore] = []  # the committers' stores of the current step
        self.last_failures: list[Any] | None = None  # store errors the last driven worker was given

    # --- building workers ----------------------------------------------------------------------

    def committer(
        self,
        gate: Gate | None = None,
        conversation: str = "c1",
        real: MessageStore | None = None,
        quota: Quota | None = None,
    ) -> MessageCommitter:
        """A new committer; ``real``: another store object of the namespace (two-clients); ``quota``:
        the suite's send quota (``_quota_rules``); c2's keep their default retention (``v.retention``)."""
        assert self.outbox is not None
        store = ObservedStore(self.oracle, gate, for_committer=True, real=real)
        self.step_stores.append(store)
        target: CommitTarget = self.context.target
        if not (retention := v.retention(conversation)):
            self.context.reach("committer-default-retention")
        return (target.committer_factory or MessageCommitter)(
            store,
            ObservedOutbox(self.outbox_oracle, gate),
            self.membership,
            self,
            fault_hook=self._fault_hook,
            max_attempts=COMMITTER_ATTEMPTS,
            quota=quota,
            **retention,
        )

    async def _fault_hook(self, point: FaultPoint, key: CommitKey) -> None:
        self.context.reach(f"passed:{point.value}")
        if point in self.crash_at:
            self.crash_at.discard(point)
            self.context.inject(CRASH.name)
            self.context.reach(f"crash-at:{point.value}")
            self.note(f"crash at {point.value} ({v.key_name(key)}): the committer is abandoned")
            if point is FaultPoint.M_COMMIT_04:
                self.outbox_oracle.expect_reuse(key, point.value)
            raise WorkerKilled(point)

    async def _observed(self, work: Awaitable[Any]) -> Any:
        """Await ``work``, then read back what it wrote, whether it returned, failed or crashed."""
        try:
            result = await work
        except HaltExample:
            raise
        except BaseException:
            await self.observe_touched()
            raise
        await self.observe_touched()
        return result

    def drive(self, body: Callable[[Gate | None], Awaitable[Any]]) -> WorkerOutcome[Any]:
        """Run one worker alone (no scheduler); a crash or CommitError is its outcome."""
        mark = len(self.oracle.failed_calls)
        self.last_failures = None

        async def worker() -> Any:
            try:
                return await body(None)
            finally:  # before the harness's own read-back (judged by ``gave_up_unsettled``)
                self.last_failures = self.oracle.failed_calls[mark:]

        try:
            return WorkerOutcome(0, value=self.run(self._observed(worker())))
        except HaltExample as halt:
            raise halt.violation from None
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            if self.oracle.violation is not None:
                raise self.oracle.violation from None
            return WorkerOutcome(0, error=error)

    async def _sweep(self, gate: Gate | None) -> int:
        return await self.committer(gate).recover_due(self.now + 1, MAX_SCAN_ITEMS)

    # --- judging a committer's outcome ---------------------------------------------------------

    def expect_send(self, key: CommitKey, variant: str) -> frozenset[str]:
        request = v.request(key, variant)
        entry = self.oracle.state.commits.get(key)
        if entry is not None:
            if identity_matches(entry.identity, request):
                return frozenset({ACK})
            return frozenset({CommitErrorKind.CONFLICT.value})
        if key.sender not in self.membership.snapshot(key.tenant, request.conversation):
            return frozenset({CommitErrorKind.NOT_A_MEMBER.value})
        return frozenset({ACK})

    def judge(
        self, how: str, key: CommitKey, allowed: frozenset[str], outcome: WorkerOutcome[Any], disturbed: bool
    ) -> None:
        name = v.key_name(key)
        error = outcome.error
        if isinstance(error, HaltExample):
            raise error.violation
        if self.oracle.violation is not None:
            raise self.oracle.violation
        if isinstance(error, WorkerKilled):
            return
        if error is not None and not isinstance(error, CommitError):
            raise self.oracle.fail(
                "C-ERR-02",
                f"{how} for {name} raised {type(error).__name__}, not CommitError",
                error=repr(error)[:300],
            ).violation
        if isinstance(error, CommitError):
            if own_crash(error):  # a bug of the committer's own, not a store or outbox failure
                raise self.oracle.fail("C-ERR-02", own_crash(error) or "", error=repr(error)[:300]).violation
            self.context.reach("rule:C-ERR-02")
            kind = error.kind.value
            if error.kind is CommitErrorKind.RECOVERABLE:
                if error.key != key:
                    raise self.oracle.fail(
                        "C-ERR-03", f"{how} for {name} returned RECOVERABLE without its key"
                    ).violation
                if gave_up := gave_up_unsettled(self.last_failures, COMMITTER_ATTEMPTS, f"{how} for {name}"):
                    raise self.oracle.fail("C-POST-08", gave_up).violation
                if disturbed or _RECOVERABLE in allowed:
                    self.context.reach("rule:C-ERR-03")
                    return
                raise self.oracle.fail(
                    "C-POST-08",
                    f"{how} for {name} gave up (RECOVERABLE) although no call failed",
                    allowed=sorted(allowed),
                ).violation
            if kind in allowed:
                if error.kind is CommitErrorKind.CONFLICT:
                    self.context.reach("rule:C-PRE-03")
                if error.kind is CommitErrorKind.NOT_A_MEMBER:
                    self.context.reach("rule:C-PRE-08")
                return
            rule_id = {"conflict": "C-PRE-03", "not-a-member": "C-PRE-08"}.get(kind, "C-ERR-02")
            raise self.oracle.fail(
                rule_id, f"{how} for {name} failed as {kind}; allowed: {', '.join(sorted(allowed))}"
            ).violation
        value = outcome.value
        if value is None:
            if NONE in allowed:
                return
            raise self.oracle.fail(
                "C-POST-09", f"{how} for {name} returned nothing for a reserved key"
            ).violation
        if ACK not in allowed:
            rule_id = "C-PRE-03" if CommitErrorKind.CONFLICT.value in allowed else "C-PRE-08"
            if CommitErrorKind.NOT_FOUND.value in allowed or NONE in allowed:
                rule_id = "C-POST-10"
            raise self.oracle.fail(
                rule_id,
                f"{how} for {name} acknowledged {show(value)}; "
                f"the contract says {', '.join(sorted(allowed))}",
            ).violation
        if not isinstance(value, CommittedMessage):
            raise self.oracle.fail("C-ERR-02", f"{how} for {name} returned {type(value).__name__}").violation
        self.oracle.check_ack(key, value, how)

    def note_continuations(self) -> None:
        """Coverage (C-POST-09): a committer that first found a key in flight at a stage, and the key
        is now COMMITTED, continued from that stage."""
        for store in self.step_stores:
            for key, stage in store.first_seen.items():
                if self._stage_of(key) == CommitStage.COMMITTED.name:
                    self.context.reach(f"continued-from:{stage}")
        self.step_stores.clear()

    def after_step(self) -> None:
        self.note_continuations()
        super().after_step()
        self.outbox_oracle.check_store()

    def _stage_of(self, key: CommitKey) -> str:
        entry = self.oracle.state.commits.get(key)
        return "ABSENT" if entry is None else entry.stage.name

    # --- clients -------------------------------------------------------------------------------

    @rule(target=reserved, key=KEYS, variant=VARIANTS)
    @step
    def send(self, key: str, variant: str) -> Any:
        """A client sends, or retries: with the same payload, or changing one identity field."""
        commit_key = v.parse_key(key)
        existed = commit_key in self.oracle.state.commits
        allowed = self.expect_send(commit_key, variant)
        request = v.request(commit_key, variant)
        before = self.oracle.disturbances
        committer = self.committer(conversation=request.conversation)
        outcome = self.drive(lambda gate: committer.send(request))
        self.judge("send", commit_key, allowed, outcome, self.oracle.disturbances > before)
        return key if not existed and commit_key in self.oracle.state.commits else multiple()

    @rule(key=KEYS, problem=st.sampled_from(("bad-client-message-id", "custom-without-type")))
    @step
    def send_invalid(self, key: str, problem: str) -> None:
        """C-PRE-01: an invalid client message id (or content) is refused before anything is written."""
        commit_key = v.parse_key(key)
        send, _, _ = v.invalid_reserve(commit_key, problem, frozenset(), self.now)
        committer = self.committer()
        outcome = self.drive(lambda gate: committer.send(send))
        allowed = frozenset(
            {
                CommitErrorKind.INVALID_CLIENT_MESSAGE_ID.value
                if problem == "bad-client-message-id"
                else CommitErrorKind.INVALID_REQUEST.value
            }
        )
        self.judge("send", send.commit_key, allowed, outcome, False)
        self.context.reach("rule:C-PRE-01")

    @rule(key=reserved)
    @step
    def resume(self, key: str) -> None:
        """A new committer continues a reserved key from its durable stage (C-POST-09)."""
        commit_key = v.parse_key(key)
        conversation = self.oracle.conversation_of[commit_key]
        before = self.oracle.disturbances
        committer = self.committer(conversation=conversation)
        outcome = self.drive(lambda gate: committer.resume(commit_key, conversation))
        self.judge("resume", commit_key, frozenset({ACK}), outcome, self.oracle.disturbances > before)

    @rule(key=KEYS, variant=VARIANTS)
    @step
    def resume_existing(self, key: str, variant: str) -> None:
        """C-PRE-03: finish this exact request if it was reserved; None if never; conflict otherwise."""
        commit_key = v.parse_key(key)
        entry = self.oracle.state.commits.get(commit_key)
        request = v.request(commit_key, variant)
        if entry is None:
            allowed = frozenset({NONE})
        elif identity_matches(entry.identity, request):
            allowed = frozenset({ACK})
        else:
            allowed = frozenset({CommitErrorKind.CONFLICT.value})
        before = self.oracle.disturbances
        committer = self.committer(conversation=request.conversation)
        outcome = self.drive(lambda gate: committer.resume_existing(request))
        self.judge("resume_existing", commit_key, allowed, outcome, self.oracle.disturbances > before)

    @rule(
        key=KEYS,
        workers=st.lists(st.sampled_from(("send", "resume")), min_size=2, max_size=3),
        schedule=st.lists(st.integers(min_value=0, max_value=2), max_size=16),
    )
    @step
    def concurrent(self, key: str, workers: list[str], schedule: list[int]) -> None:
        """Two or three committers on one key, switched at store-call boundaries as ``schedule`` says."""
        if not self.context.faults.allows(INTERLEAVE.name):
            return
        commit_key = v.parse_key(key)
        request = v.request(commit_key)
        # resume finds the key where it was reserved, which a conflicting first send may have moved
        conversation = self.oracle.conversation_of.get(commit_key, request.conversation)
        reserved_before = commit_key in self.oracle.state.commits
        send_allowed = self.expect_send(commit_key, "same") | {_RECOVERABLE}
        resume_allowed = frozenset({ACK, _RECOVERABLE} | (set() if reserved_before else {"not-found"}))

        def body(kind: str) -> Callable[[Gate], Awaitable[Any]]:
            async def run(gate: Gate) -> Any:
                committer = self.committer(gate, conversation)
                if kind == "send":
                    return await committer.send(request)
                return await committer.resume(commit_key, conversation)

            return run

        scheduler = Scheduler(schedule)
        try:
            outcomes = self.run(scheduler.run([body(kind) for kind in workers]))
        except SchedulerHang as hang:
            raise self.oracle.fail(
                "C-POST-08", f"concurrent committers on {key} hung: {hang}"
            ).violation from None
        self.context.inject(INTERLEAVE.name)
        self.note(f"interleaving: {scheduler.turns}")
        acks: set[CommittedMessage] = set()
        self.last_failures = None  # interleaved workers share the store: not one worker's failures
        for kind, outcome in zip(workers, outcomes, strict=True):
            allowed = send_allowed if kind == "send" else resume_allowed
            self.judge(f"concurrent {kind} (worker {outcome.worker})", commit_key, allowed, outcome, True)
            if isinstance(outcome.value, CommittedMessage):
                acks.add(outcome.value)
        if len(acks) > 1:
            raise self.oracle.fail(
                "C-POST-10", f"concurrent committers on {key} acknowledged different messages"
            ).violation
        if len(acks) == 1 and len(workers) > 1:
            self.context.reach("concurrent-acknowledged")

    # --- recovery, the world, faults -------------------------------------------------------------

    @rule(
        tenant=st.sampled_from(v.TENANTS),
        conversation=CONVERSATIONS,
        actor=st.sampled_from(v.READERS),
        direction=st.sampled_from(("before", "after")),
    )
    @step
    def read_history(self, tenant: str, conversation: str, actor: str, direction: str) -> None:
        """Members read the conversation; non-members are refused (C-PRE-05, C-POST-11)."""
        query = v.history_query(tenant, conversation, actor, direction, None, 100, 1 << 20, self.now)
        self.call(ObservedStore(self.oracle).history_page(query))

    @rule(
        tenant=st.sampled_from(v.TENANTS),
        conversation=CONVERSATIONS,
        members=st.sampled_from(tuple(v.MEMBER_SETS)),
    )
    @step
    def set_members(self, tenant: str, conversation: str, members: str) -> None:
        """Membership changes (after reserve, too): recovery must keep the frozen delivery (C-PRE-02)."""
        self._set_members(tenant, conversation, members)

    @rule(ms=st.sampled_from(v.CLOCK_STEPS_MS))
    @step
    def advance_clock(self, ms: int) -> None:
        self.now += ms
        self.context.inject("clock-advance")

    @rule(point=st.sampled_from([p.value for p in FaultPoint]))
    @step
    def arm_crash(self, point: str) -> None:
        """The next committer to reach fault point ``point`` dies there (armed crashes add up)."""
        if self.context.faults.allows(CRASH.name, point):
            self.crash_at.add(FaultPoint(point))

    @rule(kind=st.sampled_from(tuple(STORE_FAULTS)), calls=st.sampled_from((1, 3)))
    @step
    def arm_store_fault(self, kind: str, calls: int) -> None:
        """The next store call, whoever makes it, fails after applying or before applying."""
        if self.context.faults.allows(kind):
            self.oracle.arm(STORE_FAULTS[kind], calls)

    @rule(kind=st.sampled_from(tuple(OUTBOX_FAULTS)), calls=st.sampled_from((1, 3)))
    @step
    def arm_outbox_fault(self, kind: str, calls: int) -> None:
        """The next publish loses its answer after appending, or fails before; or the outbox is down
        for ``calls`` calls (publish and readiness)."""
        if self.context.faults.allows(kind):
            self.outbox_oracle.arm(OUTBOX_FAULTS[kind], calls)

    # --- the end -------------------------------------------------------------------------------

    def at_quiescence(self) -> None:
        """After recovery every reserved key is COMMITTED with its first coordinates (C-POST-02, -09)."""
        self.crash_at.clear()
        self.oracle.arm(None)
        self.outbox_oracle.arm(None)
        self.sweep_in_small_batches()
        unavailable = 0
        rounds = _QUIESCENCE_ROUNDS
        while rounds > 0:
            rounds -= 1
            due = model_scan(self.oracle.state, self.now + 1, MAX_SCAN_ITEMS)
            assert isinstance(due, list)
            if not due:
                break
            outcome = self.drive(self._sweep)
            if outcome.error is not None and not isinstance(outcome.error, CommitError):
                raise self.oracle.fail("C-ERR-02", f"recover_due raised {outcome.error!r}"[:300]).violation
            error = outcome.error
            if isinstance(error, CommitError) and error.kind is CommitErrorKind.UNAVAILABLE:
                if self.oracle.wire is not None and unavailable < _WIRE_RECONNECT_ROUNDS:
                    # A healed wire fault can leave the driver reconnecting (cassandra-driver marks
                    # its only host down): wait for it, bounded, before judging what recovery left.
                    unavailable += 1
                    rounds += 1
                    self.run(asyncio.sleep(min(0.05 * 2**unavailable, 2.0)))
                    continue
                if self.oracle.wire is not None:
                    raise HarnessEnvironmentError(
                        f"the backend stayed unavailable for the recovery sweep at quiescence: {error}"
                    )
            unavailable = 0
            if any(self._stage_of(i.key) == CommitStage.COMMITTED.name for i in due):
                self.context.reach("recovered")
            self.note_continuations()
        self.sweep_loop_survives_a_failure()
        self.quota_across_time()
        self.configuration_held()
        for key in sorted(self.oracle.state.commits, key=CommitKey.sort_key):
            entry = self.oracle.state.commits[key]
            if entry.stage is not CommitStage.COMMITTED:
                raise self.oracle.fail(
                    "C-POST-02",
                    f"after recovery {v.key_name(key)} is still {entry.stage.name}: "
                    "a reserved commit was stranded",
                ).violation
            if entry.coordinates != self.oracle.first_coordinates.get(key, entry.coordinates):
                raise self.oracle.fail(
                    "C-POST-01", f"{v.key_name(key)} ended with other coordinates"
                ).violation
            self.call(self.oracle.observe(key))
            self.replay_and_probe(key)
        try:
            self.run(self.outbox_oracle.audit())
            listable = isinstance(self.outbox, ListableOutbox)
            if listable and "outbox-long-listing-audited" not in self.context.stats.reached:  # once a run
                self.run(long_listing(self.outbox_oracle, self.context))
            self.publish_on_wire()
        except HaltExample as halt:
            raise halt.violation from None
        if self.oracle.state.commits:
            self.context.reach("quiescent-all-committed")
        store = ObservedStore(self.oracle)
        self.become_quiescent(store)
        self.call(store.scan_recoverable_commits(self.now + 1, MAX_SCAN_ITEMS))
        self.read_all_history(store)

    def publish_on_wire(self) -> None:
        """Once a run, until each is met, where the outbox is on the wire: a publish meeting each of
        ``WIRE_KINDS_ON_PUBLISH`` on a fresh outbox (``_outbox.publish_on_wire``, C-POST-07). No
        example's own program met a wire fault on a publish before (docs/faults.md)."""
        target: CommitTarget = self.context.target
        reached = self.context.stats.reached
        due = [k for k in WIRE_KINDS_ON_PUBLISH if f"outbox-met-wire:{k.name}" not in reached]
        due = [k for k in due if self.context.faults.allows(k.name)]
        ready = getattr(self, "_ready_again", None)  # WireFaultRules, mixed in on a wire
        if target.outbox_on_wire and due and ready is not None:
            self.run(publish_on_wire(self.outbox_oracle, self.context, due, ready))

    def replay_and_probe(self, key: CommitKey) -> None:
        """A COMMITTED key replays its original ``CommittedMessage`` (C-POST-09), and publishing it
        again answers with its one outbox entry (C-POST-07)."""
        expected = self.oracle.state.commits[key].committed_message(key)
        conversation = self.oracle.conversation_of[key]
        committer = self.committer(conversation=conversation)
        self.step_stores.pop()  # a replay proves no continuation (the continued-from:* targets)
        outcome = self.drive(lambda gate: committer.resume(key, conversation))
        if outcome.value != expected:
            got = show(outcome.value) if outcome.error is None else repr(outcome.error)[:200]
            raise self.oracle.fail(
                OUTBOX_CHECKS["replay-changed"],
                f"a replay of {v.key_name(key)} answered {got}; it was committed as {show(expected)}",
            ).violation
        self.context.reach("rule:C-POST-09")
        try:
            self.run(self.outbox_oracle.probe(key, self.oracle.intents[key], expected.publication))
        except HaltExample as halt:
            raise halt.violation from None

    def close(self) -> None:
        try:
            if self.outbox is not None:
                outbox, self.outbox = self.outbox, None
                with contextlib.suppress(MessageStoreError):
                    self.run(bounded("the outbox's close", outbox.close(), self.context))
        finally:
            super().close()
