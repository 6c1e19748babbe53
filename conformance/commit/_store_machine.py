"""Store level: every ``MessageStore`` call beside the model, outcomes compared exactly.

Each rule is one store call (or one change to the world around the store: membership, clock, an
armed fault). The call goes through ``ObservedStore``, which applies the model in lock step and
judges the outcome; after each step the keys the step wrote are read back (``observe``).

Rule arguments are names from ``_vocabulary`` so the shrunk program reads as a script::

    reserve(key='t1/alice/m1', variant='same')
    arm_store_fault(kind='response-lost')
    put_record(key='t1/alice/m1')

Keys that a ``reserve`` created go into the ``reserved`` bundle, which the transition rules draw
from, so deep stages are reached within a few steps. ``mark_published_and_committed`` runs on every
store: one atomic step where the store declares it (C-POST-05), the default two steps elsewhere
(C-POST-06), where an uncertain outcome may legally stop at OUTBOXED (``StoreOracle.settle``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, multiple, rule

from conformance._cleanup import offers_drop
from conformance._faults import FAILED_BEFORE, RESPONSE_LOST
from conformance._machine import ConformanceMachine, step
from conformance._outage import bounded
from conformance.commit import _vocabulary as v
from conformance.commit._cleanup_judge import CommitCleanupJudge
from conformance.commit._corrupt_rules import CorruptRules
from conformance.commit._edge_rules import EdgeRules
from conformance.commit._endpoint_rules import EndpointRules
from conformance.commit._legacy_rules import LegacyRules
from conformance.commit._oracle import HaltExample, ObservedStore, StoreOracle
from conformance.commit._target import CommitTarget
from conformance.commit._wire_rules import SCAN_ALL_DUE
from impls.api import InMemoryMembership, MessageStore
from model.commit import (
    MAX_INT64,
    MAX_SCAN_ITEMS,
    CommitIntent,
    CommitKey,
    CommitStage,
    HistoryPage,
    HistoryQuery,
    MessageStoreError,
)
from model.commit import history_page as model_history_page

KEYS = st.sampled_from(v.KEYS)
# The store level plays on fewer keys than the commit level: repeats and conflicts need collisions.
STORE_KEYS = st.sampled_from(v.STORE_KEYS)
CONVERSATIONS = st.sampled_from(v.CONVERSATIONS)
# Half the time a true retry, half the time one identity field changed (a conflict, C-PRE-03).
VARIANTS = st.one_of(st.just("same"), st.sampled_from(v.CONFLICT_VARIANTS))
INVALID_CALLS = (
    *(f"reserve:{p}" for p in v.RESERVE_PROBLEMS),
    f"scan:{0}",
    f"scan:{MAX_SCAN_ITEMS + 1}",
    *(f"history:{p}" for p in v.HISTORY_PROBLEMS),
)
# A key no rule draws (carol never sends): walked through every stage at quiescence.
STAGE_WALK_KEY = "t1/carol/m1"
REPEAT_WALK_KEY = "t1/carol/m2"  # ``repeat_walk``'s key: no drawn rule names it
ATOMIC_WALK_KEY = "t2/carol/m1"  # ``atomic_walk``'s: no drawn rule names it either
# Byte budgets at the edge of a page (``StoreMachine._byte_fit``).
BYTE_FITS = ("fit-1", "fit", "fit+1")
STORE_FAULTS = {RESPONSE_LOST.name: RESPONSE_LOST, FAILED_BEFORE.name: FAILED_BEFORE}


class CommitWorld(ConformanceMachine):
    """What both commit-family machines share: a store on a fresh namespace, the oracle, the world."""

    def __init__(self) -> None:
        super().__init__()
        target: CommitTarget = self.context.target
        self.namespace = self.context.new_namespace()
        self.membership = InMemoryMembership()
        self.member_sets: dict[tuple[str, str], str] = {}
        self.member_versions: dict[tuple[str, str], int] = {}
        for tenant in v.TENANTS:
            for conversation in v.CONVERSATIONS:
                self._set_members(tenant, conversation, v.INITIAL_MEMBERS)
        self.now = v.T0
        self.real: MessageStore | None = None
        self.real = self.run(target.open_store(self.namespace, self.membership))
        self.oracle = StoreOracle(
            self.context, self.real, self.membership, self.namespace, self.note, wire=target.proxy
        )
        details = self.context.stats.details
        details.setdefault("wire", str(target.wire is not None))
        details.setdefault(
            "atomic_publish_and_commit", str(self.oracle.capabilities.atomic_publish_and_commit)
        )
        details.setdefault("drops_namespaces", str(offers_drop(self.real)))  # C-POST-12 judged
        details.setdefault("store_type", f"{type(self.real).__module__}.{type(self.real).__qualname__}")

    def now_ms(self) -> int:
        return self.now

    def _set_members(self, tenant: str, conversation: str, members: str) -> None:
        ref = (tenant, conversation)
        self.member_sets[ref] = members
        self.member_versions[ref] = self.member_versions.get(ref, 0) + 1
        self.membership.set_members(tenant, conversation, v.MEMBER_SETS[members])

    def members_version(self, tenant: str, conversation: str) -> tuple[frozenset[str], int]:
        """Current members and their version (the harness set both, so no directory call)."""
        version = self.member_versions.get((tenant, conversation), 0)
        return self.membership.snapshot(tenant, conversation), version

    def call(self, coro: Awaitable[Any]) -> Any:
        """Drive one store call and read back what it wrote, in one turn of the event loop.

        The oracle already judged the call, so a refusal is just None here.
        """
        try:
            return self.run(self._then_observe(coro))
        except HaltExample as halt:
            raise halt.violation from None
        finally:
            if self.oracle.violation is not None:
                raise self.oracle.violation  # the first violation wins over anything else

    async def _then_observe(self, coro: Awaitable[Any]) -> Any:
        try:
            result = await coro
        except MessageStoreError:
            result = None
        await self.observe_touched()
        return result

    async def observe_touched(self) -> None:
        """After a step: each key it wrote reads back as the model holds it (C-POST-08 and the rest)."""
        oracle = self.oracle
        while oracle.touched:
            touched = sorted(oracle.touched, key=CommitKey.sort_key)
            oracle.touched.clear()
            for key in touched:
                await oracle.observe(key)

    def after_step(self) -> None:
        if self.oracle.touched:
            self.call(self.observe_touched())

    def become_quiescent(self, store: ObservedStore) -> None:
        """Faults are disarmed: once readiness answers, every read must settle (C-PRE-06)."""

        async def ready() -> bool:
            try:
                await store.readiness()
            except MessageStoreError:
                return False
            return True

        self.oracle.quiescent = bool(self.call(ready()))

    def read_all_history(self, store: ObservedStore) -> None:
        """Every conversation's history, now and a day later, and at the edge of each registered
        expiry (its last visible millisecond and its first gone one: the expiry is the sum of the
        acceptance time and the retention, C-POST-05, and the clock's coarse steps would let a
        miscomputed one pass); now also in both directions with the byte budget at the edge of the
        first two entries (``_byte_fit``, C-POST-11)."""
        for tenant, conversation in sorted(self.oracle.state.history):
            members = sorted(self.membership.snapshot(tenant, conversation))
            if not members:
                continue
            records = self.oracle.state.history[tenant, conversation].values()
            expiries = sorted({r.expires_at_ms for r in records if r.expires_at_ms is not None})
            edges = [t for e in expiries[:4] for t in (e - 1, e) if 0 <= t <= MAX_INT64]
            if edges:
                self.context.reach("history-at-expiry-edge")
            for as_of in (self.now, self.now + v.DAY_MS, *edges):
                query = v.history_query(tenant, conversation, members[0], "after", None, 100, 1 << 20, as_of)
                self.call(store.history_page(query))
            for direction in ("before", "after"):
                unbounded = v.history_query(
                    tenant, conversation, members[0], direction, None, 100, 1 << 20, self.now
                )
                for fit in ("fit-1", "fit"):
                    budget = self._byte_fit(unbounded, fit)
                    self.call(store.history_page(attrs.evolve(unbounded, max_bytes=budget)))
                self.walk_history(store, attrs.evolve(unbounded, limit=1))

    def walk_history(self, store: ObservedStore, query: HistoryQuery) -> None:
        """A reader paging one entry at a time, each page anchored at the last one's sequence: every
        page is judged against the model's (anchors, direction, has_more; C-POST-11)."""
        for _ in range(2 * len(v.KEYS)):
            page = self.call(store.history_page(query))
            if not isinstance(page, HistoryPage) or not page.entries or not page.has_more:
                return
            query = attrs.evolve(query, anchor=page.entries[-1].coordinates.conversation_seq)

    def _byte_fit(self, unbounded: HistoryQuery, fit: str) -> int:
        """C-POST-11 at its edge: the bodies of the page's first two entries exactly, one byte less
        (the second no longer fits) or one more; fixed budgets rarely land on a sum of body sizes."""
        members = self.membership.snapshot(unbounded.tenant, unbounded.conversation)
        page = model_history_page(self.oracle.state, unbounded, members)
        if isinstance(page, MessageStoreError) or not page.entries:
            return unbounded.max_bytes
        exact = sum(len(entry.body) for entry in page.entries[:2])
        return max(1, exact + {"fit-1": -1, "fit": 0, "fit+1": 1}[fit])

    def cleanup_judge(self) -> CommitCleanupJudge:
        """C-POST-12: the dropped namespace, opened again, reads as empty (``_cleanup_judge``)."""
        run, reach = self.run_cleanup, self.context.reach
        return CommitCleanupJudge(self.oracle, self.membership, self.now, run, reach)

    def close(self) -> None:
        if self.real is not None:
            real, self.real = self.real, None
            with contextlib.suppress(MessageStoreError):
                self.run(bounded("the store's close", real.close(), self.context))


class StoreMachine(EdgeRules, CorruptRules, LegacyRules, EndpointRules, CommitWorld):
    reserved = Bundle("reserved")
    #: Run by the opening on a wire only (``WireFaultRules.wire_opening``).
    directed_on_wire = ("legacy_walk", "repeat_walk", "atomic_walk", "endpoint_walk", SCAN_ALL_DUE)

    def __init__(self) -> None:
        super().__init__()
        self.store = ObservedStore(self.oracle)
        wire = self.context.target.wire
        self.context.stats.details.setdefault(
            "endpoint_options", str(bool(wire is not None and wire.options))
        )

    def _intent(self, key: str) -> CommitIntent:
        commit_key = v.parse_key(key)
        intent = self.oracle.intents.get(commit_key)
        return intent if intent is not None else v.never_reserved_intent(commit_key)

    # --- reserve -------------------------------------------------------------------------------

    @rule(target=reserved, key=STORE_KEYS, variant=VARIANTS)
    @step
    def reserve(self, key: str, variant: str) -> Any:
        """C-POST-01, C-PRE-03: a new key allocates once; a repeat returns the stored intent."""
        return self._reserve(key, variant)

    def _reserve(self, key: str, variant: str) -> Any:
        commit_key = v.parse_key(key)
        existed = commit_key in self.oracle.state.commits
        send = v.request(commit_key, variant)
        conversation = send.conversation
        members, version = self.members_version(commit_key.tenant, conversation)
        self.call(
            self.store.reserve(send, v.delivery(conversation, members, version), v.candidate(send, self.now))
        )
        created = not existed and commit_key in self.oracle.state.commits
        return key if created else multiple()

    @step
    def repeat_walk(self) -> None:
        """From the opening on a wire (``directed_on_wire``): a fresh key reserved, reserved again
        while pending (the stored intent comes back: C-PRE-02), taken through every stage, then
        reserved again and read (the committed answer: C-PRE-09). Drawn, they hang on a repeat of
        a key in the right stage: on Cassandra's 80 examples C-PRE-02 was reached in 3 of 90
        store examples on one seed and C-PRE-09 in 1 of 94 on another (docs/ci-gate.md)."""
        key = REPEAT_WALK_KEY
        commit_key = v.parse_key(key)
        if commit_key in self.oracle.state.commits:
            return
        self._reserve(key, "same")
        self._reserve(key, "same")
        self.call(self.store.put_record(self._intent(key)))
        self.call(self.store.mark_outbox_published(self._intent(key), v.publication("p1")))
        self.call(self.store.mark_committed(self._intent(key)))
        self._reserve(key, "same")
        self.call(self.store.load_commit(commit_key, v.home_conversation(commit_key)))

    def atomic_walk(self) -> None:
        """From the opening on a wire (``directed_on_wire``; not a step: the three it runs are): a
        fresh key reserved, recorded and taken to COMMITTED in the one call (C-POST-04). Drawn, that
        rule hangs on a key left RECORDED: Cassandra's 80 store examples first ran it as late as
        example 61 (docs/ci-gate.md, "reach")."""
        if v.parse_key(ATOMIC_WALK_KEY) in self.oracle.state.commits:
            return
        self.reserve(key=ATOMIC_WALK_KEY, variant="same")
        self.put_record(key=ATOMIC_WALK_KEY)
        self.mark_published_and_committed(key=ATOMIC_WALK_KEY, publication=v.PUBLICATIONS[0])

    @initialize(target=reserved, key=STORE_KEYS)
    @step
    def first_reserve(self, key: str) -> Any:
        """Every example starts with one reservation, so the transition rules have a key at once."""
        return self._reserve(key, "same")

    @rule(key=STORE_KEYS, call=st.sampled_from(INVALID_CALLS))
    @step
    def invalid_call(self, key: str, call: str) -> None:
        """C-ERR-04: a call out of contract in exactly one way is INVALID_ARGUMENT and writes nothing."""
        operation, _, problem = call.partition(":")
        if operation == "reserve":
            commit_key = v.parse_key(key)
            members = self.membership.snapshot(commit_key.tenant, v.home_conversation(commit_key))
            send, frozen, cand = v.invalid_reserve(commit_key, problem, members, self.now)
            self.call(self.store.reserve(send, frozen, cand))
        elif operation == "scan":
            self.call(self.store.scan_recoverable_commits(self.now, int(problem)))
        else:
            self.call(self.store.history_page(v.invalid_history_query(problem, self.now)))

    # --- stage transitions ---------------------------------------------------------------------

    @rule(
        key=reserved,
        publication=st.sampled_from(v.PUBLICATIONS),
        path=st.sampled_from(("atomic", "two-step")),
    )
    @step
    def advance_commit(self, key: str, publication: str, path: str) -> None:
        """The next call for ``key`` (reaches deep stages in few steps); from RECORDED ``path`` picks
        ``mark_published_and_committed`` (any store: its own atomic or two-step path) or the first of
        the two steps."""
        commit_key = v.parse_key(key)
        intent = self._intent(key)
        entry = self.oracle.state.commits.get(commit_key)
        stage = entry.stage if entry is not None else CommitStage.RESERVED
        pub = v.publication(publication)
        if stage is CommitStage.RESERVED:
            self.call(self.store.put_record(intent))
        elif stage is CommitStage.RECORDED and path == "atomic":
            self.call(self.store.mark_published_and_committed(intent, pub))
        elif stage is CommitStage.RECORDED:
            self.call(self.store.mark_outbox_published(intent, pub))
        else:
            self.call(self.store.mark_committed(intent))

    @rule(key=reserved)
    @step
    def put_record(self, key: str) -> None:
        self.call(self.store.put_record(self._intent(key)))

    @rule(key=reserved, publication=st.sampled_from(v.PUBLICATIONS))
    @step
    def mark_outbox_published(self, key: str, publication: str) -> None:
        self.call(self.store.mark_outbox_published(self._intent(key), v.publication(publication)))

    @rule(key=reserved, publication=st.sampled_from(v.PUBLICATIONS))
    @step
    def mark_published_and_committed(self, key: str, publication: str) -> None:
        """C-POST-04: on every store; atomic (C-POST-05) or the default two steps (C-POST-06)."""
        self.call(self.store.mark_published_and_committed(self._intent(key), v.publication(publication)))

    @rule(key=reserved)
    @step
    def mark_committed(self, key: str) -> None:
        self.call(self.store.mark_committed(self._intent(key)))

    @rule(
        op=st.sampled_from(
            ("put_record", "mark_outbox_published", "mark_published_and_committed", "mark_committed")
        ),
        # Mostly a key that exists, in whatever stage it reached: a wrong intent for a key nobody
        # reserved only meets NOT_FOUND, never the comparison with the stored intent.
        key=st.one_of(reserved, STORE_KEYS),
        intent=st.sampled_from(v.INTENT_VARIANTS[1:]),
    )
    @step
    def transition_with_other_intent(self, op: str, key: str, intent: str) -> None:
        """C-PRE-02, C-POST-03: an intent other than the reserved one is refused and changes nothing."""
        if intent == "unknown-key":
            chosen = v.never_reserved_intent(v.UNKNOWN_KEY)
        else:
            chosen = v.intent_variant(self._intent(key), intent)
        pub = v.publication("p1")
        if op == "put_record":
            self.call(self.store.put_record(chosen))
        elif op == "mark_outbox_published":
            self.call(self.store.mark_outbox_published(chosen, pub))
        elif op == "mark_committed":
            self.call(self.store.mark_committed(chosen))
        else:
            self.call(self.store.mark_published_and_committed(chosen, pub))

    # --- reads ---------------------------------------------------------------------------------

    @rule(key=reserved, conversation=st.sampled_from(("own", "other")))
    @step
    def load_commit(self, key: str, conversation: str) -> None:
        """C-PRE-09: the key read in its own conversation, or in the other one (a conflict)."""
        commit_key = v.parse_key(key)
        own = self.oracle.conversation_of.get(commit_key, v.home_conversation(commit_key))
        self.call(
            self.store.load_commit(commit_key, own if conversation == "own" else v.other_conversation(own))
        )

    @rule(key=STORE_KEYS, variant=VARIANTS)
    @step
    def load_commit_for_request(self, key: str, variant: str) -> None:
        self.call(self.store.load_commit_for_request(v.request(v.parse_key(key), variant)))

    @rule(
        older_than=st.sampled_from(("now", "after-now", "before-start")),
        # the bounds too: 1 and MAX_SCAN_ITEMS legal, 0 and one past refused (C-ERR-04)
        max_items=st.sampled_from((1, 2, MAX_SCAN_ITEMS, 0, MAX_SCAN_ITEMS + 1)),
    )
    @step
    def scan_recoverable_commits(self, older_than: str, max_items: int) -> None:
        moment = {"now": self.now, "after-now": self.now + 1, "before-start": v.T0}[older_than]
        self.call(self.store.scan_recoverable_commits(moment, max_items))

    @rule(
        key=reserved,
        actor=st.sampled_from(v.READERS),
        direction=st.sampled_from(("before", "after")),
        anchor=st.sampled_from(v.ANCHORS),
        limit=st.sampled_from(v.LIMITS),
        max_bytes=st.one_of(st.sampled_from(v.BYTE_LIMITS), st.sampled_from(BYTE_FITS)),
    )
    @step
    def history_page(
        self, key: str, actor: str, direction: str, anchor: int | None, limit: int, max_bytes: int | str
    ) -> None:
        """A page of the conversation a reserved key was sent to (C-PRE-05, C-POST-11); the byte
        budget is a fixed one or one at the edge of what the page holds (``BYTE_FITS``)."""
        commit_key = v.parse_key(key)
        conversation = self.oracle.conversation_of.get(commit_key, v.home_conversation(commit_key))

        def query(budget: int) -> HistoryQuery:
            return v.history_query(
                commit_key.tenant, conversation, actor, direction, anchor, limit, budget, self.now
            )

        budget = max_bytes if isinstance(max_bytes, int) else self._byte_fit(query(1 << 20), max_bytes)
        self.call(self.store.history_page(query(budget)))

    # --- the world -----------------------------------------------------------------------------

    @rule(
        tenant=st.sampled_from(v.TENANTS),
        conversation=CONVERSATIONS,
        members=st.sampled_from(tuple(v.MEMBER_SETS)),
    )
    @step
    def set_members(self, tenant: str, conversation: str, members: str) -> None:
        self._set_members(tenant, conversation, members)

    @rule()
    @step
    def readiness(self) -> None:
        """C-PRE-06: a live backend answers readiness with a real round trip, every time."""
        real = self.oracle.real
        try:
            self.call(real.readiness())
        except MessageStoreError as error:
            raise self.oracle.fail("C-PRE-06", f"readiness failed on a live backend: {error}") from None
        except Exception as error:  # anything else crossed the store boundary
            raise self.oracle.fail(
                "C-ERR-01", f"readiness raised {type(error).__name__}, not MessageStoreError"
            ) from None
        self.context.reach("rule:C-PRE-06")

    @rule(ms=st.sampled_from(v.CLOCK_STEPS_MS))
    @step
    def advance_clock(self, ms: int) -> None:
        self.now += ms
        self.context.inject("clock-advance")

    @rule(kind=st.sampled_from(tuple(STORE_FAULTS)), calls=st.sampled_from((1, 3)))
    @step
    def arm_store_fault(self, kind: str, calls: int) -> None:
        """The next store call fails: after applying (response-lost) or before (failed-before)."""
        if self.context.faults.allows(kind):
            self.oracle.arm(STORE_FAULTS[kind], calls)

    # --- the end -------------------------------------------------------------------------------

    def walk_stages(self) -> None:
        """One fresh key through every stage of the default path, read back at each (C-POST-06,
        C-PRE-09): a short program seldom lines up reserve, put_record and mark_outbox_published on
        one key, so a store's OUTBOXED branch could go unjudged; at quiescence nothing is drawn."""
        key = STAGE_WALK_KEY
        if v.parse_key(key) in self.oracle.state.commits:
            return
        self._reserve(key, "same")
        self.call(self.store.put_record(self._intent(key)))
        self.call(self.store.mark_outbox_published(self._intent(key), v.publication("p1")))
        self.call(self.store.load_commit(v.parse_key(key), v.home_conversation(v.parse_key(key))))
        self.call(self.store.mark_committed(self._intent(key)))
        self.context.reach("stage-walk")

    def at_quiescence(self) -> None:
        """Every key reads back as the model holds it; the recovery candidates are exactly the model's;
        every conversation's history reads as the model's now and a day later (expiry, C-POST-05)."""
        self.oracle.arm(None)
        self.become_quiescent(self.store)
        self.walk_stages()
        for key in sorted(self.oracle.conversation_of, key=CommitKey.sort_key):
            self.call(self.oracle.observe(key))
        self.call(self.store.scan_recoverable_commits(self.now + 1, MAX_SCAN_ITEMS))
        self.read_all_history(self.store)
