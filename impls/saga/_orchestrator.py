"""The orchestrator: catalog, routes, starts, results, timers, relay and management over a backend.

Every public method is one atomic unit (``_unit.run_unit``): it reads what it needs, decides
with the model's step policy (``model.saga.react``) and derived identities, and writes its
rows in the same transaction (S-ORCH-02). Verification of a result happens before the
inbox claim, so a refused message never occupies a dedupe key (S-ORCH-01). Timer writes
go through the backend's fenced operations and the runtime trusts their answer, never a
fence it checked itself (S-TIMER-01, S-TIMER-02), so it refuses a backend whose capabilities do
not say ``fenced_timers`` (``UnfencedTimers``).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from model.saga import (
    ACTION_TARGET,
    TERMINAL_STATUSES,
    ActivationBlocked,
    AlreadyExists,
    AlreadyPublished,
    AmbiguousRoute,
    AttemptTimedOut,
    CapabilityKey,
    CapabilityRefused,
    CapabilityRegistered,
    CapabilityRenewed,
    CapabilityRoute,
    CatalogEntry,
    CatalogSnapshot,
    ChangeLifecycle,
    ClaimOutcome,
    CommandEnvelope,
    CommandPublished,
    DefinitionArtifact,
    DefinitionConflict,
    DefinitionKey,
    DefinitionNotLoadable,
    DefinitionNotStartable,
    DefinitionReference,
    DigestMismatch,
    DuplicateResult,
    EligibilityRevoked,
    FireOutcome,
    IllegalLifecycleTransition,
    InstanceNotReleasable,
    InstanceReleased,
    InvalidDefinition,
    JournalEntry,
    LeaseExpired,
    Lifecycle,
    LifecycleAction,
    LifecycleChanged,
    LifecycleOutcome,
    LifecycleUnchanged,
    MessageRefused,
    NoRoute,
    NoSuchTimer,
    Operation,
    OutcomeUnknown,
    PayloadRejected,
    Published,
    PublishOutcome,
    QuotaExhausted,
    QuotaMode,
    Reaction,
    ReferenceKind,
    ReferenceRecorded,
    ReferenceReleased,
    RefusalReason,
    RegisterCapability,
    RegisterOutcome,
    RenewCapability,
    RenewOutcome,
    ResultApplied,
    ResultDeferred,
    ResultEnvelope,
    ResultOutcome,
    RetirementBlocked,
    RolledBack,
    RouteInvalid,
    RouteQuery,
    RouteSet,
    SagaInstance,
    SelectedRoute,
    Stage,
    StaleFencingToken,
    StaleGeneration,
    StaleResult,
    StartConflict,
    Started,
    StartOutcome,
    StartSaga,
    StepAnswered,
    TimerClaimed,
    TimerDeferred,
    TimerFired,
    TimerLeased,
    TimerNotDue,
    TimerObsolete,
    TimerReleased,
    TimerRenewed,
    Unit,
    UnknownCapability,
    UnknownCommand,
    UnknownDefinition,
    UnknownReference,
    UnknownSaga,
    UnknownStep,
    admit_payload,
    admits_capability,
    admits_new_start,
    canonical_document,
    definition_digest,
    definition_problems,
    descriptor_violation,
    is_loadable,
    next_generation,
    next_lifecycle,
    react,
    result_message_id_for,
    saga_id_for,
    start_digest_for,
)
from model.saga._instance import begin

from ._backend import (
    CapabilityRow,
    DefinitionRow,
    LeaseRow,
    ReceiptRow,
    SagaBackend,
    SagaBackendError,
    SagaTransaction,
    TimerRow,
)
from ._convert import instance_from_row, instance_to_row, journal_from_row, journal_to_row
from ._metrics import RuntimeMetrics, counted, process_metrics
from ._routes import (
    invalid_route_keys,
    route_from_row,
    route_to_row,
    select_route,
    select_routes,
    snapshot_of,
    step_routes,
)
from ._unit import Conflict, Discard, FateHook, Keep, always_commit, read_only, run_unit
from ._writes import _apply, _need, _stage, _stale, entry_of, paused

#: The host's eligibility check, asked at each checkpoint of a start (S-START-04, S-START-06).
EligibilityCheck = Callable[[int], bool]


def always_eligible(_checkpoint: int) -> bool:
    """The unconstrained start (S-START-07)."""
    return True


@attrs.frozen(auto_exc=True)
class UnfencedTimers(Exception):
    """An orchestrator was given a backend whose capabilities lack ``fenced_timers``.

    The seed puts a timer's claim, renewal, completion and release under the store's fencing
    capability (失权 worker 不能继续推进), and every saga arms timers; the runtime fences
    nothing itself, so on such a store a worker that lost its lease could still fire.
    """

    detail: str = "the backend does not fence timer writes (SagaCapabilities.fenced_timers)"


@attrs.define
class Orchestrator:
    """The orchestrator side of the runtime over one backend (its database).

    Raises ``UnfencedTimers`` when built on a backend without ``fenced_timers``.
    """

    backend: SagaBackend
    trusted_producers: frozenset[str]
    quota_limit: int | None = None
    fates: FateHook = always_commit
    #: The process's one metrics source, shared with every other service of the process (S-OBS-04).
    metrics: RuntimeMetrics = attrs.field(factory=process_metrics)
    #: What the quota counts: admitted starts, or instances in flight (S-START-13).
    quota_mode: QuotaMode = QuotaMode.ADMITTED

    def __attrs_post_init__(self) -> None:
        if not self.backend.capabilities.fenced_timers:
            raise UnfencedTimers

    # -- catalog -----------------------------------------------------------------------

    @counted(Operation.PUBLISH)
    def publish_definition(
        self, artifact: DefinitionArtifact, digest: str
    ) -> PublishOutcome | RolledBack | OutcomeUnknown:
        """S-DEF-01, S-CAT-01..03: idempotent for the same digest, a conflict for another."""
        key = artifact.key
        problems = definition_problems(artifact)
        if problems:
            return InvalidDefinition(key, problems)
        computed = definition_digest(artifact)
        if digest != computed:
            return DigestMismatch(key, digest, computed)

        def body(tx: SagaTransaction) -> Keep[PublishOutcome] | Discard[PublishOutcome]:
            existing = tx.load_definition(key, lock=True)
            if existing is not None:
                if existing.digest == computed:
                    return Discard(AlreadyPublished(key, computed, existing.lifecycle))
                return Discard(DefinitionConflict(key, existing.digest, computed))
            row = DefinitionRow(key, computed, canonical_document(artifact), Lifecycle.CANDIDATE)
            _need(tx.insert_definition(row))
            tx.bump_registry_revision()
            return Keep(Published(key, computed))

        return run_unit(self.backend, "catalog", body)

    @counted(Operation.LIFECYCLE)
    def change_lifecycle(
        self, request: ChangeLifecycle, now_ms: int
    ) -> LifecycleOutcome | RolledBack | OutcomeUnknown:
        """One lifecycle move in the catalog's serial transaction (S-CAT-04, S-CAT-07, S-CAT-11).

        Activation also refuses while a registered route breaks the transport contract (S-ROUTE-04).
        """
        key = request.key

        def body(tx: SagaTransaction) -> Keep[LifecycleOutcome] | Discard[LifecycleOutcome]:
            row = tx.load_definition(key, lock=True)
            if row is None:
                return Discard(UnknownDefinition(key))
            if ACTION_TARGET[request.action] is row.lifecycle:
                return Discard(LifecycleUnchanged(key, row.lifecycle))
            target = next_lifecycle(row.lifecycle, request.action)
            if target is None:
                return Discard(IllegalLifecycleTransition(key, row.lifecycle, request.action))
            if request.action is LifecycleAction.RETIRE:
                references = tx.definition_references(key, now_ms)
                if references:
                    return Discard(RetirementBlocked(key, references))
            if request.action is LifecycleAction.ACTIVATE:
                # Candidate activation applies the registration's transport contract (S-ROUTE-04).
                invalid = invalid_route_keys(tx.list_capabilities(), key)
                if invalid:
                    return Discard(ActivationBlocked(key, invalid))
            _need(tx.update_lifecycle(key, row.lifecycle, target))
            tx.bump_registry_revision()
            return Keep(LifecycleChanged(key, row.lifecycle, target))

        return run_unit(self.backend, "catalog", body)

    def query_definition(self, key: DefinitionKey) -> CatalogEntry | UnknownDefinition:
        """S-CAT-10: any lifecycle, retired included."""
        row = read_only(self.backend, lambda tx: tx.load_definition(key))
        return UnknownDefinition(key) if row is None else entry_of(row)

    def load_definition(self, key: DefinitionKey) -> CatalogEntry | UnknownDefinition | DefinitionNotLoadable:
        """S-CAT-06, S-CAT-08: candidates and retired definitions are not loaded."""
        entry = self.query_definition(key)
        if isinstance(entry, CatalogEntry) and not is_loadable(entry.lifecycle):
            return DefinitionNotLoadable(key, entry.lifecycle)
        return entry

    def record_reference(
        self, reference: DefinitionReference
    ) -> ReferenceRecorded | UnknownDefinition | RolledBack | OutcomeUnknown:
        """A migration or audit reference that blocks retirement (S-CAT-07)."""
        if reference.kind not in (ReferenceKind.MIGRATION, ReferenceKind.AUDIT):
            raise ValueError("only migration and audit references are recorded; others are facts")

        def body(
            tx: SagaTransaction,
        ) -> Keep[ReferenceRecorded | UnknownDefinition] | Discard[ReferenceRecorded | UnknownDefinition]:
            if tx.load_definition(reference.key, lock=True) is None:
                return Discard(UnknownDefinition(reference.key))
            tx.insert_reference(reference)
            return Keep(ReferenceRecorded(reference))

        return run_unit(self.backend, "catalog", body)

    def release_reference(
        self, reference: DefinitionReference
    ) -> ReferenceReleased | UnknownReference | RolledBack | OutcomeUnknown:
        """S-CAT-07, S-CAT-11."""

        def body(
            tx: SagaTransaction,
        ) -> Keep[ReferenceReleased | UnknownReference] | Discard[ReferenceReleased | UnknownReference]:
            if not tx.delete_reference(reference):
                return Discard(UnknownReference(reference))
            return Keep(ReferenceReleased(reference))

        return run_unit(self.backend, "catalog", body)

    # -- capability routes ---------------------------------------------------------------

    @counted(Operation.ROUTE_REGISTER)
    def register_capability(
        self, request: RegisterCapability
    ) -> RegisterOutcome | RolledBack | OutcomeUnknown:
        """Register or re-report one replica's route (S-ROUTE-01..08, S-CAT-09).

        The generation is allocated here, under the definition and capability row locks: the
        same content re-reported keeps the committed generation, new content gets the next one;
        neither the caller's claimed generation nor a clock decides it (S-ROUTE-02, S-ROUTE-03).
        A lease is never shortened by a late or repeated report.
        """
        descriptor = request.descriptor
        key = descriptor.key

        def body(tx: SagaTransaction) -> Keep[RegisterOutcome] | Discard[RegisterOutcome]:
            row = tx.load_definition(key.definition, lock=True)
            if row is None:
                return Discard(UnknownDefinition(key.definition))
            if not admits_capability(row.lifecycle):
                return Discard(DefinitionNotLoadable(key.definition, row.lifecycle))
            steps = entry_of(row).artifact.steps
            if not 0 <= key.step_index < len(steps):
                return Discard(UnknownStep(key.definition, key.step_index))
            if request.principal != key.owner or key.owner != steps[key.step_index].owner:
                return Discard(CapabilityRefused(key, RefusalReason.OWNER_MISMATCH))
            violation = descriptor_violation(descriptor)
            if violation is not None:
                return Discard(RouteInvalid(violation))
            existing = _load_capability(tx, key)
            same = existing is not None and existing.descriptor == descriptor
            generation = next_generation(None if existing is None else existing.generation, same)
            expires = request.now_ms + request.lease_ms
            if existing is not None:
                expires = max(expires, existing.lease_expires_ms)
            tx.upsert_capability(route_to_row(CapabilityRoute(descriptor, generation, expires)))
            tx.bump_registry_revision()
            return Keep(CapabilityRegistered(key, generation, expires, fresh=not same))

        return run_unit(self.backend, "route-register", body, self.fates)

    @counted(Operation.ROUTE_RENEW)
    def renew_capability(self, request: RenewCapability) -> RenewOutcome | RolledBack | OutcomeUnknown:
        """Extend a live lease of the current generation (S-ROUTE-02, S-ROUTE-09, S-CAT-09).

        A stale generation (superseded by a re-registration) is fenced with ``StaleGeneration``;
        an expired lease cannot be renewed (``LeaseExpired``): the replica must register again.
        """
        key = request.key

        def body(tx: SagaTransaction) -> Keep[RenewOutcome] | Discard[RenewOutcome]:
            row = tx.load_definition(key.definition, lock=True)
            route = _load_capability(tx, key)
            if route is None:
                return Discard(UnknownCapability(key))
            if row is None:
                return Discard(UnknownDefinition(key.definition))
            if not admits_capability(row.lifecycle):
                return Discard(DefinitionNotLoadable(key.definition, row.lifecycle))
            if request.principal != key.owner:
                return Discard(CapabilityRefused(key, RefusalReason.OWNER_MISMATCH))
            if request.generation != route.generation:
                return Discard(StaleGeneration(key, request.generation, route.generation))
            if not route.live_at(request.now_ms):
                return Discard(LeaseExpired(key, route.lease_expires_ms))
            expires = max(route.lease_expires_ms, request.now_ms + request.lease_ms)
            tx.upsert_capability(route_to_row(attrs.evolve(route, lease_expires_ms=expires)))
            tx.bump_registry_revision()
            return Keep(CapabilityRenewed(key, route.generation, expires))

        return run_unit(self.backend, "route-renew", body, self.fates)

    def select_capability_routes(self, query: RouteQuery, now_ms: int) -> RouteSet | NoRoute | AmbiguousRoute:
        """Every live per-replica route of a step (S-ROUTE-11)."""
        return select_routes(query, self._step_routes(query, now_ms))

    def select_capability_route(
        self, query: RouteQuery, now_ms: int
    ) -> SelectedRoute | NoRoute | AmbiguousRoute:
        """The single target of a step, never a collapse of several replicas (S-ROUTE-12)."""
        return select_route(query, self._step_routes(query, now_ms))

    def _step_routes(self, query: RouteQuery, now_ms: int) -> tuple[CapabilityRoute, ...]:
        def read(tx: SagaTransaction) -> tuple[CapabilityRoute, ...]:
            row = tx.load_definition(query.definition)
            lifecycles = {} if row is None else {row.key: row.lifecycle}
            return step_routes(tx.list_capabilities(), lifecycles, query, now_ms)

        return read_only(self.backend, read)

    def catalog_snapshot(self, now_ms: int) -> CatalogSnapshot:
        """Loadable definitions and live routes read in one transaction: one revision (S-ROUTE-10)."""

        def read(tx: SagaTransaction) -> CatalogSnapshot:
            revision = tx.registry_revision()
            entries = [entry_of(row) for row in tx.list_definitions()]
            return snapshot_of(revision, entries, tx.list_capabilities(), now_ms)

        return read_only(self.backend, read)

    # -- starts --------------------------------------------------------------------------

    @counted(Unit.START)
    def start_saga(
        self, request: StartSaga, now_ms: int, eligible: EligibilityCheck = always_eligible
    ) -> StartOutcome:
        """Admit, replay or refuse a start (S-START-01..13, S-CAT-05, S-CAT-08, S-TX-01).

        Checkpoint 0 before the definition snapshot is used, checkpoint 1 before COMMIT; a
        refusal rolls everything back (no instance, receipt, journal, quota, command or timer).
        """
        if not eligible(0):
            return EligibilityRevoked(0)
        body = self._start_body(request, now_ms, eligible, True)
        return run_unit(self.backend, "start", body, self.fates, self.metrics.timing(Stage.START_TRANSACTION))

    @counted(Unit.START)
    def start_saga_joined(
        self,
        tx: SagaTransaction,
        request: StartSaga,
        now_ms: int,
        eligible: EligibilityCheck = always_eligible,
    ) -> StartOutcome:
        """A start joined to the caller's open transaction ``tx`` (S-START-06).

        The runtime passes checkpoint 0 only (it has no resumptions); the final COMMIT and the
        eligibility gate in front of it belong to the caller, who commits ``tx`` on ``Started``.
        Refusals are decided before any write, so they leave ``tx`` untouched. A guarded write
        that lost a race, or a database error, rolls ``tx`` back (the ordinary rollback path:
        a partial start must never be committed) and answers ``RolledBack``.
        """
        if not eligible(0):
            return EligibilityRevoked(0)
        try:
            with self.metrics.timed(Stage.START_TRANSACTION):
                return self._start_body(request, now_ms, eligible, False)(tx).outcome
        except (Conflict, SagaBackendError):
            tx.rollback()
            return RolledBack()

    def _start_body(
        self, request: StartSaga, now_ms: int, eligible: EligibilityCheck, own_commit: bool
    ) -> Callable[[SagaTransaction], Keep[StartOutcome] | Discard[StartOutcome]]:
        key = request.definition

        def body(tx: SagaTransaction) -> Keep[StartOutcome] | Discard[StartOutcome]:
            row = tx.load_definition(key)
            if row is None:
                return Discard(UnknownDefinition(key))
            if row.lifecycle is Lifecycle.RETIRED:
                return Discard(DefinitionNotLoadable(key, row.lifecycle))
            if row.lifecycle is Lifecycle.CANDIDATE:
                # Not loaded (S-CAT-08): refused before the start's own checkpoints (S-START-04).
                return Discard(DefinitionNotStartable(key, row.lifecycle))
            entry = entry_of(row)
            payload = admit_payload(request.json_payload, request.raw_payload, entry.artifact.first_input)
            if isinstance(payload, PayloadRejected):
                return Discard(payload)
            # The pre-commit gate is ours only when the COMMIT is (S-START-04, S-START-06).
            if own_commit and not eligible(1):
                return Discard(EligibilityRevoked(1))
            digest = start_digest_for(key, entry.digest, request.business_key, payload)
            saga_id = saga_id_for(key.tenant, key.workflow, request.business_key)
            receipt = tx.load_receipt(saga_id)
            if receipt is not None:
                if receipt.start_digest == digest:
                    return Discard(AlreadyExists(saga_id, digest))
                return Discard(StartConflict(saga_id, receipt.start_digest, digest))
            if not admits_new_start(row.lifecycle):
                return Discard(DefinitionNotStartable(key, row.lifecycle))
            used = tx.quota_used(key.tenant)
            if self.quota_limit is not None and used >= self.quota_limit:
                return Discard(QuotaExhausted(key.tenant, self.quota_limit))
            instance, entry_row, command = begin(
                saga_id, entry.artifact, entry.digest, digest, request.business_key, payload
            )
            _need(tx.insert_receipt(ReceiptRow(saga_id, key, digest)))
            _need(tx.insert_instance(instance_to_row(instance)))
            _need(tx.append_journal(journal_to_row(entry_row)))
            tx.add_quota(key.tenant, 1)
            _stage(tx, command, now_ms + entry.artifact.steps[0].timeout_ms)
            return Keep(Started(saga_id, digest, command.command_id))

        return body

    # -- results -------------------------------------------------------------------------

    @counted(Unit.RESULT)
    def handle_result(self, envelope: ResultEnvelope, producer: str, now_ms: int) -> ResultOutcome:
        """The orchestrator transaction for one result (S-ORCH-01..04, S-STEP-*, S-TX-01)."""

        def body(tx: SagaTransaction) -> Keep[ResultOutcome] | Discard[ResultOutcome]:
            loaded = self._verify(tx, envelope, producer)
            if isinstance(loaded, RefusalReason):
                return Discard(MessageRefused(envelope.message_id, loaded))
            instance, entry = loaded
            if not tx.claim_result(envelope.message_id):
                return Discard(DuplicateResult(envelope.message_id))
            if paused(tx, instance.saga_id):  # not claimed after all: redelivered on resume (S-MGT-05)
                return Discard(ResultDeferred(envelope.message_id, instance.saga_id))
            event = StepAnswered(envelope.phase, envelope.step_index, envelope.effect_id, envelope.kind)
            reaction = react(instance, entry.artifact, event)
            if not isinstance(reaction, Reaction) or not is_loadable(entry.lifecycle):
                return Keep(StaleResult(envelope.message_id, instance.saga_id))
            _apply(tx, instance, reaction, entry.artifact, now_ms, self.quota_mode)
            dispatched = None if reaction.dispatch is None else reaction.dispatch.command_id
            return Keep(ResultApplied(instance.saga_id, reaction.entry, dispatched))

        return run_unit(
            self.backend, "result", body, self.fates, self.metrics.timing(Stage.TRANSITION_TRANSACTION)
        )

    def _verify(
        self, tx: SagaTransaction, envelope: ResultEnvelope, producer: str
    ) -> tuple[SagaInstance, CatalogEntry] | RefusalReason:
        """Digest, owner, producer trust and identity, before any claim (S-ORCH-01, S-DLV-03)."""
        row = tx.load_instance(envelope.saga_id, lock=True)
        issued = tx.load_command(envelope.command_id)
        if row is None or issued is None or issued.saga_id != envelope.saga_id:
            return RefusalReason.IDENTITY_MISMATCH
        instance = instance_from_row(row)
        command = issued.envelope
        definition = tx.load_definition(instance.definition)
        if (
            definition is None
            or envelope.definition_digest != instance.definition_digest
            or definition.digest != instance.definition_digest
        ):
            return RefusalReason.DIGEST_MISMATCH
        entry = entry_of(definition)
        if envelope.owner != entry.artifact.steps[command.step_index].owner:
            return RefusalReason.OWNER_MISMATCH
        if producer not in self.trusted_producers or producer != envelope.owner:
            return RefusalReason.UNTRUSTED_PRODUCER
        if (
            envelope.effect_id != command.effect_id
            or envelope.step_index != command.step_index
            or envelope.phase is not command.phase
            or envelope.message_id != result_message_id_for(envelope.command_id)
        ):
            return RefusalReason.IDENTITY_MISMATCH
        return instance, entry

    # -- timers --------------------------------------------------------------------------

    @counted(Unit.TIMER_CLAIM)
    def claim_timer(
        self, timer_id: str, worker: str, now_ms: int, lease_ms: int
    ) -> ClaimOutcome | RolledBack | OutcomeUnknown:
        """Lease a due timer whose previous lease expired; a fresh fencing token (S-TIMER-03, -04)."""

        def body(tx: SagaTransaction) -> Keep[ClaimOutcome] | Discard[ClaimOutcome]:
            row = tx.load_timer(timer_id, lock=True)
            if row is None:
                return Discard(NoSuchTimer(timer_id))
            if now_ms < row.due_ms:
                return Discard(TimerNotDue(timer_id, row.due_ms))
            if row.lease is not None and now_ms < row.lease.expires_ms:
                return Discard(TimerLeased(timer_id, row.lease.expires_ms))
            token = tx.allocate_fencing_token()
            previous = None if row.lease is None else row.lease.token
            _need(tx.lease_timer(timer_id, previous, LeaseRow(worker, token, now_ms + lease_ms)))
            return Keep(TimerClaimed(timer_id, token, now_ms + lease_ms))

        return run_unit(self.backend, "timer-claim", body)

    @counted(Unit.TIMER_RENEW)
    def renew_timer(
        self, timer_id: str, token: int, now_ms: int, lease_ms: int
    ) -> TimerRenewed | NoSuchTimer | StaleFencingToken | RolledBack | OutcomeUnknown:
        """Extend the current holder's unexpired lease; the backend's fence decides (S-TIMER-01, -02, -04)."""

        def body(
            tx: SagaTransaction,
        ) -> (
            Keep[TimerRenewed | NoSuchTimer | StaleFencingToken]
            | Discard[TimerRenewed | NoSuchTimer | StaleFencingToken]
        ):
            row = tx.load_timer(timer_id, lock=True)
            if row is None:
                return Discard(NoSuchTimer(timer_id))
            held = 0 if row.lease is None else row.lease.expires_ms
            expires = max(held, now_ms + lease_ms)
            if not tx.renew_timer(timer_id, token, now_ms, expires):
                return Discard(_stale(row, token))
            return Keep(TimerRenewed(timer_id, token, expires))

        return run_unit(self.backend, "timer-renew", body)

    @counted(Unit.TIMER_RELEASE)
    def release_timer(
        self, timer_id: str, token: int, now_ms: int
    ) -> TimerReleased | NoSuchTimer | StaleFencingToken | RolledBack | OutcomeUnknown:
        """Give the lease back without firing, while it is still held (S-TIMER-01, S-TIMER-04)."""

        def body(
            tx: SagaTransaction,
        ) -> (
            Keep[TimerReleased | NoSuchTimer | StaleFencingToken]
            | Discard[TimerReleased | NoSuchTimer | StaleFencingToken]
        ):
            row = tx.load_timer(timer_id, lock=True)
            if row is None:
                return Discard(NoSuchTimer(timer_id))
            if not tx.release_timer(timer_id, token, now_ms):
                return Discard(_stale(row, token))
            return Keep(TimerReleased(timer_id))

        return run_unit(self.backend, "timer-release", body)

    @counted(Unit.TIMER_FIRE)
    def fire_timer(self, timer_id: str, token: int, now_ms: int) -> FireOutcome:
        """Complete a claimed timer and make the timeout transition (S-TIMER-01, -02, -05)."""
        fenced: list[float] = []  # the lateness of the last attempt whose fence held

        def body(tx: SagaTransaction) -> Keep[FireOutcome] | Discard[FireOutcome]:
            fenced.clear()
            row = tx.load_timer(timer_id, lock=True)
            if row is None:
                return Discard(NoSuchTimer(timer_id))
            if not tx.complete_timer(timer_id, token, now_ms):
                return Discard(_stale(row, token))
            if paused(tx, row.saga_id):  # the fence held; nothing changes, the lease included (S-MGT-05)
                return Discard(TimerDeferred(timer_id))
            fenced.append(max(0, now_ms - row.due_ms) / 1000)
            instance_row = tx.load_instance(row.saga_id, lock=True)
            definition = None if instance_row is None else tx.load_definition(instance_row.definition)
            if instance_row is None or definition is None or not is_loadable(definition.lifecycle):
                return Keep(TimerObsolete(timer_id))
            instance = instance_from_row(instance_row)
            entry = entry_of(definition)
            reaction = react(instance, entry.artifact, AttemptTimedOut(row.command_id))
            if not isinstance(reaction, Reaction):
                return Keep(TimerObsolete(timer_id))
            _apply(tx, instance, reaction, entry.artifact, now_ms, self.quota_mode)
            dispatched = None if reaction.dispatch is None else reaction.dispatch.command_id
            return Keep(TimerFired(instance.saga_id, reaction.entry, dispatched))

        timed = self.metrics.timing(Stage.TRANSITION_TRANSACTION)
        outcome = run_unit(self.backend, "timer-fire", body, self.fates, timed)
        # Lateness once per fire whose fence held, not per attempt the database refused and the
        # unit ran again; a dispossessed worker observes nothing (S-OBS-03).
        for late in fenced:
            self.metrics.observe(Stage.TIMER_LATENESS, late)
        return outcome

    # -- relay and management --------------------------------------------------------------

    def pending_commands(self) -> tuple[CommandEnvelope, ...]:
        """The relay's work list: unpublished commands in outbox order."""
        rows = read_only(self.backend, lambda tx: tx.list_commands(unpublished_only=True))
        return tuple(r.envelope for r in rows)

    def mark_command_published(
        self, command_id: str
    ) -> CommandPublished | UnknownCommand | RolledBack | OutcomeUnknown:
        """The relay's durable acknowledgement (idempotent)."""

        def body(
            tx: SagaTransaction,
        ) -> Keep[CommandPublished | UnknownCommand] | Discard[CommandPublished | UnknownCommand]:
            row = tx.load_command(command_id)
            if row is None:
                return Discard(UnknownCommand(command_id))
            if row.published:
                return Discard(CommandPublished(command_id, already=True))
            _need(tx.mark_command_published(command_id))
            return Keep(CommandPublished(command_id, already=False))

        return run_unit(self.backend, "relay", body)

    @counted(Operation.RELEASE)
    def release_instance(
        self, saga_id: str
    ) -> InstanceReleased | UnknownSaga | InstanceNotReleasable | RolledBack | OutcomeUnknown:
        """Drop a finished instance and its published commands under the retention policy;
        receipt and journal stay (S-CAT-07, S-CAT-11)."""

        def body(
            tx: SagaTransaction,
        ) -> (
            Keep[InstanceReleased | UnknownSaga | InstanceNotReleasable]
            | Discard[InstanceReleased | UnknownSaga | InstanceNotReleasable]
        ):
            row = tx.load_instance(saga_id, lock=True)
            if row is None:
                return Discard(UnknownSaga(saga_id))
            pending = sum(1 for c in tx.list_commands(unpublished_only=True) if c.saga_id == saga_id)
            instance = instance_from_row(row)
            if instance.status not in TERMINAL_STATUSES or pending:
                return Discard(InstanceNotReleasable(saga_id, instance.status, pending))
            _need(tx.delete_instance(saga_id))
            tx.delete_commands(saga_id)  # its published commands go with it (S-CAT-07)
            return Keep(InstanceReleased(saga_id))

        return run_unit(self.backend, "release", body)

    def due_timers(self, now_ms: int) -> tuple[TimerRow, ...]:
        rows = read_only(self.backend, lambda tx: tx.list_timers())
        return tuple(
            r for r in rows if r.due_ms <= now_ms and (r.lease is None or r.lease.expires_ms <= now_ms)
        )

    def journal(self, saga_id: str | None = None) -> tuple[JournalEntry, ...]:
        return tuple(journal_from_row(r) for r in read_only(self.backend, lambda tx: tx.journal(saga_id)))

    def instance(self, saga_id: str) -> SagaInstance | None:
        row = read_only(self.backend, lambda tx: tx.load_instance(saga_id))
        return None if row is None else instance_from_row(row)


def _load_capability(tx: SagaTransaction, key: CapabilityKey) -> CapabilityRoute | None:
    d = key.definition
    row: CapabilityRow | None = tx.load_capability(
        d.tenant, d.workflow, d.version, key.step_index, key.owner, key.replica, lock=True
    )
    return None if row is None else route_from_row(row)
