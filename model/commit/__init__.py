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

Rule IDs and their statements are ``RULES`` (``_rules.py``); docs/commit-contract.md states the
same rules and maps each to the model function that enforces it, its tests and its harness check.
"""

from model.commit._committer import FAULT_POINT_AFTER_COMMIT as FAULT_POINT_AFTER_COMMIT
from model.commit._committer import FAULT_POINT_BEFORE as FAULT_POINT_BEFORE
from model.commit._committer import CommitStep as CommitStep
from model.commit._committer import FaultPoint as FaultPoint
from model.commit._committer import StoreCapabilities as StoreCapabilities
from model.commit._committer import fault_points_for as fault_points_for
from model.commit._committer import next_step as next_step
from model.commit._errors import CommitError as CommitError
from model.commit._errors import CommitErrorKind as CommitErrorKind
from model.commit._errors import MessageStoreError as MessageStoreError
from model.commit._errors import StoreErrorKind as StoreErrorKind
from model.commit._expiry_ahead import record_history_ahead as record_history_ahead
from model.commit._expiry_ahead import register_expiry_ahead as register_expiry_ahead
from model.commit._identity import DIGEST_HEADER as DIGEST_HEADER
from model.commit._identity import LEGACY_HEADER as LEGACY_HEADER
from model.commit._identity import canonical_identity as canonical_identity
from model.commit._identity import identity_matches as identity_matches
from model.commit._identity import is_well_formed_identity as is_well_formed_identity
from model.commit._identity import legacy_full_identity as legacy_full_identity
from model.commit._identity import reserve_identity_digest as reserve_identity_digest
from model.commit._rules import RULES as RULES
from model.commit._store import TRANSITIONS as TRANSITIONS
from model.commit._store import CommitEntry as CommitEntry
from model.commit._store import Effect as Effect
from model.commit._store import HistoryRecord as HistoryRecord
from model.commit._store import Move as Move
from model.commit._store import StoreOperation as StoreOperation
from model.commit._store import StoreState as StoreState
from model.commit._store import drop_namespace as drop_namespace
from model.commit._store import history_page as history_page
from model.commit._store import holds_data as holds_data
from model.commit._store import load_commit as load_commit
from model.commit._store import load_commit_for_request as load_commit_for_request
from model.commit._store import mark_committed as mark_committed
from model.commit._store import mark_outbox_published as mark_outbox_published
from model.commit._store import mark_published_and_committed as mark_published_and_committed
from model.commit._store import put_record as put_record
from model.commit._store import recovery_order as recovery_order
from model.commit._store import reserve as reserve
from model.commit._store import scan_recoverable_commits as scan_recoverable_commits
from model.commit._validation import MAX_BODY_BYTES as MAX_BODY_BYTES
from model.commit._validation import MAX_HISTORY_BYTES as MAX_HISTORY_BYTES
from model.commit._validation import MAX_HISTORY_LIMIT as MAX_HISTORY_LIMIT
from model.commit._validation import MAX_ID_LENGTH as MAX_ID_LENGTH
from model.commit._validation import MAX_INT64 as MAX_INT64
from model.commit._validation import MAX_MENTIONS as MAX_MENTIONS
from model.commit._validation import MAX_SCAN_ITEMS as MAX_SCAN_ITEMS
from model.commit._validation import candidate_problem as candidate_problem
from model.commit._validation import content_problem as content_problem
from model.commit._validation import delivery_problem as delivery_problem
from model.commit._validation import history_query_problem as history_query_problem
from model.commit._validation import is_valid_client_message_id as is_valid_client_message_id
from model.commit._validation import is_valid_id as is_valid_id
from model.commit._validation import request_problem as request_problem
from model.commit._validation import reserve_problem as reserve_problem
from model.commit._validation import send_problem as send_problem
from model.commit._values import ABSENT_RANK as ABSENT_RANK
from model.commit._values import AuthenticatedSend as AuthenticatedSend
from model.commit._values import ClientMessageId as ClientMessageId
from model.commit._values import CommitIntent as CommitIntent
from model.commit._values import CommitKey as CommitKey
from model.commit._values import CommitStage as CommitStage
from model.commit._values import CommittedMessage as CommittedMessage
from model.commit._values import ConversationId as ConversationId
from model.commit._values import DeviceId as DeviceId
from model.commit._values import FrozenDeliveryInput as FrozenDeliveryInput
from model.commit._values import HistoryDirection as HistoryDirection
from model.commit._values import HistoryEntry as HistoryEntry
from model.commit._values import HistoryPage as HistoryPage
from model.commit._values import HistoryQuery as HistoryQuery
from model.commit._values import LoadedCommit as LoadedCommit
from model.commit._values import LoadedCommitted as LoadedCommitted
from model.commit._values import LoadedInFlight as LoadedInFlight
from model.commit._values import MessageContent as MessageContent
from model.commit._values import MessageCoordinates as MessageCoordinates
from model.commit._values import MessageRecord as MessageRecord
from model.commit._values import MessageType as MessageType
from model.commit._values import OutboxPublication as OutboxPublication
from model.commit._values import ReserveCandidate as ReserveCandidate
from model.commit._values import ReserveCommitted as ReserveCommitted
from model.commit._values import ReserveCreated as ReserveCreated
from model.commit._values import ReserveInFlight as ReserveInFlight
from model.commit._values import ReserveResult as ReserveResult
from model.commit._values import TenantId as TenantId
from model.commit._values import TimestampMillis as TimestampMillis
from model.commit._values import UserId as UserId
