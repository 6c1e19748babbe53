"""``CqlMessageStore``: the commit contract on Cassandra / ScyllaDB lightweight transactions.

Theory of operation
-------------------
The commit row of a key lives in its tenant's ``ledger`` partition next to the tenant's sequence
rows (impls/cql/_schema.py). That placement is the whole reserve design:

* **reserve** reads the tenant's message counter, the conversation counter and the key's commit
  row in one SERIAL read. For an existing key it answers from the stored row and writes nothing.
  For a new key it sends *one conditional batch* — ``UPDATE next_seq IF next_seq = n`` on both
  counters plus ``INSERT`` of the commit row ``IF NOT EXISTS`` — which Cassandra applies as a
  single Paxos round on a single partition: all three or none. So a sequence number is consumed
  if and only if the commit row that owns it is created, and a concurrent reserve of the same key
  (or of another key of the tenant) makes the batch fail as a whole; the loser re-reads and
  either finds the key (returns it, allocating nothing) or retries with fresh counters. No number
  is ever burnt, whatever is lost or retried, and there is no half-reserved state to repair.
  The cost is that a tenant's reserves, and its commits' stage changes, share one Paxos
  partition, and that the partition grows by one compact row per committed message.
* **stage transitions** re-read the commit row at SERIAL, judge the call against it (identity,
  coordinates, conversation, the whole intent before commit, the publication), and advance with
  ``UPDATE ... IF stage = <the stage read>``. A commit row's identity, coordinates and intent
  never change while in flight (the row is only ever created by ``IF NOT EXISTS``), so the stage
  condition is enough: if it fails, someone else advanced the row and the loop judges again
  from the new stage — the same value converges, a different one is refused.
* **unknown outcomes**: a Paxos round that timed out (OUTCOME_UNKNOWN from the boundary) is settled
  by the next SERIAL read, which finishes or invalidates any half-done round; the loop then sees
  either its own write (converged) or the old state (tries again). If that read fails too, the
  call ends in OUTCOME_UNKNOWN. A reserve recognises its own batch by ``reserve_token``.

Within one store, Paxos rounds on a tenant partition (LWTs and SERIAL reads) queue behind a
per-tenant asyncio lock (``_gate``): concurrent rounds on one partition only pre-empt each other,
and a reserve that holds the lock across its read and batch never loses to a sibling task. Other
stores and processes still race for real; the conditions and retry loops are what make that safe.

Side tables are written around the conditional write in the order that keeps every committed
fact recoverable if the process dies between two statements:

* the recovery hint is written *before* the reserve batch (a stale hint is harmless: scans check
  the commit row; a missing one would strand a RESERVED commit);
* the history row is written *before* RESERVED -> RECORDED (so a RECORDED commit always has its
  history entry; a put_record that dies half-way can show the entry while the commit is still
  RESERVED until the resume finishes it);
* the history expiry is written *before* OUTBOXED -> COMMITTED (a commit never lacks its expiry;
  a mark_committed that dies half-way registers it early, for a commit resume will finish), the
  recovery hint is deleted *after* it.

Expiry is judged against ``query.as_of_ms`` when reading (rows carry ``expires_at_ms``; no CQL
TTL, which would use the server's clock instead of the reader's), so expired rows are never
deleted here and a page may read past them.

Recorded + publication -> Committed is not atomic here (``atomic_publish_and_commit=False``):
``mark_published_and_committed`` is the default two-step path (C-POST-06).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
import uuid
from collections.abc import Awaitable, Sequence
from typing import Any

import attrs
from cassandra import ConsistencyLevel
from cassandra.query import BatchStatement

from impls.api import MembershipDirectory
from impls.cql import _namespaces
from impls.cql._boundary import Operation, translate
from impls.cql._bridge import Page, Row, execute
from impls.cql._codec import (
    StoredCommit,
    commit_from_row,
    expiry_from_row,
    hint_key_from_row,
    history_entry_from_row,
    history_entry_to_row,
    intent_to_row,
    rows_by_clustering,
    sequence_from_row,
)
from impls.cql._inspect import CqlInspector
from impls.cql._schema import CONVERSATION_SEQUENCE, INTERNAL_TEXT, MESSAGE_SEQUENCE, Statement
from impls.cql._session import CqlSettings, Keyspace, open_keyspace
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
    history_query_problem,
    identity_matches,
    request_problem,
    reserve_identity_digest,
    reserve_problem,
)

# Rounds of read-judge-write per transition: stages advance at most three times, plus settles.
_TRANSITION_ROUNDS = 8
# Reserves of one tenant queue on its counters; give up (UNAVAILABLE) after this long.
_RESERVE_BUDGET_S = 30.0
_SCAN_CONCURRENCY = 32
_HISTORY_FETCH_MARGIN = 16  # extra rows per page, for expired entries and has_more


class _Transition(enum.Enum):
    """A stage transition: the stage it advances from and the one it reaches (C-POST-03).

    From ``source`` it advances to ``target``; at ``target`` or beyond it converges; below
    ``source`` the record or publication evidence is missing.
    """

    PUT_RECORD = (CommitStage.RESERVED, CommitStage.RECORDED)
    MARK_OUTBOX_PUBLISHED = (CommitStage.RECORDED, CommitStage.OUTBOXED)
    MARK_COMMITTED = (CommitStage.OUTBOXED, CommitStage.COMMITTED)

    @property
    def source(self) -> CommitStage:
        return self.value[0]

    @property
    def target(self) -> CommitStage:
        return self.value[1]


@attrs.define
class _ReserveAttempt:
    """What one reserve call carries from round to round."""

    identity: bytes
    token: uuid.UUID  # written with the commit row: a settled read recognises our own batch
    hinted: bool = False  # our recovery hint is written
    uncertain: bool = False  # the last batch's outcome is unknown until the next SERIAL read


@attrs.frozen
class _ReserveState:
    message_seq: int
    conversation_seq: int
    commit: StoredCommit | None


async def _all_or_first_error(*calls: Awaitable[Any]) -> list[Any]:
    """Await every call (none is left running unobserved), then raise the first failure."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _error(kind: StoreErrorKind, detail: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(kind, detail, key)


def _unsettled(key: CommitKey) -> MessageStoreError:
    # A conditional write timed out and the SERIAL read that would settle it failed too.
    return MessageStoreError(StoreErrorKind.OUTCOME_UNKNOWN, "a conditional write could not be settled", key)


class CqlMessageStore(CqlInspector):
    """A ``MessageStore`` on one namespace of a Cassandra/ScyllaDB keyspace.

    ``round_trips`` counts every statement sent to the server (for the benchmark figures).
    """

    def __init__(
        self,
        namespace: str,
        membership: MembershipDirectory,
        settings: CqlSettings | None = None,
    ) -> None:
        self._namespace = namespace
        self._membership = membership
        self._settings = settings if settings is not None else CqlSettings()
        self._closed = False
        self._gates: dict[TenantId, asyncio.Lock] = {}
        self._gates_loop: asyncio.AbstractEventLoop | None = None
        self.round_trips = 0
        self._written = _namespaces.Written()  # the partitions to delete in drop_namespace

    internal_text = INTERNAL_TEXT  # C-ERR-01 (impls/cql/_schema.py)

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(atomic_publish_and_commit=False)

    @property
    def namespace(self) -> str:
        return self._namespace

    # --- plumbing --------------------------------------------------------------------------

    def _gate(self, tenant: TenantId) -> asyncio.Lock:
        """One Paxos round at a time per tenant partition from this store.

        Every lightweight transaction and SERIAL read of a tenant lands on one partition, and
        concurrent Paxos rounds there only pre-empt each other (each loser sleeps and retries on
        the server). Queueing them here costs nothing, since the partition serializes them anyway;
        other processes are still handled by the conditions and the retry loops.
        """
        loop = asyncio.get_running_loop()
        if self._gates_loop is not loop:  # asyncio locks belong to one loop
            self._gates, self._gates_loop = {}, loop
        gate = self._gates.get(tenant)
        if gate is None:
            gate = self._gates[tenant] = asyncio.Lock()
        return gate

    async def _keyspace(self) -> Keyspace:
        if self._closed:
            raise _error(StoreErrorKind.UNAVAILABLE, "the store is closed")
        return await open_keyspace(self._settings)

    async def _send(
        self,
        keyspace: Keyspace,
        statement: Any,
        operation: Operation,
        key: CommitKey | None,
        paging_state: bytes | None = None,
    ) -> Page:
        self.round_trips += 1
        try:
            return await execute(
                keyspace.session,
                statement,
                timeout=self._settings.request_timeout_s,
                paging_state=paging_state,
            )
        except Exception as exc:
            raise translate(exc, operation, key) from None

    async def _run(
        self,
        keyspace: Keyspace,
        which: Statement,
        params: Sequence[object],
        operation: Operation,
        key: CommitKey | None = None,
        *,
        serial: bool = False,
        fetch_size: int | None = None,
        paging_state: bytes | None = None,
    ) -> Page:
        bound = keyspace.statement(which).bind(tuple(params))
        if serial:
            bound.consistency_level = ConsistencyLevel.SERIAL
        if fetch_size is not None:
            bound.fetch_size = fetch_size
        return await self._send(keyspace, bound, operation, key, paging_state)

    @staticmethod
    def _applied(page: Page) -> bool:
        return bool(page.rows) and page.rows[0].get("[applied]") is True

    def _row_key(self, key: CommitKey) -> tuple[str, str, str, str]:
        return (self._namespace, key.tenant, key.sender, key.client_message_id)

    async def _read_commit(self, keyspace: Keyspace, key: CommitKey, *, serial: bool) -> StoredCommit | None:
        """The commit row; ``serial`` reads through Paxos (settles any half-done round)."""
        if serial:
            async with self._gate(key.tenant):
                page = await self._run(
                    keyspace, Statement.READ_COMMIT, self._row_key(key), Operation.READ, key, serial=True
                )
        else:
            page = await self._run(keyspace, Statement.READ_COMMIT, self._row_key(key), Operation.READ, key)
        return commit_from_row(key, page.rows[0]) if page.rows else None

    async def _cas(
        self, keyspace: Keyspace, which: Statement, params: Sequence[object], key: CommitKey
    ) -> bool:
        """One lightweight transaction on the key's tenant partition; whether it applied."""
        async with self._gate(key.tenant):
            page = await self._run(keyspace, which, params, Operation.CONDITIONAL_WRITE, key)
        return self._applied(page)

    # --- reserve ---------------------------------------------------------------------------

    async def reserve(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> ReserveResult:
        """C-POST-01, C-POST-02, C-PRE-02, C-PRE-03, C-ERR-04: one conditional batch per new key."""
        key = request.commit_key
        problem = reserve_problem(request, delivery, candidate)
        if problem is None and candidate.record != MessageRecord.from_send(request):
            problem = "candidate record is not the canonical record of the request"
        if problem is not None:
            raise _error(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        keyspace = await self._keyspace()
        self._written.tenants.add(key.tenant)
        attempt = _ReserveAttempt(reserve_identity_digest(request), uuid.uuid4())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _RESERVE_BUDGET_S
        lost_rounds = 0
        while True:
            async with self._gate(key.tenant):
                outcome = await self._reserve_round(keyspace, request, delivery, candidate, attempt)
            if isinstance(outcome, ReserveCreated):
                return outcome
            if outcome is not None:
                hint_at = candidate.accepted_at_ms if attempt.hinted else None
                return await self._existing(keyspace, outcome, request, attempt.token, hint_at)
            if attempt.uncertain:
                continue  # settle at once with the next SERIAL read
            # Another reserve of this tenant (in another process) won the counters: re-read.
            lost_rounds += 1
            if loop.time() > deadline:
                raise _error(StoreErrorKind.UNAVAILABLE, "too many concurrent reserves in this tenant", key)
            await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(lost_rounds, 6))))

    async def _reserve_round(
        self,
        keyspace: Keyspace,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
        attempt: _ReserveAttempt,
    ) -> ReserveCreated | StoredCommit | None:
        """One SERIAL read and, for a new key, one conditional batch.

        Returns the created commit, the commit found under the key, or None when the batch lost
        to another reserve or its outcome is unknown (``attempt.uncertain``; the next read settles it).
        """
        key = request.commit_key
        try:
            state = await self._read_reserve_state(keyspace, key, request.conversation)
        except MessageStoreError:
            if attempt.uncertain:
                raise _unsettled(key) from None
            raise
        attempt.uncertain = False
        if state.commit is not None:
            return state.commit
        intent = CommitIntent(
            key=key,
            identity=attempt.identity,
            coordinates=MessageCoordinates(
                message_seq=state.message_seq + 1,
                conversation_seq=state.conversation_seq + 1,
                accepted_at_ms=candidate.accepted_at_ms,
            ),
            record=candidate.record,
            delivery=delivery,
        )
        if not attempt.hinted:
            # Before the batch: a RESERVED commit must never exist without its hint.
            await self._run(
                keyspace,
                Statement.PUT_HINT,
                (self._namespace, candidate.accepted_at_ms, *self._row_key(key)[1:]),
                Operation.WRITE,
                key,
            )
            attempt.hinted = True
        try:
            applied = await self._create(keyspace, intent, state, attempt.token)
        except MessageStoreError as exc:
            if exc.kind is not StoreErrorKind.OUTCOME_UNKNOWN:
                raise
            attempt.uncertain = True
            return None
        return ReserveCreated(intent) if applied else None

    async def _read_reserve_state(
        self, keyspace: Keyspace, key: CommitKey, conversation: ConversationId
    ) -> _ReserveState:
        message_row, conversation_row = MESSAGE_SEQUENCE, (CONVERSATION_SEQUENCE, conversation)
        page = await self._run(
            keyspace,
            Statement.READ_RESERVE_STATE,
            (
                self._namespace,
                key.tenant,
                *message_row,
                *conversation_row,
                key.sender,
                key.client_message_id,
            ),
            Operation.READ,
            key,
            serial=True,
        )
        rows: dict[tuple[str, str], Row] = dict(rows_by_clustering(page.rows))
        commit_row = rows.get((key.sender, key.client_message_id))
        return _ReserveState(
            message_seq=sequence_from_row(rows.get(message_row)),
            conversation_seq=sequence_from_row(rows.get(conversation_row)),
            commit=None if commit_row is None else commit_from_row(key, commit_row),
        )

    async def _create(
        self, keyspace: Keyspace, intent: CommitIntent, state: _ReserveState, token: uuid.UUID
    ) -> bool:
        key = intent.key
        ns, tenant = self._namespace, key.tenant
        advance = keyspace.statement(Statement.ADVANCE_SEQUENCE)
        batch = BatchStatement(serial_consistency_level=ConsistencyLevel.SERIAL)
        batch.add(
            advance,
            (intent.coordinates.message_seq, ns, tenant, *MESSAGE_SEQUENCE, state.message_seq or None),
        )
        batch.add(
            advance,
            (
                intent.coordinates.conversation_seq,
                ns,
                tenant,
                CONVERSATION_SEQUENCE,
                intent.conversation,
                state.conversation_seq or None,
            ),
        )
        row = intent_to_row(intent, token)
        batch.add(
            keyspace.statement(Statement.CREATE_COMMIT),
            (
                *self._row_key(key),
                row["stage"],
                row["identity"],
                row["conversation"],
                row["message_seq"],
                row["conversation_seq"],
                row["accepted_at_ms"],
                row["intent"],
                row["reserve_token"],
            ),
        )
        page = await self._send(keyspace, batch, Operation.CONDITIONAL_WRITE, key)
        return self._applied(page)

    async def _existing(
        self,
        keyspace: Keyspace,
        stored: StoredCommit,
        request: AuthenticatedSend,
        token: uuid.UUID,
        our_hint_at: TimestampMillis | None,
    ) -> ReserveResult:
        key = stored.key
        if our_hint_at is not None and our_hint_at != stored.coordinates.accepted_at_ms:
            # Our hint names a commit that is not ours: drop it (scans would skip it anyway).
            await self._forget_hint(keyspace, key, our_hint_at)
        if not identity_matches(stored.identity, request):
            raise _error(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
        if stored.stage is CommitStage.COMMITTED:
            return ReserveCommitted(stored.committed_message())
        assert stored.intent is not None
        if stored.reserve_token == token:  # our batch applied though its reply was lost
            return ReserveCreated(stored.intent)
        return ReserveInFlight(stored.intent, stored.stage, stored.publication)

    async def _forget_hint(self, keyspace: Keyspace, key: CommitKey, accepted_at_ms: int) -> None:
        # Hints are advice (scans check the commit row), so a failed delete only leaves clutter.
        with contextlib.suppress(MessageStoreError):
            await self._run(
                keyspace,
                Statement.DELETE_HINT,
                (self._namespace, accepted_at_ms, *self._row_key(key)[1:]),
                Operation.WRITE,
                key,
            )

    # --- stage transitions -----------------------------------------------------------------

    async def put_record(self, intent: CommitIntent) -> None:
        """C-PRE-04, C-POST-03: history entry from ``intent.record``, then RESERVED -> RECORDED."""
        await self._transition(_Transition.PUT_RECORD, intent, None)

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        """C-POST-03: RECORDED -> OUTBOXED with ``publication``; the same value again converges."""
        await self._transition(_Transition.MARK_OUTBOX_PUBLISHED, intent, publication)

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        """C-POST-03, C-POST-05: OUTBOXED -> COMMITTED; expiry registered, body and hint dropped."""
        stored = await self._transition(_Transition.MARK_COMMITTED, intent, None)
        return stored.committed_message()

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        """C-POST-04, C-POST-06: the default two-step path; this store has no atomic step.

        If the second step fails the commit stays OUTBOXED with ``publication``, which is what
        resume's OUTBOXED branch continues from.
        """
        await self.mark_outbox_published(intent, publication)
        return await self.mark_committed(intent)

    async def _transition(
        self, transition: _Transition, intent: CommitIntent, publication: OutboxPublication | None
    ) -> StoredCommit:
        key = intent.key
        keyspace = await self._keyspace()
        self._written.tenants.add(key.tenant)
        self._written.conversations.add((key.tenant, intent.conversation))
        uncertain = False
        for _ in range(_TRANSITION_ROUNDS):
            try:
                stored = await self._read_commit(keyspace, key, serial=True)
            except MessageStoreError:
                if uncertain:
                    raise _unsettled(key) from None
                raise
            settled_after_unknown, uncertain = uncertain, False
            self._judge(stored, intent, publication)
            assert stored is not None
            if stored.stage.rank >= transition.target.rank:
                if transition is _Transition.MARK_COMMITTED and settled_after_unknown:
                    await self._forget_hint(keyspace, key, stored.coordinates.accepted_at_ms)
                return stored
            if stored.stage is not transition.source:
                missing = "record" if stored.stage is CommitStage.RESERVED else "outbox publication"
                raise _error(StoreErrorKind.MISSING_EVIDENCE, f"no durable {missing} yet", key)
            try:
                applied = await self._advance(keyspace, transition, stored, publication)
            except MessageStoreError as exc:
                if exc.kind is not StoreErrorKind.OUTCOME_UNKNOWN:
                    raise
                uncertain = True
                continue
            if applied:
                committed = transition.target is CommitStage.COMMITTED
                advanced = attrs.evolve(
                    stored,
                    stage=transition.target,
                    publication=stored.publication or publication,
                    intent=None if committed else stored.intent,
                    reserve_token=None if committed else stored.reserve_token,
                )
                if transition is _Transition.MARK_COMMITTED:
                    await self._forget_hint(keyspace, key, stored.coordinates.accepted_at_ms)
                return advanced
            # The stage moved under us: judge again from what is there now.
        if uncertain:
            raise _unsettled(key)
        raise _error(StoreErrorKind.UNAVAILABLE, "the commit kept changing; try again", key)

    @staticmethod
    def _judge(
        stored: StoredCommit | None, intent: CommitIntent, publication: OutboxPublication | None
    ) -> None:
        """C-POST-03: the intent must be the reserved one; a durable publication is never replaced."""
        key = intent.key
        if stored is None:
            raise _error(StoreErrorKind.NOT_FOUND, "no commit under this key", key)
        same = (
            stored.identity == intent.identity
            and stored.coordinates == intent.coordinates
            and stored.conversation == intent.conversation
            and (stored.intent is None or stored.intent == intent)
        )
        if not same:
            raise _error(StoreErrorKind.INTENT_MISMATCH, "intent differs from the reserved one", key)
        if publication is not None and stored.publication is not None and stored.publication != publication:
            raise _error(
                StoreErrorKind.PUBLICATION_MISMATCH, "a different publication is already durable", key
            )

    async def _advance(
        self,
        keyspace: Keyspace,
        transition: _Transition,
        stored: StoredCommit,
        publication: OutboxPublication | None,
    ) -> bool:
        """One conditional write ``IF stage = source``, with its side-table write before it."""
        key = stored.key
        intent = stored.intent
        assert intent is not None  # in flight
        history_row = (self._namespace, key.tenant, stored.conversation, stored.coordinates.conversation_seq)
        if transition is _Transition.PUT_RECORD:
            row = history_entry_to_row(intent)
            await self._run(
                keyspace,
                Statement.PUT_HISTORY,
                (
                    row["message_seq"],
                    row["accepted_at_ms"],
                    row["sender"],
                    row["message_type"],
                    row["custom_type"],
                    row["body"],
                    row["reply_to"],
                    *history_row,
                ),
                Operation.WRITE,
                key,
            )
            return await self._cas(keyspace, Statement.MARK_RECORDED, self._row_key(key), key)
        if transition is _Transition.MARK_OUTBOX_PUBLISHED:
            assert publication is not None
            return await self._cas(
                keyspace,
                Statement.MARK_OUTBOXED,
                (publication.stream, publication.entry_id, *self._row_key(key)),
                key,
            )
        expires_at = stored.coordinates.accepted_at_ms + intent.delivery.retention_ms
        await self._run(keyspace, Statement.EXPIRE_HISTORY, (expires_at, *history_row), Operation.WRITE, key)
        return await self._cas(keyspace, Statement.MARK_COMMITTED, self._row_key(key), key)

    # --- reads -----------------------------------------------------------------------------

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        """C-PRE-09: what is durable under ``key``; a key of another conversation conflicts."""
        keyspace = await self._keyspace()
        stored = await self._read_commit(keyspace, key, serial=True)
        if stored is None:
            return None
        if stored.conversation != conversation_id:
            raise _error(StoreErrorKind.IDENTITY_CONFLICT, "key belongs to another conversation", key)
        return stored.loaded()

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        """C-PRE-03, C-PRE-09: the durable canonical identity must name this very request."""
        key = request.commit_key
        problem = request_problem(request)
        if problem is not None:
            raise _error(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        keyspace = await self._keyspace()
        stored = await self._read_commit(keyspace, key, serial=True)
        if stored is None:
            return None
        if not identity_matches(stored.identity, request):
            raise _error(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
        return stored.loaded()

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        """C-POST-02, C-POST-05: in-flight intents accepted before ``older_than``, oldest first.

        The hints give the order; each is confirmed against its commit row (in flight, same
        accepted_at), so hints left by a lost reserve race or an interrupted commit are skipped.
        """
        if not 1 <= max_items <= MAX_SCAN_ITEMS:
            raise _error(StoreErrorKind.INVALID_ARGUMENT, f"max_items must be 1..{MAX_SCAN_ITEMS}")
        keyspace = await self._keyspace()
        found: list[CommitIntent] = []
        paging_state: bytes | None = None
        gate = asyncio.Semaphore(_SCAN_CONCURRENCY)

        async def confirm(accepted_at: int, key: CommitKey) -> CommitIntent | None:
            async with gate:
                stored = await self._read_commit(keyspace, key, serial=False)
            if stored is None or stored.intent is None or stored.coordinates.accepted_at_ms != accepted_at:
                return None
            return stored.intent

        while True:
            page = await self._run(
                keyspace,
                Statement.SCAN_HINTS,
                (self._namespace, older_than),
                Operation.READ,
                fetch_size=max_items,
                paging_state=paging_state,
            )
            hints = [hint_key_from_row(row) for row in page.rows]
            confirmed = await _all_or_first_error(*(confirm(at, key) for at, key in hints))
            found.extend(intent for intent in confirmed if intent is not None)
            paging_state = page.paging_state
            if len(found) >= max_items or paging_state is None:
                return found[:max_items]

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        """C-PRE-05, C-POST-11: authorize, then one page; expiry is judged at ``query.as_of_ms``."""
        problem = history_query_problem(query)
        if problem is not None:
            raise _error(StoreErrorKind.INVALID_ARGUMENT, problem)
        if self._closed:
            raise _error(StoreErrorKind.UNAVAILABLE, "the store is closed")
        try:
            members = await self._membership.members(query.tenant, query.conversation)
        except MessageStoreError:
            raise
        except Exception:
            # The directory is a dependency like the database: its failure is ours to translate.
            raise _error(StoreErrorKind.UNAVAILABLE, "the membership directory did not answer") from None
        if query.actor not in members:
            raise _error(StoreErrorKind.NOT_A_MEMBER, "actor is not a member of the conversation")
        keyspace = await self._keyspace()
        side, lowest, through = await _all_or_first_error(
            self._history_side(keyspace, query),
            self._lowest_live(keyspace, query),
            self._conversation_sequence(keyspace, query),
        )
        entries, has_more = side
        return HistoryPage(
            direction=query.direction,
            anchor=query.anchor,
            limit=query.limit,
            max_bytes=query.max_bytes,
            entries=entries,
            has_more=has_more,
            available_from=lowest,
            available_through=through,
        )

    def _partition(self, query: HistoryQuery) -> tuple[str, str, str]:
        return (self._namespace, query.tenant, query.conversation)

    async def _history_side(
        self, keyspace: Keyspace, query: HistoryQuery
    ) -> tuple[tuple[HistoryEntry, ...], bool]:
        """The live entries on the anchor's side, up to the limit and byte budget, and whether
        any live entry remains beyond them (read until one is found or the side ends)."""
        before = query.direction is HistoryDirection.BEFORE
        if query.anchor is None:
            which = Statement.HISTORY_NEWEST if before else Statement.HISTORY_OLDEST
            params: tuple[object, ...] = self._partition(query)
        else:
            which = Statement.HISTORY_BEFORE if before else Statement.HISTORY_AFTER
            params = (*self._partition(query), query.anchor)
        taken: list[HistoryEntry] = []
        used = 0
        paging_state: bytes | None = None
        while True:
            page = await self._run(
                keyspace,
                which,
                params,
                Operation.READ,
                fetch_size=query.limit + _HISTORY_FETCH_MARGIN,
                paging_state=paging_state,
            )
            for row in page.rows:
                stored = history_entry_from_row(row)
                if not stored.live_at(query.as_of_ms):
                    continue
                body = len(stored.entry.body)
                if len(taken) == query.limit or (taken and used + body > query.max_bytes):
                    return tuple(taken), True
                taken.append(stored.entry)
                used += body
            paging_state = page.paging_state
            if paging_state is None:
                return tuple(taken), False

    async def _lowest_live(self, keyspace: Keyspace, query: HistoryQuery) -> int | None:
        paging_state: bytes | None = None
        while True:
            page = await self._run(
                keyspace,
                Statement.HISTORY_BOUNDS,
                self._partition(query),
                Operation.READ,
                fetch_size=256,
                paging_state=paging_state,
            )
            for row in page.rows:
                seq, expires_at = expiry_from_row(row)
                if expires_at is None or expires_at > query.as_of_ms:
                    return seq
            paging_state = page.paging_state
            if paging_state is None:
                return None

    async def _conversation_sequence(self, keyspace: Keyspace, query: HistoryQuery) -> int:
        page = await self._run(
            keyspace,
            Statement.READ_SEQUENCE,
            (self._namespace, query.tenant, CONVERSATION_SEQUENCE, query.conversation),
            Operation.READ,
        )
        return sequence_from_row(page.rows[0] if page.rows else None)

    # --- lifecycle -------------------------------------------------------------------------

    async def readiness(self) -> None:
        """C-PRE-06: a real query on every call; UNAVAILABLE when the server does not answer."""
        keyspace = await self._keyspace()
        await self._run(keyspace, Statement.READINESS, (), Operation.READ)

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: delete the namespace's partitions (``_namespaces``)."""
        await _namespaces.drop(await self._runner(), self._namespace, self._written)

    async def namespaces(self) -> list[str]:
        return await _namespaces.namespaces(await self._runner())

    async def _runner(self) -> _namespaces.Run:
        keyspace = await self._keyspace()

        async def run(which: Statement, params: Sequence[object], paging: bytes | None) -> Page:
            return await self._run(keyspace, which, params, Operation.WRITE, paging_state=paging)

        return run

    async def close(self) -> None:
        """Stop using the store. The shared session stays up (``shutdown_sessions`` closes it)."""
        self._closed = True
