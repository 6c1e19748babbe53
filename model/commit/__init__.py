"""The MessageStore / MessageCommitter commit contract as a pure reference model.

Theory of operation
-------------------
A send becomes a SEND_ACK through four durable stages, per ``CommitKey`` (tenant, sender, client
message id)::

    absent --reserve--> RESERVED --put_record--> RECORDED --mark_outbox_published--> OUTBOXED
                                                    |                                   |
                                                    +--mark_published_and_committed--+  mark_committed
                                                                                     v  v
                                                                                  COMMITTED

Stages only move forward: ``StoreState.rank(key)`` never decreases, whatever fails. ``reserve`` is
the only place sequence numbers are allocated, once per key. Every later call is idempotent: the
same value again converges, a different value is refused and changes nothing. At COMMITTED a store
keeps only identity digest, coordinates and publication; the ``CommittedMessage`` built from them
is the only basis of an ACK.

This package does no I/O and reads no clock: time arrives as values (``accepted_at_ms``,
``older_than``, ``as_of_ms``). Each store operation is ``op(state, ...) -> (state', outcome)``
(reads return just the outcome); outcomes and errors are values, never raised. The stage table is
``TRANSITIONS``; the committer's branch table is ``next_step``.

Rules enforced here (full text in docs/commit-contract.md)
-----------------------------------------------------------
=========== ==========================================================================
C-PRE-01    ``is_valid_client_message_id``; committer answers INVALID_CLIENT_MESSAGE_ID
C-PRE-02    ``FrozenDeliveryInput`` and ``CommitIntent`` fixed at reserve; repeats keep them
C-PRE-03    ``identity_matches`` in ``reserve`` and ``load_commit_for_request``
C-PRE-04    ``put_record`` writes ``intent.record`` only (history entry from the record)
C-PRE-05    ``history_page`` authorizes ``query.actor`` before reading
C-PRE-06    readiness: no model state; checked against live dependencies by the harness
C-PRE-07    ``reserve_identity_digest`` (QIMD), ``legacy_full_identity`` (QIMC)
C-PRE-08    ``send_problem`` / ``content_problem``: the admission checks the committer runs
C-PRE-09    ``ReserveCommitted`` / ``LoadedCommitted`` carry only the ACK coordinates
C-PRE-10    ``CommitEntry.intent`` dropped at COMMITTED
C-POST-01   ``reserve``: one allocation per key; repeats return the stored coordinates
C-POST-02   ``CommitIntent`` holds every recovery fact; ``scan_recoverable_commits``
C-POST-03   ``TRANSITIONS``: put_record / mark_outbox_published converge; mark_committed needs evidence
C-POST-04   ``mark_published_and_committed`` returns the frozen intent's ``CommittedMessage``
C-POST-05   atomic step: nothing changes on refusal; expiry registered, candidate removed
C-POST-06   ``next_step`` without the atomic capability: mark_outbox_published, then mark_committed
C-POST-07   ``FAULT_POINT_BEFORE``: M-COMMIT-04 between durable ack and the marking call
C-POST-08   re-read and converge: ``next_step`` is a function of the loaded durable stage only
C-POST-09   ``next_step``: continue from the durable stage; COMMITTED only replays
C-POST-10   ``CommittedMessage`` is the sole ACK basis
C-POST-11   ``history_page``: type, custom type, body, direction, anchor, byte limit, bounds
C-ERR-01    ``MessageStoreError`` / ``StoreErrorKind``
C-ERR-02    ``CommitError`` / ``CommitErrorKind``
C-ERR-03    ``CommitErrorKind.RECOVERABLE`` carries the key; never an ACK
C-ERR-04    invalid input: ``INVALID_ARGUMENT`` and the state unchanged
=========== ==========================================================================
"""

from model.commit._committer import (
    FAULT_POINT_AFTER_COMMIT,
    FAULT_POINT_BEFORE,
    CommitStep,
    FaultPoint,
    StoreCapabilities,
    fault_points_for,
    next_step,
)
from model.commit._errors import (
    CommitError,
    CommitErrorKind,
    MessageStoreError,
    StoreErrorKind,
)
from model.commit._identity import (
    DIGEST_HEADER,
    LEGACY_HEADER,
    canonical_identity,
    identity_matches,
    is_well_formed_identity,
    legacy_full_identity,
    reserve_identity_digest,
)
from model.commit._store import (
    TRANSITIONS,
    CommitEntry,
    Effect,
    HistoryRecord,
    Move,
    StoreOperation,
    StoreState,
    history_page,
    load_commit,
    load_commit_for_request,
    mark_committed,
    mark_outbox_published,
    mark_published_and_committed,
    put_record,
    recovery_order,
    reserve,
    scan_recoverable_commits,
)
from model.commit._validation import (
    MAX_BODY_BYTES,
    MAX_HISTORY_BYTES,
    MAX_HISTORY_LIMIT,
    MAX_ID_LENGTH,
    MAX_MENTIONS,
    MAX_SCAN_ITEMS,
    content_problem,
    delivery_problem,
    history_query_problem,
    is_valid_client_message_id,
    is_valid_id,
    request_problem,
    send_problem,
)
from model.commit._values import (
    ABSENT_RANK,
    AuthenticatedSend,
    ClientMessageId,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    DeviceId,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageContent,
    MessageCoordinates,
    MessageRecord,
    MessageType,
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

__all__ = [
    "ABSENT_RANK",
    "DIGEST_HEADER",
    "FAULT_POINT_AFTER_COMMIT",
    "FAULT_POINT_BEFORE",
    "LEGACY_HEADER",
    "MAX_BODY_BYTES",
    "MAX_HISTORY_BYTES",
    "MAX_HISTORY_LIMIT",
    "MAX_ID_LENGTH",
    "MAX_MENTIONS",
    "MAX_SCAN_ITEMS",
    "TRANSITIONS",
    "AuthenticatedSend",
    "ClientMessageId",
    "CommitEntry",
    "CommitError",
    "CommitErrorKind",
    "CommitIntent",
    "CommitKey",
    "CommitStage",
    "CommitStep",
    "CommittedMessage",
    "ConversationId",
    "DeviceId",
    "Effect",
    "FaultPoint",
    "FrozenDeliveryInput",
    "HistoryDirection",
    "HistoryEntry",
    "HistoryPage",
    "HistoryQuery",
    "HistoryRecord",
    "LoadedCommit",
    "LoadedCommitted",
    "LoadedInFlight",
    "MessageContent",
    "MessageCoordinates",
    "MessageRecord",
    "MessageStoreError",
    "MessageType",
    "Move",
    "OutboxPublication",
    "ReserveCandidate",
    "ReserveCommitted",
    "ReserveCreated",
    "ReserveInFlight",
    "ReserveResult",
    "StoreCapabilities",
    "StoreErrorKind",
    "StoreOperation",
    "StoreState",
    "TenantId",
    "TimestampMillis",
    "UserId",
    "canonical_identity",
    "content_problem",
    "delivery_problem",
    "fault_points_for",
    "history_page",
    "history_query_problem",
    "identity_matches",
    "is_valid_client_message_id",
    "is_valid_id",
    "is_well_formed_identity",
    "legacy_full_identity",
    "load_commit",
    "load_commit_for_request",
    "mark_committed",
    "mark_outbox_published",
    "mark_published_and_committed",
    "next_step",
    "put_record",
    "recovery_order",
    "request_problem",
    "reserve",
    "reserve_identity_digest",
    "scan_recoverable_commits",
    "send_problem",
]
