"""The MessageStore as a pure state machine.

Every operation is ``op(state, ...) -> (state', outcome)``; an outcome is either the contract's
result value or a ``MessageStoreError`` value, and a rejected call returns ``state`` unchanged.

Which stage a transition may start from, and what it does there, is the table ``TRANSITIONS``;
the functions only add the identity, intent and publication comparisons around it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from model.commit._errors import MessageStoreError, StoreErrorKind
from model.commit._identity import identity_matches, reserve_identity_digest
from model.commit._validation import (
    MAX_SCAN_ITEMS,
    candidate_problem,
    delivery_problem,
    history_query_problem,
    request_problem,
)
from model.commit._values import (
    ABSENT_RANK,
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageCoordinates,
    MessageRecord,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    ReserveResult,
    TenantId,
    TimestampMillis,
    UserId,
)


class StoreOperation(enum.Enum):
    PUT_RECORD = "put_record"
    MARK_OUTBOX_PUBLISHED = "mark_outbox_published"
    MARK_PUBLISHED_AND_COMMITTED = "mark_published_and_committed"
    MARK_COMMITTED = "mark_committed"


class Effect(enum.Enum):
    """What an operation does from a given stage."""

    ADVANCE = "advance"  # write and move to the target stage
    CONVERGED = "converged"  # already there or beyond: the same value, nothing to write
    NEEDS_EVIDENCE = "needs-evidence"  # refuse: record or publication is not durable yet


@attrs.frozen
class Move:
    effect: Effect
    target: CommitStage | None = None


_R, _D, _O, _C = (
    CommitStage.RESERVED,
    CommitStage.RECORDED,
    CommitStage.OUTBOXED,
    CommitStage.COMMITTED,
)

# C-POST-03..06: the whole stage discipline of the store. Publication equality is checked apart.
TRANSITIONS: Mapping[tuple[StoreOperation, CommitStage], Move] = {
    (StoreOperation.PUT_RECORD, _R): Move(Effect.ADVANCE, _D),
    (StoreOperation.PUT_RECORD, _D): Move(Effect.CONVERGED),
    (StoreOperation.PUT_RECORD, _O): Move(Effect.CONVERGED),
    (StoreOperation.PUT_RECORD, _C): Move(Effect.CONVERGED),
    (StoreOperation.MARK_OUTBOX_PUBLISHED, _R): Move(Effect.NEEDS_EVIDENCE),
    (StoreOperation.MARK_OUTBOX_PUBLISHED, _D): Move(Effect.ADVANCE, _O),
    (StoreOperation.MARK_OUTBOX_PUBLISHED, _O): Move(Effect.CONVERGED),
    (StoreOperation.MARK_OUTBOX_PUBLISHED, _C): Move(Effect.CONVERGED),
    (StoreOperation.MARK_PUBLISHED_AND_COMMITTED, _R): Move(Effect.NEEDS_EVIDENCE),
    (StoreOperation.MARK_PUBLISHED_AND_COMMITTED, _D): Move(Effect.ADVANCE, _C),
    (StoreOperation.MARK_PUBLISHED_AND_COMMITTED, _O): Move(Effect.ADVANCE, _C),
    (StoreOperation.MARK_PUBLISHED_AND_COMMITTED, _C): Move(Effect.CONVERGED),
    (StoreOperation.MARK_COMMITTED, _R): Move(Effect.NEEDS_EVIDENCE),
    (StoreOperation.MARK_COMMITTED, _D): Move(Effect.NEEDS_EVIDENCE),
    (StoreOperation.MARK_COMMITTED, _O): Move(Effect.ADVANCE, _C),
    (StoreOperation.MARK_COMMITTED, _C): Move(Effect.CONVERGED),
}


@attrs.frozen
class CommitEntry:
    """What the store keeps for one key.

    At COMMITTED ``intent`` is dropped (C-PRE-10): identity digest, coordinates, conversation and
    publication are all a replayed ACK needs.
    """

    stage: CommitStage
    identity: bytes
    conversation: ConversationId
    coordinates: MessageCoordinates
    intent: CommitIntent | None
    publication: OutboxPublication | None

    def committed_message(self, key: CommitKey) -> CommittedMessage:
        assert self.publication is not None  # a COMMITTED entry always holds its publication
        return CommittedMessage(key, self.conversation, self.coordinates, self.publication)

    def loaded(self, key: CommitKey) -> LoadedCommit:
        if self.stage is CommitStage.COMMITTED:
            return LoadedCommitted(self.committed_message(key))
        assert self.intent is not None  # in-flight entries keep their intent
        return LoadedInFlight(self.intent, self.stage, self.publication)


@attrs.frozen
class HistoryRecord:
    entry: HistoryEntry
    key: CommitKey
    expires_at_ms: TimestampMillis | None  # registered at commit (C-POST-05)


ConversationRef = tuple[TenantId, ConversationId]


@attrs.frozen
class StoreState:
    """The whole durable state of one store namespace. Mappings are never mutated in place."""

    commits: Mapping[CommitKey, CommitEntry] = attrs.field(factory=dict)
    message_seq: Mapping[TenantId, int] = attrs.field(factory=dict)
    conversation_seq: Mapping[ConversationRef, int] = attrs.field(factory=dict)
    history: Mapping[ConversationRef, Mapping[int, HistoryRecord]] = attrs.field(factory=dict)

    def rank(self, key: CommitKey) -> int:
        """Forward-only order per key: absent=0 < RESERVED < RECORDED < OUTBOXED < COMMITTED."""
        entry = self.commits.get(key)
        return ABSENT_RANK if entry is None else entry.stage.rank


def _error(kind: StoreErrorKind, detail: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(kind, detail, key)


def _with_commit(state: StoreState, key: CommitKey, entry: CommitEntry) -> StoreState:
    return attrs.evolve(state, commits={**state.commits, key: entry})


# --- reserve -------------------------------------------------------------------------------


def reserve(
    state: StoreState,
    request: AuthenticatedSend,
    delivery: FrozenDeliveryInput,
    candidate: ReserveCandidate,
) -> tuple[StoreState, ReserveResult | MessageStoreError]:
    """C-POST-01, C-POST-02, C-PRE-02, C-PRE-03, C-ERR-04.

    A new key gets the next tenant message number and conversation sequence, and an intent that
    holds every fact recovery needs. A repeat returns the stored coordinates and allocates nothing;
    a different request under the same key is a conflict and changes nothing.

    post: __return__[0].rank(request.commit_key) >= state.rank(request.commit_key)
    post: not isinstance(__return__[1], MessageStoreError) or __return__[0] == state
    """
    key = request.commit_key
    problem = request_problem(request)
    if problem is None:
        problem = delivery_problem(request, delivery) or candidate_problem(candidate, delivery)
    if problem is None and candidate.record != MessageRecord.from_send(request):
        problem = "candidate record is not the canonical record of the request"
    if problem is not None:
        return state, _error(StoreErrorKind.INVALID_ARGUMENT, problem, key)

    existing = state.commits.get(key)
    if existing is not None:
        if not identity_matches(existing.identity, request):
            return state, _error(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
        loaded = existing.loaded(key)
        if isinstance(loaded, LoadedCommitted):
            return state, ReserveCommitted(loaded.message)
        return state, ReserveInFlight(loaded.intent, loaded.stage, loaded.publication)

    conversation_ref = (request.tenant, request.conversation)
    coordinates = MessageCoordinates(
        message_seq=state.message_seq.get(request.tenant, 0) + 1,
        conversation_seq=state.conversation_seq.get(conversation_ref, 0) + 1,
        accepted_at_ms=candidate.accepted_at_ms,
    )
    intent = CommitIntent(
        key=key,
        identity=reserve_identity_digest(request),
        coordinates=coordinates,
        record=candidate.record,
        delivery=delivery,
    )
    entry = CommitEntry(
        stage=CommitStage.RESERVED,
        identity=intent.identity,
        conversation=request.conversation,
        coordinates=coordinates,
        intent=intent,
        publication=None,
    )
    new_state = attrs.evolve(
        state,
        commits={**state.commits, key: entry},
        message_seq={**state.message_seq, request.tenant: coordinates.message_seq},
        conversation_seq={**state.conversation_seq, conversation_ref: coordinates.conversation_seq},
    )
    return new_state, ReserveCreated(intent)


# --- the stage transitions ------------------------------------------------------------------


def _locate(state: StoreState, intent: CommitIntent) -> CommitEntry | MessageStoreError:
    """The stored entry for ``intent``, if the intent is exactly the one reserved (C-POST-03)."""
    key = intent.key
    entry = state.commits.get(key)
    if entry is None:
        return _error(StoreErrorKind.NOT_FOUND, "no commit under this key", key)
    same = (
        entry.identity == intent.identity
        and entry.coordinates == intent.coordinates
        and entry.conversation == intent.conversation
        and (entry.intent is None or entry.intent == intent)
    )
    if not same:
        return _error(StoreErrorKind.INTENT_MISMATCH, "intent differs from the reserved one", key)
    return entry


def _transition(
    state: StoreState,
    operation: StoreOperation,
    intent: CommitIntent,
    publication: OutboxPublication | None,
) -> tuple[StoreState, CommitEntry | MessageStoreError]:
    located = _locate(state, intent)
    if isinstance(located, MessageStoreError):
        return state, located
    entry = located
    key = intent.key
    if publication is not None and entry.publication is not None and entry.publication != publication:
        return state, _error(
            StoreErrorKind.PUBLICATION_MISMATCH, "a different publication is already durable", key
        )
    move = TRANSITIONS[(operation, entry.stage)]
    if move.effect is Effect.NEEDS_EVIDENCE:
        missing = "record" if entry.stage is CommitStage.RESERVED else "outbox publication"
        return state, _error(StoreErrorKind.MISSING_EVIDENCE, f"no durable {missing} yet", key)
    if move.effect is Effect.CONVERGED:
        return state, entry
    assert move.target is not None
    new_publication = entry.publication if entry.publication is not None else publication
    advanced = attrs.evolve(
        entry,
        stage=move.target,
        publication=new_publication,
        intent=None if move.target is CommitStage.COMMITTED else entry.intent,
    )
    new_state = _with_commit(state, key, advanced)
    if operation is StoreOperation.PUT_RECORD:
        new_state = _append_history(new_state, intent)
    if move.target is CommitStage.COMMITTED:
        new_state = _register_expiry(new_state, intent)
    return new_state, advanced


def put_record(state: StoreState, intent: CommitIntent) -> tuple[StoreState, MessageStoreError | None]:
    """C-PRE-04, C-POST-03: write ``intent.record`` and nothing else; retries converge.

    post: __return__[0].rank(intent.key) >= state.rank(intent.key)
    post: not isinstance(__return__[1], MessageStoreError) or __return__[0] == state
    """
    new_state, result = _transition(state, StoreOperation.PUT_RECORD, intent, None)
    return new_state, result if isinstance(result, MessageStoreError) else None


def mark_outbox_published(
    state: StoreState, intent: CommitIntent, publication: OutboxPublication
) -> tuple[StoreState, MessageStoreError | None]:
    """C-POST-03: RECORDED -> OUTBOXED with a publication; the same value again converges.

    post: __return__[0].rank(intent.key) >= state.rank(intent.key)
    post: not isinstance(__return__[1], MessageStoreError) or __return__[0] == state
    """
    new_state, result = _transition(state, StoreOperation.MARK_OUTBOX_PUBLISHED, intent, publication)
    return new_state, result if isinstance(result, MessageStoreError) else None


def mark_published_and_committed(
    state: StoreState, intent: CommitIntent, publication: OutboxPublication
) -> tuple[StoreState, CommittedMessage | MessageStoreError]:
    """C-POST-04, C-POST-05: Recorded + publication -> Committed in one step.

    A same-value retry replays the original ACK; a different publication, a missing record or a
    wrong prior stage change nothing.

    post: __return__[0].rank(intent.key) >= state.rank(intent.key)
    post: not isinstance(__return__[1], MessageStoreError) or __return__[0] == state
    """
    new_state, result = _transition(state, StoreOperation.MARK_PUBLISHED_AND_COMMITTED, intent, publication)
    if isinstance(result, MessageStoreError):
        return new_state, result
    return new_state, result.committed_message(intent.key)


def mark_committed(
    state: StoreState, intent: CommitIntent
) -> tuple[StoreState, CommittedMessage | MessageStoreError]:
    """C-POST-03: returns a CommittedMessage only with durable record and publication evidence.

    post: __return__[0].rank(intent.key) >= state.rank(intent.key)
    post: not isinstance(__return__[1], MessageStoreError) or __return__[0] == state
    """
    new_state, result = _transition(state, StoreOperation.MARK_COMMITTED, intent, None)
    if isinstance(result, MessageStoreError):
        return new_state, result
    return new_state, result.committed_message(intent.key)


def _append_history(state: StoreState, intent: CommitIntent) -> StoreState:
    record = intent.record
    ref = (intent.key.tenant, intent.conversation)
    seq = intent.coordinates.conversation_seq
    entry = HistoryEntry(
        coordinates=intent.coordinates,
        sender=intent.key.sender,
        message_type=record.content.message_type,
        custom_type=record.content.custom_type,
        body=record.content.body,
        reply_to=record.reply_to,
    )
    conversation = {**state.history.get(ref, {}), seq: HistoryRecord(entry, intent.key, None)}
    return attrs.evolve(state, history={**state.history, ref: conversation})


def _register_expiry(state: StoreState, intent: CommitIntent) -> StoreState:
    ref = (intent.key.tenant, intent.conversation)
    seq = intent.coordinates.conversation_seq
    conversation = state.history.get(ref, {})
    record = conversation.get(seq)
    if record is None:  # unreachable: COMMITTED needs RECORDED first
        return state
    expires = intent.coordinates.accepted_at_ms + intent.delivery.retention_ms
    updated = {**conversation, seq: attrs.evolve(record, expires_at_ms=expires)}
    return attrs.evolve(state, history={**state.history, ref: updated})


# --- reads ----------------------------------------------------------------------------------


def load_commit(
    state: StoreState, key: CommitKey, conversation: ConversationId
) -> LoadedCommit | MessageStoreError | None:
    """C-PRE-09: what is durable under ``key``; a key owned by another conversation conflicts."""
    entry = state.commits.get(key)
    if entry is None:
        return None
    if entry.conversation != conversation:
        return _error(StoreErrorKind.IDENTITY_CONFLICT, "key belongs to another conversation", key)
    return entry.loaded(key)


def load_commit_for_request(
    state: StoreState, request: AuthenticatedSend
) -> LoadedCommit | MessageStoreError | None:
    """C-PRE-03, C-PRE-09: compares the durable canonical identity; any difference is a conflict."""
    key = request.commit_key
    problem = request_problem(request)
    if problem is not None:
        return _error(StoreErrorKind.INVALID_ARGUMENT, problem, key)
    entry = state.commits.get(key)
    if entry is None:
        return None
    if not identity_matches(entry.identity, request):
        return _error(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
    return entry.loaded(key)


def recovery_order(intent: CommitIntent) -> tuple[int, str, str, str]:
    """The order of ``scan_recoverable_commits``: oldest first, then by key."""
    return (intent.coordinates.accepted_at_ms, *intent.key.sort_key())


def scan_recoverable_commits(
    state: StoreState, older_than: TimestampMillis, max_items: int
) -> list[CommitIntent] | MessageStoreError:
    """C-POST-02, C-POST-05: every not-yet-committed intent accepted before ``older_than``.

    Committed keys are never candidates: commit removes the recovery candidate.

    post: isinstance(__return__, MessageStoreError) or len(__return__) <= max_items
    """
    if not 1 <= max_items <= MAX_SCAN_ITEMS:
        return _error(StoreErrorKind.INVALID_ARGUMENT, f"max_items must be 1..{MAX_SCAN_ITEMS}")
    due = [
        entry.intent
        for entry in state.commits.values()
        if entry.intent is not None
        and entry.stage is not CommitStage.COMMITTED
        and entry.coordinates.accepted_at_ms < older_than
    ]
    due.sort(key=recovery_order)
    return due[:max_items]


def history_page(
    state: StoreState, query: HistoryQuery, members: frozenset[UserId]
) -> HistoryPage | MessageStoreError:
    """C-PRE-05, C-POST-11: authorize ``query.actor`` first, then read one bounded page.

    Recorded messages are readable until their registered expiry. The first entry is returned even
    if it alone is over ``max_bytes``, so paging always makes progress.

    post: isinstance(__return__, MessageStoreError) or len(__return__.entries) <= query.limit
    post: isinstance(__return__, MessageStoreError) or query.actor in members
    """
    problem = history_query_problem(query)
    if problem is not None:
        return _error(StoreErrorKind.INVALID_ARGUMENT, problem)
    if query.actor not in members:
        return _error(StoreErrorKind.NOT_A_MEMBER, "actor is not a member of the conversation")
    ref = (query.tenant, query.conversation)
    live = sorted(
        (seq, record.entry)
        for seq, record in state.history.get(ref, {}).items()
        if record.expires_at_ms is None or record.expires_at_ms > query.as_of_ms
    )
    if query.direction is HistoryDirection.BEFORE:
        side = [e for s, e in reversed(live) if query.anchor is None or s < query.anchor]
    else:
        side = [e for s, e in live if query.anchor is None or s > query.anchor]
    taken: list[HistoryEntry] = []
    used = 0
    for entry in side:
        if len(taken) == query.limit:
            break
        if taken and used + len(entry.body) > query.max_bytes:
            break
        taken.append(entry)
        used += len(entry.body)
    return HistoryPage(
        direction=query.direction,
        anchor=query.anchor,
        limit=query.limit,
        max_bytes=query.max_bytes,
        entries=tuple(taken),
        has_more=len(taken) < len(side),
        available_from=live[0][0] if live else None,
        available_through=state.conversation_seq.get(ref, 0),
    )


def drop_namespace(state: StoreState) -> StoreState:
    """C-POST-12: a namespace whose drop reported success holds nothing at all: every key reads
    absent, nothing is recoverable, no conversation has history, and a later ``reserve`` starts
    the sequences again (the state of a namespace never written).

    post: not __return__.commits and not __return__.history and not __return__.message_seq
    """
    del state  # whatever it held is gone
    return StoreState()


def holds_data(state: StoreState) -> bool:
    """C-POST-12: whether a namespace listing must name this namespace (it holds a commit, a
    sequence or history; a dropped one, ``drop_namespace``, holds none)."""
    return bool(state.commits or state.message_seq or state.conversation_seq or state.history)
