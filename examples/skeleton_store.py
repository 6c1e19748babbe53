"""A skeleton ``MessageStore`` to start a backend from (docs/backend-authors.md, "A skeleton").

Copy it, keep the signatures, fill each method in. Until then every method refuses with
``UNAVAILABLE``, which the harness reports as an environment error (exit 2), never as a pass::

    conformance run --store examples.skeleton_store:make_store --suite store

Each method names the rules it answers to and the errors it may raise; nothing but
``MessageStoreError`` may leave it (C-ERR-01), and its ``detail`` is your own sentence — never a
driver's exception text, a key, a table or a script (declare yours in ``internal_text``).
"""

from __future__ import annotations

from collections.abc import Mapping

from impls.api import MembershipDirectory
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveResult,
    StoreCapabilities,
    StoreErrorKind,
    TimestampMillis,
)


def _todo(what: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(StoreErrorKind.UNAVAILABLE, f"{what} is not written yet", key)


class SkeletonStore:
    """Every method of ``impls.api.MessageStore``, plus the optional ports the harness uses."""

    #: C-ERR-01: fragments of your keys, tables, statements and driver errors (impls.api.DeclaresInternals).
    internal_text = frozenset({"my_table", "INSERT INTO"})

    def __init__(self, namespace: str, membership: MembershipDirectory) -> None:
        self.namespace = namespace  # every key or row you write lives under it
        self.membership = membership  # ask it in history_page (C-PRE-05); never cache it

    @property
    def capabilities(self) -> StoreCapabilities:
        # True only if Recorded + publication -> Committed is one atomic backend step (C-POST-05);
        # False: the committer uses mark_outbox_published then mark_committed (C-POST-06).
        return StoreCapabilities(atomic_publish_and_commit=False)

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        """C-POST-01, C-PRE-02, C-PRE-03, C-PRE-07: ReserveCreated (new key, next sequence numbers),
        ReserveInFlight / ReserveCommitted (a repeat: the stored intent, nothing allocated).
        Raises INVALID_ARGUMENT (``model.commit.reserve_problem``), IDENTITY_CONFLICT."""
        raise _todo("reserve", request.commit_key)

    async def put_record(self, intent: CommitIntent) -> None:
        """C-PRE-04, C-POST-03: RESERVED -> RECORDED, idempotent. Raises NOT_FOUND, INTENT_MISMATCH."""
        raise _todo("put_record", intent.key)

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        """C-POST-03, C-POST-06: RECORDED -> OUTBOXED with ``publication``, idempotent.
        Raises NOT_FOUND, INTENT_MISMATCH, MISSING_EVIDENCE, PUBLICATION_MISMATCH."""
        raise _todo("mark_outbox_published", intent.key)

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        """C-POST-04, C-POST-05: RECORDED (or OUTBOXED with the same publication) -> COMMITTED;
        a refusal writes nothing; success removes the recovery candidate and registers the history
        expiry (accepted_at_ms + retention_ms). Same errors as mark_outbox_published."""
        raise _todo("mark_published_and_committed", intent.key)

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        """C-POST-03: OUTBOXED -> COMMITTED (needs record and publication). Raises NOT_FOUND,
        INTENT_MISMATCH, MISSING_EVIDENCE."""
        raise _todo("mark_committed", intent.key)

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        """C-PRE-09: LoadedInFlight / LoadedCommitted / None. Raises IDENTITY_CONFLICT (another
        conversation), CORRUPT (stored data that does not decode — never a default)."""
        raise _todo("load_commit", key)

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        """C-PRE-03, C-PRE-07: compare the durable identity (QIMD digest; a QIMC one byte for byte)."""
        raise _todo("load_commit_for_request", request.commit_key)

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        """C-POST-02: intents not yet COMMITTED accepted before ``older_than``, oldest first, then by
        key; at most ``max_items`` (1..1000, else INVALID_ARGUMENT)."""
        raise _todo("scan_recoverable_commits")

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        """C-PRE-05, C-POST-11: INVALID_ARGUMENT for a malformed query, NOT_A_MEMBER before reading."""
        raise _todo("history_page")

    async def readiness(self) -> None:
        """C-PRE-06: a real round trip to the server every call (the harness partitions it away)."""
        raise _todo("readiness")

    async def close(self) -> None:
        """Called once at the end of each example."""

    # --- optional ports (impls.api) ---------------------------------------------------------

    async def read_raw(self, key: CommitKey) -> dict[str, object] | None:
        """StoreInspector: the key's stored fields as the backend holds them, or None."""
        raise _todo("read_raw", key)

    async def write_raw(self, key: CommitKey, fields: Mapping[str, object]) -> None:
        """StoreInspector: replace the key's stored fields wholesale (the harness corrupts them)."""
        raise _todo("write_raw", key)


async def make_store(namespace: str, membership: MembershipDirectory) -> SkeletonStore:
    return SkeletonStore(namespace, membership)
