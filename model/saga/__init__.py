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
    _transaction settle(): one transaction's fate
    _store      OrchestratorStore, catalog/route/timer transactions, queries
    _start      start_saga
    _orchestrator handle_result, fire_timer
    _participant handle_command
    _rules      RULES: rule id -> statement

Rule IDs enforced (statements in ``RULES`` and ``docs/saga-contract.md``)
========================================================================

==========  =====================================================================
rule        enforced by
==========  =====================================================================
S-DEF-01    _definition.definition_problems, _catalog.publish
S-CAT-01    _canonical.encode, _definition.canonical_document/definition_digest
S-CAT-02    _catalog.publish
S-CAT-03    _catalog.publish
S-CAT-04    _catalog.LIFECYCLE_TRANSITIONS, next_lifecycle, change_lifecycle
S-CAT-05    _catalog.admits_new_start, _start.start_saga
S-CAT-06    _instance.SagaInstance, make_command, _orchestrator.handle_result
S-CAT-07    _store.definition_references, change_lifecycle, _catalog.change_lifecycle
S-CAT-08    _catalog.load_definition, is_loadable, _start.start_saga
S-CAT-09    _catalog.admits_capability, _routes.register/renew_capability
S-CAT-10    _catalog.query_definition
S-CAT-11    _catalog.change_lifecycle, _store.release_instance/release_reference
S-START-01  _messages.saga_id_for, _start.start_saga
S-START-02  _start.start_saga
S-START-03  _start.start_saga, _instance.begin, _store.stage_command
S-START-04  _start.checkpoints, start_saga
S-START-05  _start.start_saga, _transaction.settle
S-START-06  _start.checkpoints
S-START-07  _start.ALWAYS_ELIGIBLE
S-START-08  _start.start_saga
S-START-09  _start.start_digest_for
S-START-10  _start.admit_payload
S-START-11  _start.admit_payload, _values.is_json_document
S-START-12  _instance.make_command
S-START-13  _start.start_saga
S-ID-01     _messages.effect_id_for, command_identity_holds
S-ID-02     _messages.command_id_for, result_message_id_for
S-ORCH-01   _orchestrator.verify_result, handle_result
S-ORCH-02   _orchestrator.handle_result (_apply)
S-ORCH-03   _orchestrator.handle_result
S-ORCH-04   _orchestrator.handle_result, _instance.react
S-PART-01   _participant.handle_command
S-PART-02   _participant.handle_command
S-PART-03   _participant.handle_command
S-PART-04   _participant.handle_command
S-PART-05   _participant.verify_command
S-PART-06   _participant.handle_command
S-STEP-01   _instance.plan, react
S-STEP-02   _instance.plan, ended_shape
S-STEP-03   _instance.plan, plan_is_sound
S-STEP-04   _instance.plan
S-STEP-05   _instance.plan, _participant.handle_command
S-STEP-06   _instance.plan
S-STEP-07   _instance.TERMINAL_STATUSES, ended_shape, react
S-STEP-08   _instance.SAGA_TRANSITIONS, STEP_TRANSITIONS, awaiting_shape, journal_violations
S-TIMER-01  _timers.fence_holds, check_fence, renew/release_timer
S-TIMER-02  _timers.check_fence, _orchestrator.fire_timer
S-TIMER-03  _timers.next_token, claim_timer
S-TIMER-04  _timers.claim_timer
S-TIMER-05  _orchestrator.fire_timer
S-ROUTE-01  _routes.CapabilityDescriptor, register_capability
S-ROUTE-02  _routes.next_generation, register_capability
S-ROUTE-03  _routes.register_capability
S-ROUTE-04  _routes.validate_transport, descriptor_violation, publisher_target
S-ROUTE-05  _routes.is_bare_origin, is_canonical_base_path
S-ROUTE-06  _routes.validate_transport
S-ROUTE-07  _routes.is_kafka_topic, is_redis_stream_key
S-ROUTE-08  _routes.validate_transport
S-ROUTE-09  _routes.CapabilityRoute.live_at, renew_capability
S-ROUTE-10  _store.catalog_snapshot
S-ROUTE-11  _routes.select_capability_routes
S-ROUTE-12  _routes.select_capability_route
S-TX-01     _transaction.settle
S-TX-02     _transaction.settle
S-DLV-01    _participant.ack_is_earned, outcome ``verdict`` attributes
S-DLV-02    _transaction.RolledBack/OutcomeUnknown verdicts
S-DLV-03    _orchestrator.verify_result, _participant.verify_command
S-DLV-04    _transaction.settle, _participant.ack_is_earned
==========  =====================================================================
"""

# CrossHair budget for the whole package; ``_instance.plan`` raises its own.
# crosshair: per_condition_timeout=2
# crosshair: per_path_timeout=1

from ._canonical import Canon, DecodeError, decode, derive_id, digest_of, encode, sha256_hex
from ._catalog import (
    ACTION_TARGET,
    LIFECYCLE_RANK,
    LIFECYCLE_TRANSITIONS,
    AlreadyPublished,
    Catalog,
    CatalogEntry,
    ChangeLifecycle,
    DefinitionReference,
    Lifecycle,
    LifecycleAction,
    LifecycleChanged,
    LifecycleOutcome,
    LifecycleUnchanged,
    PublishDefinition,
    Published,
    PublishOutcome,
    ReferenceKind,
    admits_capability,
    admits_new_start,
    is_loadable,
    next_lifecycle,
)
from ._definition import (
    DefinitionArtifact,
    StepDefinition,
    canonical_document,
    definition_digest,
    definition_problems,
)
from ._errors import (
    ActivationBlocked,
    CallerError,
    CapabilityRefused,
    DefinitionConflict,
    DefinitionNotLoadable,
    DefinitionNotStartable,
    DigestMismatch,
    EligibilityRevoked,
    Fault,
    HostRefusal,
    IllegalLifecycleTransition,
    IllegalTransition,
    InstanceNotReleasable,
    InvalidDefinition,
    LeaseExpired,
    MessageRefused,
    NoSuchTimer,
    PayloadProblem,
    PayloadRejected,
    PeerRefusal,
    QuotaExhausted,
    RefusalReason,
    Rejection,
    RetirementBlocked,
    RouteInvalid,
    StaleFencingToken,
    StaleGeneration,
    StartConflict,
    TimerLeased,
    TimerNotDue,
    UnknownCapability,
    UnknownCommand,
    UnknownDefinition,
    UnknownReference,
    UnknownSaga,
    UnknownStep,
)
from ._instance import (
    PHASE_STATUS,
    SAGA_TRANSITIONS,
    STEP_TRANSITIONS,
    TERMINAL_STATUSES,
    AttemptTimedOut,
    Awaiting,
    Cause,
    Event,
    JournalEntry,
    Plan,
    Reaction,
    SagaInstance,
    SagaStatus,
    StepAnswered,
    StepStatus,
    awaiting_shape,
    ended_shape,
    journal_violations,
    plan,
    plan_is_sound,
    react,
    reaction_is_sound,
    saga_transition_legal,
    step_transition_legal,
)
from ._messages import (
    CommandEnvelope,
    ResultEnvelope,
    command_id_for,
    command_identity_holds,
    effect_id_for,
    result_message_id_for,
    saga_id_for,
)
from ._orchestrator import (
    DuplicateResult,
    FireOutcome,
    FireTimer,
    ResultApplied,
    ResultDelivery,
    ResultOutcome,
    StaleResult,
    TimerFired,
    TimerObsolete,
    fire_timer,
    handle_result,
    verify_result,
)
from ._participant import (
    CommandDelivery,
    CommandOutcome,
    CommandProcessed,
    DeadLettered,
    Decision,
    DuplicateCommand,
    GateRecord,
    ParticipantConfig,
    ParticipantState,
    StepBinding,
    ack_is_earned,
    effect_counts,
    handle_command,
    verify_command,
)
from ._routes import (
    AmbiguousRoute,
    CapabilityDescriptor,
    CapabilityKey,
    CapabilityRegistered,
    CapabilityRenewed,
    CapabilityRoute,
    NoRoute,
    PublisherTarget,
    RegisterCapability,
    RegisterOutcome,
    RenewCapability,
    RenewOutcome,
    RouteQuery,
    RouteSet,
    RouteTable,
    RouteTarget,
    SelectedRoute,
    TransportViolation,
    descriptor_violation,
    is_bare_origin,
    is_canonical_base_path,
    is_kafka_topic,
    is_redis_stream_key,
    next_generation,
    publisher_target,
    route_target,
    validate_transport,
)
from ._rules import RULES
from ._start import (
    ALWAYS_ELIGIBLE,
    AlreadyExists,
    Eligibility,
    StartAttempt,
    Started,
    StartOutcome,
    StartSaga,
    admit_payload,
    checkpoints,
    start_digest_for,
    start_saga,
)
from ._store import (
    CatalogSnapshot,
    CommandPublished,
    InstanceReleased,
    OrchestratorStore,
    OutboxEntry,
    RecordReference,
    ReferenceRecorded,
    ReferenceReleased,
    StartReceipt,
    catalog_snapshot,
    change_lifecycle,
    claim_timer,
    definition_references,
    journal_of,
    load_definition,
    mark_command_published,
    pending_commands,
    publish_definition,
    query_definition,
    record_reference,
    register_capability,
    release_instance,
    release_reference,
    release_timer,
    renew_capability,
    renew_timer,
    select_capability_route,
    select_capability_routes,
)
from ._timers import (
    ClaimOutcome,
    ClaimTimer,
    Lease,
    ReleaseTimer,
    RenewTimer,
    Timer,
    TimerClaimed,
    TimerReleased,
    TimerRenewed,
    TimerTable,
    due_timers,
    fence_holds,
    next_token,
    timer_id_for,
)
from ._transaction import OutcomeUnknown, RolledBack, settle
from ._values import (
    JSON_CONTRACT,
    JSON_MEDIA_TYPE,
    CommitFate,
    DefinitionKey,
    PayloadContract,
    Phase,
    ResultKind,
    SagaPayload,
    Transport,
    UncertainPolicy,
    Verdict,
    is_json_document,
    is_json_media_type,
)

__all__ = [
    "ACTION_TARGET",
    "ALWAYS_ELIGIBLE",
    "JSON_CONTRACT",
    "JSON_MEDIA_TYPE",
    "LIFECYCLE_RANK",
    "LIFECYCLE_TRANSITIONS",
    "PHASE_STATUS",
    "RULES",
    "SAGA_TRANSITIONS",
    "STEP_TRANSITIONS",
    "TERMINAL_STATUSES",
    "ActivationBlocked",
    "AlreadyExists",
    "AlreadyPublished",
    "AmbiguousRoute",
    "AttemptTimedOut",
    "Awaiting",
    "CallerError",
    "Canon",
    "CapabilityDescriptor",
    "CapabilityKey",
    "CapabilityRefused",
    "CapabilityRegistered",
    "CapabilityRenewed",
    "CapabilityRoute",
    "Catalog",
    "CatalogEntry",
    "CatalogSnapshot",
    "Cause",
    "ChangeLifecycle",
    "ClaimOutcome",
    "ClaimTimer",
    "CommandDelivery",
    "CommandEnvelope",
    "CommandOutcome",
    "CommandProcessed",
    "CommandPublished",
    "CommitFate",
    "DeadLettered",
    "Decision",
    "DecodeError",
    "DefinitionArtifact",
    "DefinitionConflict",
    "DefinitionKey",
    "DefinitionNotLoadable",
    "DefinitionNotStartable",
    "DefinitionReference",
    "DigestMismatch",
    "DuplicateCommand",
    "DuplicateResult",
    "Eligibility",
    "EligibilityRevoked",
    "Event",
    "Fault",
    "FireOutcome",
    "FireTimer",
    "GateRecord",
    "HostRefusal",
    "IllegalLifecycleTransition",
    "IllegalTransition",
    "InstanceNotReleasable",
    "InstanceReleased",
    "InvalidDefinition",
    "JournalEntry",
    "Lease",
    "LeaseExpired",
    "Lifecycle",
    "LifecycleAction",
    "LifecycleChanged",
    "LifecycleOutcome",
    "LifecycleUnchanged",
    "MessageRefused",
    "NoRoute",
    "NoSuchTimer",
    "OrchestratorStore",
    "OutboxEntry",
    "OutcomeUnknown",
    "ParticipantConfig",
    "ParticipantState",
    "PayloadContract",
    "PayloadProblem",
    "PayloadRejected",
    "PeerRefusal",
    "Phase",
    "Plan",
    "PublishDefinition",
    "PublishOutcome",
    "Published",
    "PublisherTarget",
    "QuotaExhausted",
    "Reaction",
    "RecordReference",
    "ReferenceKind",
    "ReferenceRecorded",
    "ReferenceReleased",
    "RefusalReason",
    "RegisterCapability",
    "RegisterOutcome",
    "Rejection",
    "ReleaseTimer",
    "RenewCapability",
    "RenewOutcome",
    "RenewTimer",
    "ResultApplied",
    "ResultDelivery",
    "ResultEnvelope",
    "ResultKind",
    "ResultOutcome",
    "RetirementBlocked",
    "RolledBack",
    "RouteInvalid",
    "RouteQuery",
    "RouteSet",
    "RouteTable",
    "RouteTarget",
    "SagaInstance",
    "SagaPayload",
    "SagaStatus",
    "SelectedRoute",
    "StaleFencingToken",
    "StaleGeneration",
    "StaleResult",
    "StartAttempt",
    "StartConflict",
    "StartOutcome",
    "StartReceipt",
    "StartSaga",
    "Started",
    "StepAnswered",
    "StepBinding",
    "StepDefinition",
    "StepStatus",
    "Timer",
    "TimerClaimed",
    "TimerFired",
    "TimerLeased",
    "TimerNotDue",
    "TimerObsolete",
    "TimerReleased",
    "TimerRenewed",
    "TimerTable",
    "Transport",
    "TransportViolation",
    "UncertainPolicy",
    "UnknownCapability",
    "UnknownCommand",
    "UnknownDefinition",
    "UnknownReference",
    "UnknownSaga",
    "UnknownStep",
    "Verdict",
    "ack_is_earned",
    "admit_payload",
    "admits_capability",
    "admits_new_start",
    "awaiting_shape",
    "canonical_document",
    "catalog_snapshot",
    "change_lifecycle",
    "checkpoints",
    "claim_timer",
    "command_id_for",
    "command_identity_holds",
    "decode",
    "definition_digest",
    "definition_problems",
    "definition_references",
    "derive_id",
    "descriptor_violation",
    "digest_of",
    "due_timers",
    "effect_counts",
    "effect_id_for",
    "encode",
    "ended_shape",
    "fence_holds",
    "fire_timer",
    "handle_command",
    "handle_result",
    "is_bare_origin",
    "is_canonical_base_path",
    "is_json_document",
    "is_json_media_type",
    "is_kafka_topic",
    "is_loadable",
    "is_redis_stream_key",
    "journal_of",
    "journal_violations",
    "load_definition",
    "mark_command_published",
    "next_generation",
    "next_lifecycle",
    "next_token",
    "pending_commands",
    "plan",
    "plan_is_sound",
    "publish_definition",
    "publisher_target",
    "query_definition",
    "react",
    "reaction_is_sound",
    "record_reference",
    "register_capability",
    "release_instance",
    "release_reference",
    "release_timer",
    "renew_capability",
    "renew_timer",
    "result_message_id_for",
    "route_target",
    "saga_id_for",
    "saga_transition_legal",
    "select_capability_route",
    "select_capability_routes",
    "settle",
    "sha256_hex",
    "start_digest_for",
    "start_saga",
    "step_transition_legal",
    "timer_id_for",
    "validate_transport",
    "verify_command",
    "verify_result",
]
