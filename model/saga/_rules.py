"""The saga contract's rule IDs and their one-line statements.

Harness reports name a rule by ID and print its statement from here; the package
docstring's table, ``docs/saga-contract.md`` and the model tests list the same IDs
(a test keeps the four in step).
"""

from __future__ import annotations

from collections.abc import Mapping

RULES: Mapping[str, str] = {
    # definitions and catalog
    "S-DEF-01": "A definition has steps with unique names, positive timeouts, attempt and "
    "resolve budgets, and only its last step may be non-compensable.",
    "S-CAT-01": "A published version is the complete ordered seal; its canonical document "
    "and SHA-256 digest form the immutable version.",
    "S-CAT-02": "A publisher's claimed digest must be the digest of the canonical document.",
    "S-CAT-03": "Re-publishing the same key and digest is idempotent; a different digest "
    "under the same key is a conflict.",
    "S-CAT-04": "Lifecycle moves candidate -> active -> deprecated -> retired, one step "
    "forward; a repeated move is a no-op; any other move is refused.",
    "S-CAT-05": "Only an active definition admits new starts; deprecation blocks new starts "
    "and nothing else.",
    "S-CAT-06": "Instances keep the version and digest frozen at start and keep running "
    "under them after deprecation.",
    "S-CAT-07": "Retirement is refused while retained instances, migrations, audit entries, "
    "unpublished outbox entries or live capability leases reference the definition.",
    "S-CAT-08": "Candidate and retired definitions are not loaded; nothing starts on a "
    "retired definition, replays included.",
    "S-CAT-09": "Capabilities of a retired definition can be neither registered nor renewed.",
    "S-CAT-10": "A retired definition's artifact, document and digest stay queryable.",
    "S-CAT-11": "Retiring changes the lifecycle only; facts go away only by explicit "
    "release under the retention policy.",
    # start
    "S-START-01": "A start is idempotent on (tenant, workflow, business key), which names the saga.",
    "S-START-02": "A replayed committed start with the same digest is AlreadyExists, with a "
    "different digest StartConflict, for running and terminal instances and in any "
    "lifecycle but retired.",
    "S-START-03": "A new start commits instance, receipt, initial transition, quota unit, "
    "first command and timer together; a refused start leaves none of them.",
    "S-START-04": "Host eligibility is checked before the snapshot is used, at every "
    "resumption and before commit; a failed check rolls everything back.",
    "S-START-05": "After COMMIT was sent, success or an unknown outcome is reported as such, "
    "never as a definite rollback.",
    "S-START-06": "A start joined to the caller's transaction leaves the final commit and "
    "its gate to the outer transaction.",
    "S-START-07": "An unconstrained start is the authorized start with a check that always holds.",
    "S-START-08": "Eligibility also constrains duplicate receipts: a replay is answered only "
    "after every checkpoint passed.",
    "S-START-09": "The start digest covers definition key and digest, business key, payload "
    "contract and raw payload bytes.",
    "S-START-10": "Raw payload and JSON payload are mutually exclusive; exactly one is given.",
    "S-START-11": "JSON input is validated, never rewritten; non-JSON input needs an "
    "explicit schema; the contract must match the definition's.",
    "S-START-12": "Only first-step execute commands carry the payload, on every attempt; "
    "later steps, resolve and compensation carry none.",
    "S-START-13": "A start beyond the tenant's quota (admitted starts, or instances in flight) is refused.",
    # identities
    "S-ID-01": "effect_id is derived from (saga, step, phase) and stable across attempts; "
    "resolve names its polled effect as target.",
    "S-ID-02": "command_id is derived from (effect_id, attempt) and names one delivery; a "
    "result's message id is derived from its command.",
    # orchestrator
    "S-ORCH-01": "Digest, owner, producer trust and message identity are verified before "
    "the inbox claim; a refused message claims nothing.",
    "S-ORCH-02": "Inbox claim, instance CAS, journal, timer and command outbox commit as one transaction.",
    "S-ORCH-03": "A result whose message id was already claimed is absorbed as a duplicate.",
    "S-ORCH-04": "A verified result for an effect no longer awaited claims its key and changes nothing else.",
    # participant
    "S-PART-01": "Inbox, gate, business fact and result outbox commit as one transaction.",
    "S-PART-02": "A copy of an already-claimed command is absorbed by the inbox.",
    "S-PART-03": "Another attempt at a decided effect is answered from the gate by "
    "effect_id and never re-executed: each effect applies at most once.",
    "S-PART-04": "A transient failure rolls back and is not acknowledged; a command failing "
    "more than its budget is dead-lettered.",
    "S-PART-05": "Producer, owner, step, digest, identities and payload contract are "
    "verified before the inbox claim.",
    "S-PART-06": "A resolve poll answers from the gate, asks the outside world for an "
    "unknown effect, and fences an effect that never ran.",
    # step outcomes
    "S-STEP-01": "A success advances; the last success completes the saga.",
    "S-STEP-02": "A rejection compensates the completed steps in reverse order, ending Compensated.",
    "S-STEP-03": "An unconfirmable effect goes to resolution or manual intervention per "
    "step policy, never to compensation.",
    "S-STEP-04": "Resolution polls by effect_id within a bounded budget; exhaustion ends in "
    "manual intervention.",
    "S-STEP-05": "Timeouts re-dispatch within a bounded attempt budget that never cuts short "
    "uncertain outcomes; an unknown commit is never a plain retry.",
    "S-STEP-06": "A compensation rejected, unknown or out of attempts ends in manual intervention.",
    "S-STEP-07": "Completed, Compensated and ManuallyClosed are terminal; AwaitingManualIntervention "
    "awaits no command and takes no automatic transition, only management leaves it.",
    "S-STEP-08": "Instance, step and journal transitions follow the tables.",
    # timers
    "S-TIMER-01": "Claim, renew, complete and release are fenced by the lease token.",
    "S-TIMER-02": "A stale fencing token is refused and changes nothing.",
    "S-TIMER-03": "A fencing token identifies one claim: no claim reuses a token handed out before.",
    "S-TIMER-04": "A due timer is claimable when unleased or its lease expired; a holder whose "
    "lease expired lost its authority, taken over or not.",
    "S-TIMER-05": "Firing a timer and the timeout transition commit together; a settled "
    "command's timer completes without a transition.",
    # management actions and the business query API
    "S-MGT-01": "Every management action and read needs a valid context (actor, reason) and its own "
    "permission, checked before anything is read.",
    "S-MGT-02": "The tenant is the authorization target: a saga of another tenant is not found.",
    "S-MGT-03": "An operation id names one action within its saga: a committed one is replayed with "
    "the current state and writes nothing; bound to another action it conflicts.",
    "S-MGT-04": "Expected state and control revisions, when given, must match the instance's, else "
    "StaleSnapshot and nothing is written.",
    "S-MGT-05": "Pause and resume flip a control state beside the status, with its own revision; a "
    "paused instance takes no automatic transition (results and timers deferred).",
    "S-MGT-06": "Retry resolution: from manual intervention with an unresolved effect of a resolving "
    "step, one new resolve poll; Resolving.",
    "S-MGT-07": "Retry compensation: from manual intervention with an unconfirmed compensation, a new "
    "attempt of that compensation; Compensating.",
    "S-MGT-08": "Manual close: from manual intervention only, to the terminal ManuallyClosed, "
    "claiming no business outcome.",
    "S-MGT-09": "An applied action writes its instance and control change and one audit record "
    "(actor, reason, operation id, before/after) in one transaction; a refused one writes nothing.",
    "S-MGT-10": "The business query API gets a saga, lists a tenant's sagas by status in keyset "
    "pages and reads a saga's audit trail, authorized like actions, without payloads.",
    # capability routes
    "S-ROUTE-01": "A descriptor carries replica, definition/step, transport, origin, base "
    "path, credentials digest and lease; only the step's owner registers it.",
    "S-ROUTE-02": "The catalog allocates route generations monotonically per capability key "
    "and returns them with the receipt.",
    "S-ROUTE-03": "Clocks and caller claims carry no generation authority; an uncertain "
    "re-report gets the committed generation.",
    "S-ROUTE-04": "Registration, candidate activation and publisher construction share one "
    "transport contract.",
    "S-ROUTE-05": "HTTP takes a bare origin and a canonical base path.",
    "S-ROUTE-06": "gRPC takes a bare https origin.",
    "S-ROUTE-07": "Kafka topics and Redis Streams keys follow their naming rules.",
    "S-ROUTE-08": "Non-HTTP transports take no HTTP path.",
    "S-ROUTE-09": "An expired lease makes the replica unroutable without touching the definition.",
    "S-ROUTE-10": "A catalog snapshot combines the registry and live capabilities of one revision.",
    "S-ROUTE-11": "select_capability_routes returns every live HTTP/gRPC replica route; "
    "Kafka/Redis replicas must share one target.",
    "S-ROUTE-12": "select_capability_route requires a unique target and reports ambiguity.",
    # transactions and delivery verdicts
    "S-TX-01": "A local transaction's writes land together or not at all.",
    "S-TX-02": "After COMMIT was sent, a lost answer is an unknown outcome, never a "
    "rollback or a plain retry.",
    "S-TX-03": "A stored row that does not decode is refused as corrupt, never read as a foreign "
    "error or a defaulted value; the unit that met it writes nothing.",
    "S-TX-04": "A saga backend's namespace drop that reports success leaves no row readable "
    "through the namespace opened again; a listing that names any namespace names every one "
    "holding rows (Ratchet decision).",
    "S-DLV-01": "A message is acknowledged only after its local commit or duplicate absorption.",
    "S-DLV-02": "Transient failures and unknown commits keep the message for redelivery.",
    "S-DLV-03": "Unauthenticated or unauthorized messages are refused before any handler state is touched.",
    "S-DLV-04": "A retryable outcome is never reported as committed.",
    # delivery on streams (the seed's redis-stream row)
    "S-STREAM-01": "A group read delivers the entries after its last-delivered id in id order; each "
    "becomes pending with its consumer, delivery time and a delivery count of 1.",
    "S-STREAM-02": "A delivered entry stays pending until settled: a dead consumer or a redeliver "
    "verdict leaves it there, never lost and never implicitly acknowledged.",
    "S-STREAM-03": "A claim takes over only entries idle at least the minimum idle time, restarts "
    "their idle time and counts one more delivery; a consumer still working keeps its entries.",
    "S-STREAM-04": "An entry is acknowledged only after its unit committed or absorbed it as a "
    "duplicate, and only in its own group.",
    "S-STREAM-05": "Envelopes are HMAC-signed by their producer's key; unsigned, unknown-key, "
    "retired-key or mismatching envelopes are refused before the handler and dead-lettered.",
    "S-STREAM-06": "Dead-lettering copies the entry and acknowledges it in one atomic step; never "
    "one without the other, and each entry at most once.",
    "S-STREAM-07": "Trimming never passes the frontier: the minimum over groups of the first "
    "pending or not-yet-delivered entry.",
    "S-STREAM-08": "A group's backlog is its undelivered entries plus its pending entries.",
    "S-STREAM-09": "Key rotation makes a new signing key and keeps the previous one for "
    "verification; a retired key verifies nothing; keys only move forward.",
    # request/response delivery (the seed's grpc-transport row)
    "S-GRPC-01": "Every admitted delivery call gets exactly one receipt of a closed set: "
    "committed, duplicate, retryable or rejected, from the outcome's verdict.",
    "S-GRPC-02": "The principal is the authenticated client certificate's, bound to the producer "
    "identity; a call claiming another producer is rejected before the handler.",
    "S-GRPC-03": "A call without an authenticated principal is refused before the handler; "
    "nothing it carries reaches the inbox.",
    "S-GRPC-04": "A rolled-back or unknown commit is answered retryable, never committed.",
    "S-GRPC-05": "A retry after a lost reply gets the acknowledgement it missed for the same "
    "message, never a second effect.",
    # delivery on a partitioned log with committed offsets (the seed's kafka row)
    "S-KAFKA-01": "Offsets of a partition are given in produce order from 0 and never reused; a "
    "partition's committed offset never moves backward.",
    "S-KAFKA-02": "A committed offset never passes the frontier: the smallest offset whose unit has "
    "no outcome yet (committed, duplicate absorbed, or dead letter acknowledged).",
    "S-KAFKA-03": "A dead letter is acknowledged by the broker before its record's offset is "
    "committed; a dead-lettered record is done only then.",
    "S-KAFKA-04": "A transient failure backs off its own partition only and redelivers from that "
    "record; every other partition keeps being delivered meanwhile.",
    "S-KAFKA-05": "A rebalance stops the old owner's work on a revoked partition, commits nothing "
    "not done, and the new owner resumes at the committed offset; the inbox absorbs what repeats.",
    # observability
    "S-OBS-01": "nasaga_stage_duration_seconds has exactly the five fixed stages over fixed bucket bounds.",
    "S-OBS-02": "The handler and the participant, start and transition transaction stages observe every "
    "attempt, failed, rolled-back and refused ones included.",
    "S-OBS-03": "Timer lateness is observed once per fire whose claim the fence re-verified, as fire time "
    "minus due time; a stale fire observes nothing.",
    "S-OBS-04": "Transport, governance and processing counters have one source per process, count every "
    "call once by its outcome, and no metric is registered twice.",
    "S-OBS-05": "The structured snapshot and the Prometheus exposition come from one bounded bucket source "
    "and agree.",
    "S-OBS-06": "Database facts (instances, attempts, timers, conflicts, quota) are read through the backend "
    "port, equal the committed state and are combined with the process snapshot on every backend.",
    "S-OBS-07": "Label names and values come from closed sets that do not grow with sagas, tenants "
    "or messages.",
    "S-OBS-08": "No saga id, tenant, datasource endpoint or message body is a label, by name or by value.",
}
