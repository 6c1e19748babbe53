"""``MemoryMessageStore``: the commit contract held in dicts behind one ``asyncio.Lock``.

Every method takes the lock for its whole body, so each call is one atomic step, the way a Redis
script is: Recorded + publication -> Committed is a single step here too (C-POST-05). The stage
discipline is spelled out per method below rather than borrowed from ``model.commit``: this store
is one of the things the model judges.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import attrs

from impls.api import MembershipDirectory
from impls.memory._inspect import fields_for, raw_of, well_formed
from model.commit import (
    MAX_SCAN_ITEMS,
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
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    ReserveResult,
    StoreCapabilities,
    StoreErrorKind,
    TenantId,
    TimestampMillis,
    UserId,
    history_query_problem,
    identity_matches,
    request_problem,
    reserve_identity_digest,
    reserve_problem,
)

_CAPABILITIES = StoreCapabilities(atomic_publish_and_commit=True)


@attrs.frozen
class _Commit:
    """One key's durable facts. ``intent`` is dropped at COMMITTED (C-PRE-10)."""

    stage: CommitStage
    identity: bytes
    conversation: ConversationId
    coordinates: MessageCoordinates
    intent: CommitIntent | None
    publication: OutboxPublication | None

    def message(self, key: CommitKey) -> CommittedMessage:
        assert self.publication is not None  # every way into COMMITTED stores the publication
        return CommittedMessage(key, self.conversation, self.coordinates, self.publication)

    def loaded(self, key: CommitKey) -> LoadedCommit:
        if self.stage is CommitStage.COMMITTED:
            return LoadedCommitted(self.message(key))
        assert self.intent is not None
        return LoadedInFlight(self.intent, self.stage, self.publication)


@attrs.frozen
class _HistoryItem:
    entry: HistoryEntry
    expires_at_ms: TimestampMillis | None  # registered when the commit completes (C-POST-05)

    def live_at(self, as_of_ms: TimestampMillis) -> bool:
        return self.expires_at_ms is None or self.expires_at_ms > as_of_ms


_ConversationRef = tuple[TenantId, ConversationId]


def _fail(kind: StoreErrorKind, detail: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(kind, detail, key)


class MemoryMessageStore:
    """A ``MessageStore`` whose durable state is this object's dicts (impls.api.MessageStore)."""

    def __init__(self, namespace: str, membership: MembershipDirectory) -> None:
        self.namespace = namespace
        self._membership = membership
        self._lock = asyncio.Lock()
        self._closed = False
        self._commits: dict[CommitKey, _Commit] = {}
        self._message_seq: dict[TenantId, int] = {}
        self._conversation_seq: dict[_ConversationRef, int] = {}
        self._history: dict[_ConversationRef, dict[int, _HistoryItem]] = {}
        self._recovery: dict[CommitKey, CommitIntent] = {}  # the recovery candidates (C-POST-02)

    #: C-ERR-01: the names of this store's tables, which no error detail may carry.
    internal_text = frozenset(
        {"_commits", "_message_seq", "_conversation_seq", "_history", "_recovery", "_HistoryItem", "KeyError"}
    )

    @property
    def capabilities(self) -> StoreCapabilities:
        return _CAPABILITIES

    def _entry(self, key: CommitKey) -> _Commit | None:
        """The stored commit of ``key``; CORRUPT when what is stored does not hold together."""
        stored = self._commits.get(key)
        if stored is not None and not well_formed(stored):
            raise _fail(StoreErrorKind.CORRUPT, "stored commit cannot be read", key)
        return stored

    # --- impls.api.StoreInspector (harness-only raw access) -------------------------------------

    async def read_raw(self, key: CommitKey) -> dict[str, object] | None:
        stored = self._commits.get(key)
        return None if stored is None else raw_of(stored)

    async def write_raw(self, key: CommitKey, fields: Mapping[str, object]) -> None:
        self._commits[key] = _Commit(**fields_for(fields))

    async def import_legacy(
        self, message: CommittedMessage, identity: bytes, record: MessageRecord, delivery: FrozenDeliveryInput
    ) -> None:
        """impls.api.LegacyImport: a committed key as an older version kept it (full QIMC identity)."""
        key, coordinates = message.key, message.coordinates
        self._commits[key] = _Commit(
            CommitStage.COMMITTED, identity, message.conversation, coordinates, None, message.publication
        )
        ref = (key.tenant, message.conversation)
        self._message_seq[key.tenant] = max(self._message_seq.get(key.tenant, 0), coordinates.message_seq)
        self._conversation_seq[ref] = max(self._conversation_seq.get(ref, 0), coordinates.conversation_seq)

    @asynccontextmanager
    async def _step(self) -> AsyncIterator[None]:
        if self._closed:
            raise _fail(StoreErrorKind.UNAVAILABLE, "the store is closed")
        async with self._lock:
            yield

    # --- reserve ----------------------------------------------------------------------------

    async def reserve(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> ReserveResult:
        """C-POST-01, C-POST-02, C-PRE-02, C-PRE-03, C-ERR-04: allocate once per key."""
        key = request.commit_key
        problem = reserve_problem(request, delivery, candidate)
        if problem is None and candidate.record != MessageRecord.from_send(request):
            problem = "candidate record is not the canonical record of the request"
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        async with self._step():
            existing = self._entry(key)
            if existing is not None:
                if not identity_matches(existing.identity, request):
                    raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
                if existing.stage is CommitStage.COMMITTED:
                    return ReserveCommitted(existing.message(key))
                assert existing.intent is not None
                return ReserveInFlight(existing.intent, existing.stage, existing.publication)
            ref = (request.tenant, request.conversation)
            coordinates = MessageCoordinates(
                message_seq=self._message_seq.get(request.tenant, 0) + 1,
                conversation_seq=self._conversation_seq.get(ref, 0) + 1,
                accepted_at_ms=candidate.accepted_at_ms,
            )
            intent = CommitIntent(
                key=key,
                identity=reserve_identity_digest(request),
                coordinates=coordinates,
                record=candidate.record,
                delivery=delivery,
            )
            self._message_seq[request.tenant] = coordinates.message_seq
            self._conversation_seq[ref] = coordinates.conversation_seq
            self._commits[key] = _Commit(
                CommitStage.RESERVED, intent.identity, request.conversation, coordinates, intent, None
            )
            self._recovery[key] = intent
            return ReserveCreated(intent)

    # --- the stage transitions ----------------------------------------------------------------

    def _locate(self, intent: CommitIntent) -> _Commit:
        """The commit ``intent`` names, if ``intent`` is exactly the reserved one (C-POST-03)."""
        stored = self._entry(intent.key)
        if stored is None:
            raise _fail(StoreErrorKind.NOT_FOUND, "no commit under this key", intent.key)
        if (
            stored.identity != intent.identity
            or stored.coordinates != intent.coordinates
            or stored.conversation != intent.conversation
            or (stored.intent is not None and stored.intent != intent)
        ):
            raise _fail(StoreErrorKind.INTENT_MISMATCH, "intent differs from the reserved one", intent.key)
        return stored

    @staticmethod
    def _check_publication(stored: _Commit, publication: OutboxPublication, key: CommitKey) -> None:
        if stored.publication is not None and stored.publication != publication:
            raise _fail(
                StoreErrorKind.PUBLICATION_MISMATCH, "a different publication is already durable", key
            )

    def _complete(self, key: CommitKey, stored: _Commit, publication: OutboxPublication) -> _Commit:
        """Enter COMMITTED: drop the body, drop the candidate, register the history expiry."""
        intent = stored.intent
        assert intent is not None  # only in-flight commits complete
        committed = attrs.evolve(stored, stage=CommitStage.COMMITTED, intent=None, publication=publication)
        self._commits[key] = committed
        self._recovery.pop(key, None)
        conversation = self._history.get((key.tenant, intent.conversation), {})
        seq = intent.coordinates.conversation_seq
        item = conversation.get(seq)
        if item is not None:
            expires = intent.coordinates.accepted_at_ms + intent.delivery.retention_ms
            conversation[seq] = attrs.evolve(item, expires_at_ms=expires)
        return committed

    async def put_record(self, intent: CommitIntent) -> None:
        """C-PRE-04, C-POST-03: RESERVED -> RECORDED writing ``intent.record``; later stages converge."""
        async with self._step():
            stored = self._locate(intent)
            if stored.stage is not CommitStage.RESERVED:
                return
            record = intent.record
            entry = HistoryEntry(
                coordinates=intent.coordinates,
                sender=intent.key.sender,
                message_type=record.content.message_type,
                custom_type=record.content.custom_type,
                body=record.content.body,
                reply_to=record.reply_to,
            )
            ref = (intent.key.tenant, intent.conversation)
            self._history.setdefault(ref, {})[intent.coordinates.conversation_seq] = _HistoryItem(entry, None)
            self._commits[intent.key] = attrs.evolve(stored, stage=CommitStage.RECORDED)

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        """C-POST-03: RECORDED -> OUTBOXED; the same publication again converges."""
        async with self._step():
            stored = self._locate(intent)
            self._check_publication(stored, publication, intent.key)
            if stored.stage is CommitStage.RESERVED:
                raise _fail(StoreErrorKind.MISSING_EVIDENCE, "no durable record yet", intent.key)
            if stored.stage is CommitStage.RECORDED:
                self._commits[intent.key] = attrs.evolve(
                    stored, stage=CommitStage.OUTBOXED, publication=publication
                )

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        """C-POST-04, C-POST-05: RECORDED or OUTBOXED + publication -> COMMITTED in one step."""
        async with self._step():
            stored = self._locate(intent)
            self._check_publication(stored, publication, intent.key)
            if stored.stage is CommitStage.RESERVED:
                raise _fail(StoreErrorKind.MISSING_EVIDENCE, "no durable record yet", intent.key)
            if stored.stage is not CommitStage.COMMITTED:
                stored = self._complete(intent.key, stored, stored.publication or publication)
            return stored.message(intent.key)

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        """C-POST-03: OUTBOXED -> COMMITTED; earlier stages lack evidence and are refused."""
        async with self._step():
            stored = self._locate(intent)
            if stored.stage is CommitStage.RESERVED:
                raise _fail(StoreErrorKind.MISSING_EVIDENCE, "no durable record yet", intent.key)
            if stored.stage is CommitStage.RECORDED:
                raise _fail(StoreErrorKind.MISSING_EVIDENCE, "no durable outbox publication yet", intent.key)
            if stored.stage is CommitStage.OUTBOXED:
                assert stored.publication is not None
                stored = self._complete(intent.key, stored, stored.publication)
            return stored.message(intent.key)

    # --- reads ------------------------------------------------------------------------------

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        """C-PRE-09: a key stored under another conversation is a conflict."""
        async with self._step():
            stored = self._entry(key)
            if stored is None:
                return None
            if stored.conversation != conversation_id:
                raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "key belongs to another conversation", key)
            return stored.loaded(key)

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        """C-PRE-03, C-PRE-07, C-PRE-09: compare the durable identity, never just the key."""
        key = request.commit_key
        problem = request_problem(request)
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        async with self._step():
            stored = self._entry(key)
            if stored is None:
                return None
            if not identity_matches(stored.identity, request):
                raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
            return stored.loaded(key)

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        """C-POST-02: in-flight intents accepted before ``older_than``, oldest first, then by key."""
        if not 1 <= max_items <= MAX_SCAN_ITEMS:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, f"max_items must be 1..{MAX_SCAN_ITEMS}")
        async with self._step():
            due = [i for i in self._recovery.values() if i.coordinates.accepted_at_ms < older_than]
        due.sort(key=lambda i: (i.coordinates.accepted_at_ms, *i.key.sort_key()))
        return due[:max_items]

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        """C-PRE-05, C-POST-11: authorize the actor, then one page within limit and byte budget."""
        problem = history_query_problem(query)
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem)
        if self._closed:
            raise _fail(StoreErrorKind.UNAVAILABLE, "the store is closed")
        members = await _members(self._membership, query)
        if query.actor not in members:
            raise _fail(StoreErrorKind.NOT_A_MEMBER, "actor is not a member of the conversation")
        async with self._step():
            ref = (query.tenant, query.conversation)
            live = sorted(
                (seq, item.entry)
                for seq, item in self._history.get(ref, {}).items()
                if item.live_at(query.as_of_ms)
            )
            through = self._conversation_seq.get(ref, 0)
        anchor = query.anchor
        if query.direction is HistoryDirection.BEFORE:
            side = [e for s, e in reversed(live) if anchor is None or s < anchor]
        else:
            side = [e for s, e in live if anchor is None or s > anchor]
        page: list[HistoryEntry] = []
        spent = 0
        for entry in side[: query.limit]:
            # The first entry always goes in, so a reader paging by anchor always moves on.
            if page and spent + len(entry.body) > query.max_bytes:
                break
            page.append(entry)
            spent += len(entry.body)
        return HistoryPage(
            direction=query.direction,
            anchor=anchor,
            limit=query.limit,
            max_bytes=query.max_bytes,
            entries=tuple(page),
            has_more=len(page) < len(side),
            available_from=live[0][0] if live else None,
            available_through=through,
        )

    async def readiness(self) -> None:
        """C-PRE-06: the store is its own dependency; a closed store is not ready."""
        if self._closed:
            raise _fail(StoreErrorKind.UNAVAILABLE, "the store is closed")

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: this object is the namespace's only storage."""
        async with self._lock:
            for table in (
                self._commits,
                self._message_seq,
                self._conversation_seq,
                self._history,
                self._recovery,
            ):
                table.clear()

    async def namespaces(self) -> list[str]:
        return [self.namespace] if self._commits or self._message_seq else []

    async def close(self) -> None:
        self._closed = True


async def _members(membership: MembershipDirectory, query: HistoryQuery) -> frozenset[UserId]:
    """The conversation's members; a failing directory is an unavailable dependency (C-ERR-01)."""
    try:
        return await membership.members(query.tenant, query.conversation)
    except MessageStoreError:
        raise
    except Exception:
        raise _fail(StoreErrorKind.UNAVAILABLE, "the membership directory did not answer") from None
