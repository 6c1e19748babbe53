"""MessageCommitter: the only boundary that turns a durable commit into a SEND_ACK (C-POST-10).

Theory of operation
-------------------
The committer keeps nothing between calls. Each call first learns what is durable under its key (a
load, or the answer of ``reserve``) and then follows ``model.commit.next_step`` from that stage until
the store hands back a ``CommittedMessage`` (C-POST-09). The one fact a call may hold that the store
does not yet know is the publication the outbox just acknowledged (``publication_in_hand``).

A write that succeeded moves the call's view forward without a read: the stage it reached is known.
Any ``MessageStoreError`` makes the view unknown instead: the call re-reads (``load_commit``) and
continues from what is durable, so a lost response, a concurrent committer and a refused second
publication all converge forward (C-POST-08). Every failed or raced step spends one of
``max_attempts``; when they are spent the call ends with ``CommitError`` RECOVERABLE and its key
(C-ERR-03). No ACK is ever built here: it is always the store's ``CommittedMessage``.

Fault points (docs/faults.md): before each step the call awaits ``fault_hook`` at
``FAULT_POINT_BEFORE[step]``; after a committing write it awaits it at M-COMMIT-06. The harness's hook
raises a ``BaseException`` to kill the call there, which is why nothing here catches
``BaseException``: only ``MessageStoreError`` inside a step, and ``Exception`` at each public method's
boundary, where anything unexpected becomes a ``CommitError`` (C-ERR-02).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator

import attrs

from impls.api import Clock, MembershipDirectory, MessageStore, Outbox
from impls.commit._quota import Quota
from model.commit import (
    FAULT_POINT_AFTER_COMMIT,
    FAULT_POINT_BEFORE,
    MAX_SCAN_ITEMS,
    AuthenticatedSend,
    CommitError,
    CommitErrorKind,
    CommitKey,
    CommitStage,
    CommitStep,
    CommittedMessage,
    ConversationId,
    FaultPoint,
    FrozenDeliveryInput,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageRecord,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveCreated,
    ReserveResult,
    StoreErrorKind,
    TimestampMillis,
    UserId,
    delivery_problem,
    is_valid_client_message_id,
    next_step,
    send_problem,
)

FaultHook = Callable[[FaultPoint, CommitKey], Awaitable[None]]

DEFAULT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000
DEFAULT_MAX_ATTEMPTS = 8

_log = logging.getLogger(__name__)


async def no_faults(point: FaultPoint, key: CommitKey) -> None:
    """The production fault hook: every fault point is a no-op."""


class MessageCommitter:
    """Commits sends through a ``MessageStore`` and an ``Outbox``; raises only ``CommitError``.

    ``resume`` takes the conversation as well as the key: ``MessageStore.load_commit`` is keyed by
    both (the seed's ``resume(key)`` predates that), and a recovery sweep has it from the intent.
    """

    def __init__(
        self,
        store: MessageStore,
        outbox: Outbox,
        membership: MembershipDirectory,
        clock: Clock,
        *,
        quota: Quota | None = None,
        fault_hook: FaultHook | None = None,
        retention_ms: int = DEFAULT_RETENTION_MS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if retention_ms <= 0 or max_attempts < 1:
            raise ValueError("retention_ms must be > 0 and max_attempts >= 1")
        self._store = store
        self._outbox = outbox
        self._membership = membership
        self._clock = clock
        self._quota = quota
        self._fault_hook = fault_hook if fault_hook is not None else no_faults
        self._retention_ms = retention_ms
        self._max_attempts = max_attempts

    # --- public boundary -------------------------------------------------------------------

    async def prepare(self, request: AuthenticatedSend) -> tuple[FrozenDeliveryInput, ReserveCandidate]:
        """C-PRE-02: freeze delivery (current members and version) and the canonical record now.

        The store keeps the first frozen values under a key; a retry's newer ones are ignored.
        """
        with _only_commit_errors(request.commit_key):
            members = await self._membership.members(request.tenant, request.conversation)
            version = await self._membership.version(request.tenant, request.conversation)
            delivery = FrozenDeliveryInput(
                conversation=request.conversation,
                recipients=tuple(members),
                membership_version=version,
                retention_ms=self._retention_ms,
            )
            candidate = ReserveCandidate(MessageRecord.from_send(request), self._clock.now_ms())
            return delivery, candidate

    async def send(self, request: AuthenticatedSend) -> CommittedMessage:
        """``prepare`` then ``commit``: what a gateway calls for one SEND."""
        delivery, candidate = await self.prepare(request)
        return await self.commit(request, delivery, candidate)

    async def commit(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> CommittedMessage:
        """C-PRE-01, C-PRE-02, C-PRE-03, C-PRE-08, C-POST-09, C-ERR-02.

        Validate; if the request is already durable continue from there without admission (the
        sender was admitted when it was reserved); otherwise admit, reserve and continue.
        A current member with no quota to spend goes straight to ``reserve``, which answers a
        repeat with its durable state: one round trip fewer on every fresh commit.
        """
        key = request.commit_key
        with _only_commit_errors(key):
            _check_send(request, delivery, candidate)
            run = _Run(key, request.conversation, self._max_attempts)
            members = await self._membership.members(request.tenant, request.conversation)
            admitted = self._quota is None and request.sender in members
            # A retry from a sender who left, or one a quota would charge twice, must find its
            # durable request before admission is asked again (C-PRE-02, C-PRE-08).
            loaded = None if admitted else await self._load_for_request(run, request)
            if loaded is None:
                await self._admit(request, members)
                loaded = await self._reserve(run, request, delivery, candidate)
            return await self._drive(run, loaded)

    async def resume(self, key: CommitKey, conversation: ConversationId) -> CommittedMessage:
        """C-POST-09: continue a reserved commit from its durable stage; NOT_FOUND if never reserved.

        Uses only the stored intent: no membership, no payload (C-PRE-02).
        """
        with _only_commit_errors(key):
            _check_client_message_id(key)
            run = _Run(key, conversation, self._max_attempts)
            loaded = await self._reread(run)
            if loaded is None:
                raise CommitError(CommitErrorKind.NOT_FOUND, "no commit under this key", key)
            return await self._drive(run, loaded)

    async def resume_existing(self, request: AuthenticatedSend) -> CommittedMessage | None:
        """C-PRE-03, C-POST-09: finish this exact request if it was reserved; None if it never was."""
        key = request.commit_key
        with _only_commit_errors(key):
            _check_client_message_id(key)
            run = _Run(key, request.conversation, self._max_attempts)
            loaded = await self._load_for_request(run, request)
            if loaded is None:
                return None
            return await self._drive(run, loaded)

    async def recover_due(self, older_than: TimestampMillis, max_items: int) -> int:
        """C-POST-02, C-POST-09: resume every intent accepted before ``older_than`` (up to ``max_items``).

        Returns how many of the scanned keys are now COMMITTED. A key that cannot finish now is
        skipped (it stays a recovery candidate); a failed scan is UNAVAILABLE.
        """
        with _only_commit_errors(None):
            if not 1 <= max_items <= MAX_SCAN_ITEMS:
                raise CommitError(CommitErrorKind.INVALID_REQUEST, f"max_items must be 1..{MAX_SCAN_ITEMS}")
            try:
                intents = await self._store.scan_recoverable_commits(older_than, max_items)
            except MessageStoreError as error:
                raise CommitError(CommitErrorKind.UNAVAILABLE, "recovery scan failed") from error
            recovered = 0
            for intent in intents:
                try:
                    await self.resume(intent.key, intent.conversation)
                except CommitError as error:
                    _log.warning("recovery left a commit unfinished: %s", error)
                    continue
                recovered += 1
            return recovered

    async def readiness(self) -> None:
        """C-PRE-06: the store and the outbox each answer a real round trip, every call."""
        with _only_commit_errors(None):
            for name, check in (("store", self._store.readiness), ("outbox", self._outbox.readiness)):
                try:
                    await check()
                except MessageStoreError as error:
                    raise CommitError(CommitErrorKind.UNAVAILABLE, f"{name} is not ready") from error

    # --- before reserve --------------------------------------------------------------------

    async def _admit(self, request: AuthenticatedSend, members: frozenset[UserId]) -> None:
        """C-PRE-08: sender membership now, then quota; only for a key not yet reserved."""
        key = request.commit_key
        if request.sender not in members:
            raise CommitError(CommitErrorKind.NOT_A_MEMBER, "sender is not a member of the conversation", key)
        if self._quota is not None and not await self._quota.admit(request.tenant, request.sender):
            raise CommitError(CommitErrorKind.QUOTA_EXCEEDED, "sender is over its send quota", key)

    async def _load_for_request(self, run: _Run, request: AuthenticatedSend) -> LoadedCommit | None:
        while True:
            try:
                return await self._store.load_commit_for_request(request)
            except MessageStoreError as error:
                run.failed(error)

    async def _reserve(
        self,
        run: _Run,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> LoadedCommit:
        """C-POST-01: reserve once; a lost response is settled by reading the request back."""
        while True:
            await self._fault_hook(FAULT_POINT_BEFORE[CommitStep.RESERVE], run.key)
            try:
                return _as_loaded(await self._store.reserve(request, delivery, candidate))
            except MessageStoreError as error:
                run.failed(error)
            loaded = await self._load_for_request(run, request)
            if loaded is not None:
                return loaded

    # --- from a durable stage to COMMITTED ---------------------------------------------------

    async def _reread(self, run: _Run) -> LoadedCommit | None:
        while True:
            try:
                return await self._store.load_commit(run.key, run.conversation)
            except MessageStoreError as error:
                run.failed(error)

    async def _drive(self, run: _Run, loaded: LoadedCommit) -> CommittedMessage:
        """C-POST-06..09: follow ``next_step`` from ``loaded`` until the store returns the ACK."""
        view: LoadedCommit | None = loaded
        while True:
            if view is None:
                view = await self._reread(run)
                if view is None:
                    # Reserved keys never disappear; a store that lost one cannot be finished here.
                    raise CommitError.recoverable(run.key, "the reservation is no longer readable")
            step = next_step(view, self._store.capabilities, run.publication_in_hand)
            if isinstance(view, LoadedCommitted):  # step is REPLAY_ACK
                return await self._acknowledge(run, view.message)
            await self._fault_hook(FAULT_POINT_BEFORE[step], run.key)
            try:
                outcome = await self._take(step, view, run)
            except MessageStoreError as error:
                run.failed(error)
                view = None  # unknown: re-read before the next step
                continue
            if isinstance(outcome, CommittedMessage):
                return await self._acknowledge(run, outcome)
            view = outcome

    async def _take(
        self, step: CommitStep, view: LoadedInFlight, run: _Run
    ) -> LoadedCommit | CommittedMessage:
        """Perform one step; return the durable view it leaves, or the store's CommittedMessage."""
        intent = view.intent
        publication = run.publication_in_hand
        if step is CommitStep.PUT_RECORD:
            await self._store.put_record(intent)
            return LoadedInFlight(intent, CommitStage.RECORDED, None)
        if step is CommitStep.PUBLISH_OUTBOX:
            run.publication_in_hand = await self._outbox.publish(intent)
            return view
        if step is CommitStep.MARK_OUTBOX_PUBLISHED:
            assert publication is not None  # next_step only chooses it with a publication in hand
            await self._store.mark_outbox_published(intent, publication)
            return LoadedInFlight(intent, CommitStage.OUTBOXED, publication)
        run.committing = True
        if step is CommitStep.MARK_PUBLISHED_AND_COMMITTED:
            assert publication is not None
            return await self._store.mark_published_and_committed(intent, publication)
        assert step is CommitStep.MARK_COMMITTED, step
        return await self._store.mark_committed(intent)

    async def _acknowledge(self, run: _Run, message: CommittedMessage) -> CommittedMessage:
        # M-COMMIT-06 follows this call's own committing write; a plain replay passes no fault point.
        if run.committing:
            await self._fault_hook(FAULT_POINT_AFTER_COMMIT, run.key)
        return message


@attrs.define
class _Run:
    """The bookkeeping of one committer call on one key."""

    key: CommitKey
    conversation: ConversationId
    max_attempts: int
    failures: int = 0
    publication_in_hand: OutboxPublication | None = None
    committing: bool = False  # this call has sent a committing write (M-COMMIT-06 follows it)

    def failed(self, error: MessageStoreError) -> None:
        """Settle a failed store or outbox call: a final CommitError, or one more attempt spent."""
        final = _final_error(error, self.key)
        if final is not None:
            raise final from error
        self.failures += 1
        if self.failures >= self.max_attempts:
            raise CommitError.recoverable(self.key, "could not finish now; retry with the same key")


def _final_error(error: MessageStoreError, key: CommitKey) -> CommitError | None:
    """The store errors that no re-read can change; None for those a re-read settles."""
    if error.kind is StoreErrorKind.IDENTITY_CONFLICT:
        return CommitError(CommitErrorKind.CONFLICT, "another request owns this client message id", key)
    if error.kind is StoreErrorKind.INVALID_ARGUMENT:
        return CommitError(CommitErrorKind.INVALID_REQUEST, error.detail, key)
    if error.kind is StoreErrorKind.CORRUPT:
        return CommitError.recoverable(key, "the stored commit could not be read")
    return None


def _as_loaded(result: ReserveResult) -> LoadedCommit:
    if isinstance(result, ReserveCreated):
        return LoadedInFlight(result.intent, CommitStage.RESERVED, None)
    if isinstance(result, ReserveCommitted):
        return LoadedCommitted(result.message)
    return LoadedInFlight(result.intent, result.stage, result.publication)


def _check_client_message_id(key: CommitKey) -> None:
    if not is_valid_client_message_id(key.client_message_id):
        raise CommitError(CommitErrorKind.INVALID_CLIENT_MESSAGE_ID, "client message id is not valid", key)


def _check_send(
    request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
) -> None:
    """C-PRE-01 first, then C-PRE-08 content and ids, then the frozen inputs; nothing is read yet."""
    _check_client_message_id(request.commit_key)
    problem = send_problem(request) or delivery_problem(request, delivery)
    if problem is None and candidate.record != MessageRecord.from_send(request):
        problem = "candidate record is not the canonical record of the request"
    if problem is not None:
        raise CommitError(CommitErrorKind.INVALID_REQUEST, problem, request.commit_key)


@contextlib.contextmanager
def _only_commit_errors(key: CommitKey | None) -> Iterator[None]:
    """C-ERR-02: the one exit of every public method. ``BaseException`` (a crash, a cancel) passes."""
    try:
        yield
    except CommitError:
        raise
    except Exception as error:
        # A bug below us (a store raising ValueError, a directory timing out): never a fake outcome.
        _log.exception("unexpected failure inside the committer")
        if key is None:
            raise CommitError(CommitErrorKind.UNAVAILABLE, "unexpected failure") from error
        raise CommitError.recoverable(key, "unexpected failure; retry with the same key") from error
