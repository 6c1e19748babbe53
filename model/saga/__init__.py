"""Reference model of the saga runtime: catalog, starts, orchestrator, participant, timers.

Theory of operation
===================

The model is sans-IO: no clock (time is an ``now_ms`` input), no randomness, no I/O. All
state is in frozen values and every operation is a plain function
``f(state, request) -> (state, outcome)``. Outcomes are closed unions of frozen types; a
refusal is a ``Rejection`` (``CallerError``, ``PeerRefusal`` or ``HostRefusal``: whose
fault it was) returned beside the very state that was passed in. The model never raises
for a contract outcome; it raises ``ValueError`` only when a request value is malformed
at construction (a programming error, not a contract outcome).

Two databases are modelled. ``OrchestratorStore`` is what the orchestrator commits:
catalog and capability routes, instances with start receipts, the transition journal,
the result inbox, durable timers, the command outbox and quota. ``ParticipantState`` is
one participant's database: command inbox, effect gate, business facts, result outbox.
Messages between them are plain envelopes; the harness plays the network (duplicates,
reordering, loss, forgery) and feeds deliveries to the two sides.

Each local transaction's fault is an input (``CommitFate``): committed, rolled back
before COMMIT, or COMMIT sent with the answer lost (the harness knows whether it
applied; the reported outcome is ``OutcomeUnknown`` either way). Tables carry the
transitions: ``LIFECYCLE_TRANSITIONS`` (catalog), ``SAGA_TRANSITIONS`` and
``STEP_TRANSITIONS`` (instances and journal).

Identities are derived from the facts they name (``saga_id_for``, ``effect_id_for``,
``command_id_for``, ``result_message_id_for``, ``timer_id_for``), so a runtime that
derives them the same way can be compared with the model value for value.

Layers, bottom up::

    _canonical  encoding, digests, derived ids
    _values     names, keys, payloads, phases, verdicts, commit fates
    _errors     rejections
    _definition definitions, canonical document, digest
    _catalog    lifecycle table, publish, load/query
    _routes     transport contract, generations, selection
    _timers     fenced durable timers
    _messages   envelopes and identities
    _instance   saga/step tables, plan() (the step policy), react(), journal legality
    _transaction settle(): one transaction's fate; refuse_corrupt(): a stored row that does not decode
    _store      OrchestratorStore, catalog/route/timer transactions, queries
    _start      start_saga
    _orchestrator handle_result, fire_timer
    _audit      management vocabulary: permissions, context, control state, audit records
    _management manage(): pause, resume, retry compensation/resolution, manual close
    _queries    the business query API: get, list, audit trail
    _participant handle_command
    _delivery   consumer groups on a stream: read, claim, settle, dead-letter, trim
    _offsets    a partitioned log with committed offsets (Kafka): frontier, back-off, rebalance
    _signing    HMAC-signed envelopes under rotatable keys
    _receipts   request/response delivery: admission by principal, closed receipts
    _observability stage set, label policy, reconciliation, store facts (S-OBS-*)
    _rules      RULES: rule id -> statement

Rule IDs and their statements are ``RULES`` (``_rules.py``); docs/saga-contract.md states the
same rules and maps each to where the model enforces it, its tests and its harness check
(section 7, Traceability).
"""

# CrossHair budget for the whole package; ``_instance.plan`` raises its own.
# crosshair: per_condition_timeout=2
# crosshair: per_path_timeout=1

from ._audit import ACTIVE_CONTROL as ACTIVE_CONTROL
from ._audit import ALL_PERMISSIONS as ALL_PERMISSIONS
from ._audit import CONTROL_ACTIONS as CONTROL_ACTIONS
from ._audit import NO_EXPECTATION as NO_EXPECTATION
from ._audit import REQUIRED_PERMISSION as REQUIRED_PERMISSION
from ._audit import AuditRecord as AuditRecord
from ._audit import Control as Control
from ._audit import ControlState as ControlState
from ._audit import Expectation as Expectation
from ._audit import ManagementAction as ManagementAction
from ._audit import ManagementContext as ManagementContext
from ._audit import OperationScope as OperationScope
from ._audit import Permission as Permission
from ._audit import context_valid as context_valid
from ._audit import same_ledger as same_ledger
from ._canonical import Canon as Canon
from ._canonical import DecodeError as DecodeError
from ._canonical import decode as decode
from ._canonical import derive_id as derive_id
from ._canonical import digest_of as digest_of
from ._canonical import encode as encode
from ._canonical import sha256_hex as sha256_hex
from ._catalog import ACTION_TARGET as ACTION_TARGET
from ._catalog import LIFECYCLE_RANK as LIFECYCLE_RANK
from ._catalog import LIFECYCLE_TRANSITIONS as LIFECYCLE_TRANSITIONS
from ._catalog import AlreadyPublished as AlreadyPublished
from ._catalog import Catalog as Catalog
from ._catalog import CatalogEntry as CatalogEntry
from ._catalog import ChangeLifecycle as ChangeLifecycle
from ._catalog import LifecycleChanged as LifecycleChanged
from ._catalog import LifecycleOutcome as LifecycleOutcome
from ._catalog import LifecycleUnchanged as LifecycleUnchanged
from ._catalog import PublishDefinition as PublishDefinition
from ._catalog import Published as Published
from ._catalog import PublishOutcome as PublishOutcome
from ._catalog import admits_capability as admits_capability
from ._catalog import admits_new_start as admits_new_start
from ._catalog import is_loadable as is_loadable
from ._catalog import next_lifecycle as next_lifecycle
from ._definition import DOCUMENT_FORMAT as DOCUMENT_FORMAT
from ._definition import DefinitionArtifact as DefinitionArtifact
from ._definition import StepDefinition as StepDefinition
from ._definition import canonical_document as canonical_document
from ._definition import definition_digest as definition_digest
from ._definition import definition_problems as definition_problems
from ._delivery import ENTRY_TRANSITIONS as ENTRY_TRANSITIONS
from ._delivery import Acknowledged as Acknowledged
from ._delivery import Backlog as Backlog
from ._delivery import ClaimIdle as ClaimIdle
from ._delivery import ConsumerGroup as ConsumerGroup
from ._delivery import DeadLetter as DeadLetter
from ._delivery import DeadLetterRecorded as DeadLetterRecorded
from ._delivery import Delivered as Delivered
from ._delivery import Delivery as Delivery
from ._delivery import DeliveryStream as DeliveryStream
from ._delivery import LeftPending as LeftPending
from ._delivery import NoSuchGroup as NoSuchGroup
from ._delivery import NotPending as NotPending
from ._delivery import Pending as Pending
from ._delivery import ReadGroup as ReadGroup
from ._delivery import ReadOutcome as ReadOutcome
from ._delivery import SettleEntry as SettleEntry
from ._delivery import SettleOutcome as SettleOutcome
from ._delivery import StreamEntry as StreamEntry
from ._delivery import Trim as Trim
from ._delivery import Trimmed as Trimmed
from ._delivery import TrimOutcome as TrimOutcome
from ._delivery import TrimRefused as TrimRefused
from ._delivery import append as append
from ._delivery import backlog as backlog
from ._delivery import claim_idle as claim_idle
from ._delivery import create_group as create_group
from ._delivery import entry_state as entry_state
from ._delivery import read_group as read_group
from ._delivery import settle_entry as settle_entry
from ._delivery import trim as trim
from ._delivery import trim_frontier as trim_frontier
from ._errors import ActivationBlocked as ActivationBlocked
from ._errors import CallerError as CallerError
from ._errors import CapabilityRefused as CapabilityRefused
from ._errors import DefinitionConflict as DefinitionConflict
from ._errors import DefinitionNotLoadable as DefinitionNotLoadable
from ._errors import DefinitionNotStartable as DefinitionNotStartable
from ._errors import DigestMismatch as DigestMismatch
from ._errors import EligibilityRevoked as EligibilityRevoked
from ._errors import Fault as Fault
from ._errors import HostRefusal as HostRefusal
from ._errors import IllegalLifecycleTransition as IllegalLifecycleTransition
from ._errors import IllegalTransition as IllegalTransition
from ._errors import InstanceNotReleasable as InstanceNotReleasable
from ._errors import InvalidDefinition as InvalidDefinition
from ._errors import LeaseExpired as LeaseExpired
from ._errors import ManagedSagaNotFound as ManagedSagaNotFound
from ._errors import ManagementContextInvalid as ManagementContextInvalid
from ._errors import ManagementPrecondition as ManagementPrecondition
from ._errors import ManagementProblem as ManagementProblem
from ._errors import MessageRefused as MessageRefused
from ._errors import NoSuchTimer as NoSuchTimer
from ._errors import OperationConflict as OperationConflict
from ._errors import PayloadProblem as PayloadProblem
from ._errors import PayloadRejected as PayloadRejected
from ._errors import PeerRefusal as PeerRefusal
from ._errors import PermissionDenied as PermissionDenied
from ._errors import QuotaExhausted as QuotaExhausted
from ._errors import RefusalReason as RefusalReason
from ._errors import Rejection as Rejection
from ._errors import RetirementBlocked as RetirementBlocked
from ._errors import RouteInvalid as RouteInvalid
from ._errors import StaleFencingToken as StaleFencingToken
from ._errors import StaleGeneration as StaleGeneration
from ._errors import StaleSnapshot as StaleSnapshot
from ._errors import StartConflict as StartConflict
from ._errors import TimerLeased as TimerLeased
from ._errors import TimerNotDue as TimerNotDue
from ._errors import UnknownCapability as UnknownCapability
from ._errors import UnknownCommand as UnknownCommand
from ._errors import UnknownDefinition as UnknownDefinition
from ._errors import UnknownReference as UnknownReference
from ._errors import UnknownSaga as UnknownSaga
from ._errors import UnknownStep as UnknownStep
from ._instance import PHASE_STATUS as PHASE_STATUS
from ._instance import SAGA_TRANSITIONS as SAGA_TRANSITIONS
from ._instance import SETTLED_STATUSES as SETTLED_STATUSES
from ._instance import STEP_TRANSITIONS as STEP_TRANSITIONS
from ._instance import TERMINAL_STATUSES as TERMINAL_STATUSES
from ._instance import AttemptTimedOut as AttemptTimedOut
from ._instance import Awaiting as Awaiting
from ._instance import Cause as Cause
from ._instance import Event as Event
from ._instance import JournalEntry as JournalEntry
from ._instance import Plan as Plan
from ._instance import Reaction as Reaction
from ._instance import SagaInstance as SagaInstance
from ._instance import StepAnswered as StepAnswered
from ._instance import StepStatus as StepStatus
from ._instance import awaiting_shape as awaiting_shape
from ._instance import ended_shape as ended_shape
from ._instance import journal_violations as journal_violations
from ._instance import plan as plan
from ._instance import plan_is_sound as plan_is_sound
from ._instance import react as react
from ._instance import reaction_is_sound as reaction_is_sound
from ._instance import saga_transition_legal as saga_transition_legal
from ._instance import step_transition_legal as step_transition_legal
from ._keys import CapabilityKey as CapabilityKey
from ._keys import DefinitionReference as DefinitionReference
from ._keys import Lifecycle as Lifecycle
from ._keys import LifecycleAction as LifecycleAction
from ._keys import ReferenceKind as ReferenceKind
from ._keys import SagaStatus as SagaStatus
from ._keys import TransportViolation as TransportViolation
from ._management import Manage as Manage
from ._management import ManagementApplied as ManagementApplied
from ._management import ManagementReplayed as ManagementReplayed
from ._management import ManageOutcome as ManageOutcome
from ._management import authorize as authorize
from ._management import control_of as control_of
from ._management import is_paused as is_paused
from ._management import manage as manage
from ._management import manual_step as manual_step
from ._management import next_attempt as next_attempt
from ._management import plan_recovery as plan_recovery
from ._messages import CommandEnvelope as CommandEnvelope
from ._messages import ResultEnvelope as ResultEnvelope
from ._messages import command_id_for as command_id_for
from ._messages import command_identity_holds as command_identity_holds
from ._messages import effect_id_for as effect_id_for
from ._messages import result_message_id_for as result_message_id_for
from ._messages import saga_id_for as saga_id_for
from ._observability import FACT_METRICS as FACT_METRICS
from ._observability import FORBIDDEN_LABELS as FORBIDDEN_LABELS
from ._observability import GOVERNANCE_METRIC as GOVERNANCE_METRIC
from ._observability import LABEL_VALUES as LABEL_VALUES
from ._observability import METRIC_LABELS as METRIC_LABELS
from ._observability import OPERATION_OUTCOMES as OPERATION_OUTCOMES
from ._observability import PROCESSING_METRIC as PROCESSING_METRIC
from ._observability import STAGE_BUCKETS as STAGE_BUCKETS
from ._observability import STAGE_METRIC as STAGE_METRIC
from ._observability import SUMMARY_QUANTILES as SUMMARY_QUANTILES
from ._observability import TRANSPORT_METRIC as TRANSPORT_METRIC
from ._observability import UNIT_OUTCOMES as UNIT_OUTCOMES
from ._observability import Operation as Operation
from ._observability import Series as Series
from ._observability import Stage as Stage
from ._observability import StoreFacts as StoreFacts
from ._observability import Tally as Tally
from ._observability import Unit as Unit
from ._observability import bucket_of as bucket_of
from ._observability import command_stages as command_stages
from ._observability import fire_lateness as fire_lateness
from ._observability import label_violations as label_violations
from ._observability import outcome_label as outcome_label
from ._observability import store_facts as store_facts
from ._observability import unit_tally as unit_tally
from ._offsets import BackingOff as BackingOff
from ._offsets import CommitOutcome as CommitOutcome
from ._offsets import DeliverOutcome as DeliverOutcome
from ._offsets import NoSuchRecord as NoSuchRecord
from ._offsets import NothingToDeliver as NothingToDeliver
from ._offsets import NotOwner as NotOwner
from ._offsets import OffsetCommitted as OffsetCommitted
from ._offsets import OffsetDeadLetter as OffsetDeadLetter
from ._offsets import OffsetRefused as OffsetRefused
from ._offsets import OutcomeRecorded as OutcomeRecorded
from ._offsets import PartitionedLog as PartitionedLog
from ._offsets import PartitionState as PartitionState
from ._offsets import RecordDelivered as RecordDelivered
from ._offsets import assign_partition as assign_partition
from ._offsets import commit_offset as commit_offset
from ._offsets import deliver_record as deliver_record
from ._offsets import offset_frontier as offset_frontier
from ._offsets import partition_lag as partition_lag
from ._offsets import produce_record as produce_record
from ._offsets import settle_record as settle_record
from ._orchestrator import DuplicateResult as DuplicateResult
from ._orchestrator import FireOutcome as FireOutcome
from ._orchestrator import FireTimer as FireTimer
from ._orchestrator import ResultApplied as ResultApplied
from ._orchestrator import ResultDeferred as ResultDeferred
from ._orchestrator import ResultDelivery as ResultDelivery
from ._orchestrator import ResultOutcome as ResultOutcome
from ._orchestrator import StaleResult as StaleResult
from ._orchestrator import TimerDeferred as TimerDeferred
from ._orchestrator import TimerFired as TimerFired
from ._orchestrator import TimerObsolete as TimerObsolete
from ._orchestrator import fire_timer as fire_timer
from ._orchestrator import handle_result as handle_result
from ._orchestrator import verify_result as verify_result
from ._participant import CommandDelivery as CommandDelivery
from ._participant import CommandOutcome as CommandOutcome
from ._participant import CommandProcessed as CommandProcessed
from ._participant import DeadLettered as DeadLettered
from ._participant import Decision as Decision
from ._participant import DuplicateCommand as DuplicateCommand
from ._participant import GateRecord as GateRecord
from ._participant import ParticipantConfig as ParticipantConfig
from ._participant import ParticipantState as ParticipantState
from ._participant import StepBinding as StepBinding
from ._participant import ack_is_earned as ack_is_earned
from ._participant import dead_letter_unrecorded as dead_letter_unrecorded
from ._participant import effect_counts as effect_counts
from ._participant import handle_command as handle_command
from ._participant import restart_participant as restart_participant
from ._participant import verify_command as verify_command
from ._queries import AuditTrail as AuditTrail
from ._queries import GetSaga as GetSaga
from ._queries import ListSagas as ListSagas
from ._queries import ReadAudit as ReadAudit
from ._queries import SagaPage as SagaPage
from ._queries import SagaView as SagaView
from ._queries import get_saga as get_saga
from ._queries import list_sagas as list_sagas
from ._queries import read_audit as read_audit
from ._queries import view_of as view_of
from ._receipts import ACKNOWLEDGING as ACKNOWLEDGING
from ._receipts import Admitted as Admitted
from ._receipts import CallAnswer as CallAnswer
from ._receipts import DeliveryCall as DeliveryCall
from ._receipts import Receipt as Receipt
from ._receipts import ReceiptKind as ReceiptKind
from ._receipts import Unauthenticated as Unauthenticated
from ._receipts import admit_call as admit_call
from ._receipts import answer_call as answer_call
from ._receipts import receipt_for as receipt_for
from ._receipts import same_acknowledgement as same_acknowledgement
from ._routes import AmbiguousRoute as AmbiguousRoute
from ._routes import CapabilityDescriptor as CapabilityDescriptor
from ._routes import CapabilityRegistered as CapabilityRegistered
from ._routes import CapabilityRenewed as CapabilityRenewed
from ._routes import CapabilityRoute as CapabilityRoute
from ._routes import NoRoute as NoRoute
from ._routes import PublisherTarget as PublisherTarget
from ._routes import RegisterCapability as RegisterCapability
from ._routes import RegisterOutcome as RegisterOutcome
from ._routes import RenewCapability as RenewCapability
from ._routes import RenewOutcome as RenewOutcome
from ._routes import RouteQuery as RouteQuery
from ._routes import RouteSet as RouteSet
from ._routes import RouteTable as RouteTable
from ._routes import RouteTarget as RouteTarget
from ._routes import SelectedRoute as SelectedRoute
from ._routes import descriptor_violation as descriptor_violation
from ._routes import is_bare_origin as is_bare_origin
from ._routes import is_canonical_base_path as is_canonical_base_path
from ._routes import is_kafka_topic as is_kafka_topic
from ._routes import is_redis_stream_key as is_redis_stream_key
from ._routes import next_generation as next_generation
from ._routes import publisher_target as publisher_target
from ._routes import route_target as route_target
from ._routes import validate_transport as validate_transport
from ._rules import RULES as RULES
from ._signing import Authentic as Authentic
from ._signing import EnvelopeRefused as EnvelopeRefused
from ._signing import KeyRing as KeyRing
from ._signing import KeyState as KeyState
from ._signing import SignatureProblem as SignatureProblem
from ._signing import SignedEnvelope as SignedEnvelope
from ._signing import SigningKey as SigningKey
from ._signing import Verification as Verification
from ._signing import add_key as add_key
from ._signing import key_moves_forward as key_moves_forward
from ._signing import retire as retire
from ._signing import rotate as rotate
from ._signing import sign as sign
from ._signing import signature_for as signature_for
from ._signing import verify as verify
from ._start import ALWAYS_ELIGIBLE as ALWAYS_ELIGIBLE
from ._start import AlreadyExists as AlreadyExists
from ._start import Eligibility as Eligibility
from ._start import StartAttempt as StartAttempt
from ._start import Started as Started
from ._start import StartOutcome as StartOutcome
from ._start import StartSaga as StartSaga
from ._start import admit_payload as admit_payload
from ._start import checkpoints as checkpoints
from ._start import start_digest_for as start_digest_for
from ._start import start_saga as start_saga
from ._store import CatalogSnapshot as CatalogSnapshot
from ._store import CommandPublished as CommandPublished
from ._store import InstanceReleased as InstanceReleased
from ._store import OrchestratorStore as OrchestratorStore
from ._store import OutboxedCommand as OutboxedCommand
from ._store import QuotaMode as QuotaMode
from ._store import RecordReference as RecordReference
from ._store import ReferenceRecorded as ReferenceRecorded
from ._store import ReferenceReleased as ReferenceReleased
from ._store import StartReceipt as StartReceipt
from ._store import catalog_snapshot as catalog_snapshot
from ._store import change_lifecycle as change_lifecycle
from ._store import claim_timer as claim_timer
from ._store import definition_references as definition_references
from ._store import drop_namespace as drop_namespace
from ._store import journal_of as journal_of
from ._store import load_definition as load_definition
from ._store import mark_command_published as mark_command_published
from ._store import pending_commands as pending_commands
from ._store import publish_definition as publish_definition
from ._store import query_definition as query_definition
from ._store import record_reference as record_reference
from ._store import register_capability as register_capability
from ._store import release_instance as release_instance
from ._store import release_reference as release_reference
from ._store import release_timer as release_timer
from ._store import renew_capability as renew_capability
from ._store import renew_timer as renew_timer
from ._store import select_capability_route as select_capability_route
from ._store import select_capability_routes as select_capability_routes
from ._store import settle_quota as settle_quota
from ._timers import ClaimOutcome as ClaimOutcome
from ._timers import ClaimTimer as ClaimTimer
from ._timers import Lease as Lease
from ._timers import ReleaseTimer as ReleaseTimer
from ._timers import RenewTimer as RenewTimer
from ._timers import Timer as Timer
from ._timers import TimerClaimed as TimerClaimed
from ._timers import TimerReleased as TimerReleased
from ._timers import TimerRenewed as TimerRenewed
from ._timers import TimerTable as TimerTable
from ._timers import due_timers as due_timers
from ._timers import fence_holds as fence_holds
from ._timers import next_token as next_token
from ._timers import timer_id_for as timer_id_for
from ._transaction import STORED_ROW_KINDS as STORED_ROW_KINDS
from ._transaction import OutcomeUnknown as OutcomeUnknown
from ._transaction import RolledBack as RolledBack
from ._transaction import StoredRowCorrupt as StoredRowCorrupt
from ._transaction import refuse_corrupt as refuse_corrupt
from ._transaction import settle as settle
from ._values import JSON_CONTRACT as JSON_CONTRACT
from ._values import JSON_MEDIA_TYPE as JSON_MEDIA_TYPE
from ._values import CommitFate as CommitFate
from ._values import DefinitionKey as DefinitionKey
from ._values import DeliveryVerdict as DeliveryVerdict
from ._values import PayloadContract as PayloadContract
from ._values import Phase as Phase
from ._values import ResultKind as ResultKind
from ._values import SagaPayload as SagaPayload
from ._values import Transport as Transport
from ._values import UncertainPolicy as UncertainPolicy
from ._values import is_json_document as is_json_document
from ._values import is_json_media_type as is_json_media_type
