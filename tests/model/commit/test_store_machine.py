"""The commit model checked on its own: any sequence of store calls keeps the contract's invariants.

The model is the oracle for every backend, so these properties are what make it trustworthy:
forward-only ranks, dense sequence numbers with no allocation on repeats, refusals that change
nothing, compaction at COMMITTED, and reads that agree with the stage table.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    HistoryDirection,
    HistoryQuery,
    LoadedCommitted,
    LoadedInFlight,
    MessageStoreError,
    OutboxPublication,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    StoreErrorKind,
    StoreState,
    history_page,
    identity_matches,
    load_commit,
    load_commit_for_request,
    mark_committed,
    mark_outbox_published,
    mark_published_and_committed,
    put_record,
    reserve,
    scan_recoverable_commits,
)
from tests.model.commit.strategies import candidate_for, delivery_for, publications, sends


class CommitModelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = StoreState()
        self.intents: dict[CommitKey, CommitIntent] = {}
        self.first_request: dict[CommitKey, AuthenticatedSend] = {}
        self.acks: dict[CommitKey, CommittedMessage] = {}
        self.ranks: dict[CommitKey, int] = {}
        self.clock = 0

    def _apply(self, new_state: StoreState, outcome: object) -> None:
        if isinstance(outcome, MessageStoreError):
            # C-ERR-04 / C-POST-05: a refused call changes nothing.
            assert new_state == self.state, outcome
        self.state = new_state

    @rule(request=sends, late=st.integers(0, 5))
    def reserve(self, request: AuthenticatedSend, late: int) -> None:
        self.clock += 1
        before_seq = dict(self.state.conversation_seq)
        new_state, outcome = reserve(
            self.state, request, delivery_for(request), candidate_for(request, self.clock + late)
        )
        key = request.commit_key
        first = self.first_request.get(key)
        if first is None:
            assert isinstance(outcome, ReserveCreated)
            ref = (request.tenant, request.conversation)
            assert outcome.intent.coordinates.conversation_seq == before_seq.get(ref, 0) + 1
            self.first_request[key] = request
            self.intents[key] = outcome.intent
        elif first != request:
            assert isinstance(outcome, MessageStoreError)
            assert outcome.kind is StoreErrorKind.IDENTITY_CONFLICT  # C-PRE-03
        else:
            # C-POST-01: a repeat returns the first coordinates and allocates nothing.
            assert new_state.conversation_seq == self.state.conversation_seq
            assert new_state.message_seq == self.state.message_seq
            if isinstance(outcome, ReserveCommitted):
                assert outcome.message == self.acks[key]
            else:
                assert isinstance(outcome, ReserveInFlight)
                assert outcome.intent == self.intents[key]
        self._apply(new_state, outcome)

    @rule(data=st.data())
    def put_record(self, data: st.DataObject) -> None:
        if not self.intents:
            return
        key = data.draw(st.sampled_from(sorted(self.intents, key=CommitKey.sort_key)))
        new_state, outcome = put_record(self.state, self.intents[key])
        assert outcome is None  # C-POST-03: always converges for the reserved intent
        self._apply(new_state, outcome)

    @rule(data=st.data(), publication=publications)
    def mark_outbox_published(self, data: st.DataObject, publication: OutboxPublication) -> None:
        if not self.intents:
            return
        key = data.draw(st.sampled_from(sorted(self.intents, key=CommitKey.sort_key)))
        entry = self.state.commits[key]
        new_state, outcome = mark_outbox_published(self.state, self.intents[key], publication)
        if entry.stage is CommitStage.RESERVED:
            assert isinstance(outcome, MessageStoreError)
            assert outcome.kind is StoreErrorKind.MISSING_EVIDENCE
        elif entry.publication not in (None, publication):
            assert isinstance(outcome, MessageStoreError)
            assert outcome.kind is StoreErrorKind.PUBLICATION_MISMATCH
        else:
            assert outcome is None
        self._apply(new_state, outcome)

    @rule(data=st.data(), publication=publications, atomic=st.booleans())
    def commit(self, data: st.DataObject, publication: OutboxPublication, atomic: bool) -> None:
        if not self.intents:
            return
        key = data.draw(st.sampled_from(sorted(self.intents, key=CommitKey.sort_key)))
        intent = self.intents[key]
        entry = self.state.commits[key]
        if atomic:
            new_state, outcome = mark_published_and_committed(self.state, intent, publication)
            evidence = entry.stage is not CommitStage.RESERVED
            consistent = entry.publication in (None, publication)
        else:
            new_state, outcome = mark_committed(self.state, intent)
            evidence = entry.stage in (CommitStage.OUTBOXED, CommitStage.COMMITTED)
            consistent = True
        if evidence and consistent:
            assert isinstance(outcome, CommittedMessage)
            assert outcome.coordinates == intent.coordinates  # C-POST-04
            previous = self.acks.setdefault(key, outcome)
            assert previous == outcome  # same-value retry replays the original ACK
        else:
            assert isinstance(outcome, MessageStoreError)
        self._apply(new_state, outcome)

    @rule(request=sends)
    def load_for_request(self, request: AuthenticatedSend) -> None:
        outcome = load_commit_for_request(self.state, request)
        key = request.commit_key
        first = self.first_request.get(key)
        if first is None:
            assert outcome is None
        elif first != request:
            assert isinstance(outcome, MessageStoreError)
            assert outcome.kind is StoreErrorKind.IDENTITY_CONFLICT
        elif key in self.acks:
            assert outcome == LoadedCommitted(self.acks[key])  # C-PRE-09
        else:
            assert isinstance(outcome, LoadedInFlight)
            assert outcome.intent == self.intents[key]

    @rule(older_than=st.integers(0, 40), max_items=st.integers(1, 4))
    def scan(self, older_than: int, max_items: int) -> None:
        outcome = scan_recoverable_commits(self.state, older_than, max_items)
        assert isinstance(outcome, list)
        due = [
            intent
            for key, intent in self.intents.items()
            if key not in self.acks and intent.coordinates.accepted_at_ms < older_than
        ]
        assert len(outcome) == min(max_items, len(due))
        assert all(intent in due for intent in outcome)

    @rule(tenant=st.sampled_from(("t1", "t2")), conversation=st.sampled_from(("c1", "c2")))
    def history(self, tenant: str, conversation: str) -> None:
        query = HistoryQuery(tenant, conversation, "alice", HistoryDirection.AFTER, None, 100, 1 << 20, 0)
        page = history_page(self.state, query, frozenset({"alice"}))
        assert not isinstance(page, MessageStoreError)
        recorded = {
            intent.coordinates.conversation_seq
            for key, intent in self.intents.items()
            if intent.key.tenant == tenant
            and intent.conversation == conversation
            and self.state.commits[key].stage is not CommitStage.RESERVED
        }
        # C-POST-11: from RECORDED on, every message is readable, in order, and nothing else is.
        assert [e.coordinates.conversation_seq for e in page.entries] == sorted(recorded)
        denied = history_page(self.state, query, frozenset({"bob"}))
        assert isinstance(denied, MessageStoreError) and denied.kind is StoreErrorKind.NOT_A_MEMBER

    @invariant()
    def forward_only(self) -> None:
        # C-POST-08: no key's rank ever decreases.
        for key in self.state.commits:
            rank = self.state.rank(key)
            assert rank >= self.ranks.get(key, 0)
            self.ranks[key] = rank

    @invariant()
    def dense_sequences(self) -> None:
        # C-POST-01: sequence numbers are allocated once per key, densely, never twice.
        per_conversation: dict[tuple[str, str], list[int]] = {}
        per_tenant: dict[str, list[int]] = {}
        for key, entry in self.state.commits.items():
            per_conversation.setdefault((key.tenant, entry.conversation), []).append(
                entry.coordinates.conversation_seq
            )
            per_tenant.setdefault(key.tenant, []).append(entry.coordinates.message_seq)
        for ref, seqs in per_conversation.items():
            assert sorted(seqs) == list(range(1, len(seqs) + 1))
            assert self.state.conversation_seq[ref] == len(seqs)
        for seqs in per_tenant.values():
            assert sorted(seqs) == list(range(1, len(seqs) + 1))

    @invariant()
    def compaction(self) -> None:
        # C-PRE-10: a committed entry keeps identity, coordinates and publication only.
        for key, entry in self.state.commits.items():
            committed = entry.stage is CommitStage.COMMITTED
            assert (entry.intent is None) == committed
            if entry.stage in (CommitStage.OUTBOXED, CommitStage.COMMITTED):
                assert entry.publication is not None
            assert identity_matches(entry.identity, self.first_request[key])
            loaded = load_commit(self.state, key, entry.conversation)
            assert isinstance(loaded, LoadedCommitted) == committed


CommitModelMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestCommitModel = CommitModelMachine.TestCase
