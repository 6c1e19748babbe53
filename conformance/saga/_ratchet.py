"""Ratchet's own saga runtime (``impls.saga``) over one ``SagaBackend`` per service, as a ``SagaRuntime``.

The orchestrator and each participant get their own backend on their own namespace (they are
separate services in the seed). The runtime stores the model's own values, so ``project`` is the
identity and every read-back is compared in full. Every argument reaches the runtime as a fresh
copy (``conformance._fresh``), as values decoded off a wire would: equal, never the same object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from prometheus_client import CollectorRegistry

from conformance._fresh import fresh as copy
from conformance._machine import SuiteStats
from conformance._outage import bounded_sync
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._metrics_checks import flatten
from conformance.saga._port import (
    CatalogObservation,
    FateHook,
    MetricsObservation,
    Observation,
    ParticipantObservation,
    RuntimeCapabilities,
    TransactionLog,
)
from conformance.saga._timing import TimedBackend
from impls.saga import (
    MAX_ATTEMPTS,
    Discard,
    Keep,
    Management,
    Orchestrator,
    Participant,
    ReceiptRow,
    RuntimeMetrics,
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaTransaction,
    capability_key_of,
    instance_from_row,
    journal_from_row,
    read_only,
    route_from_row,
    route_to_row,
    run_unit,
    timer_from_row,
    with_facts,
)
from model import saga as m

R = TypeVar("R")


def _receipt(tx: SagaTransaction, saga_id: str) -> ReceiptRow | str | None:
    """The saga's start receipt as the backend reads it back, or that it does not decode (S-START-03).
    Any other error is the read's: a refusal goes to ``read_only``'s retry, an outage to exit 2."""
    try:
        return tx.load_receipt(saga_id)
    except SagaBackendError as exc:
        if exc.kind is not SagaBackendErrorKind.CORRUPT:
            raise
        return f"SagaBackendError({exc.kind.value})"


def open_backend(factory: Callable[..., Any], namespace: str) -> SagaBackend:
    try:
        backend = bounded_sync("the saga backend factory", lambda: factory(namespace))
    except SagaBackendError as exc:
        raise HarnessEnvironmentError(f"the saga backend factory could not open a backend: {exc}") from exc
    if not isinstance(backend, SagaBackend):
        raise HarnessEnvironmentError(
            f"the factory returned {type(backend).__name__}, not an impls.saga.SagaBackend"
        )
    return backend


class RatchetRuntime:
    """``impls.saga.Orchestrator`` and ``Participant`` s beside the model (the strictest port)."""

    capabilities = RuntimeCapabilities(metrics=True, recorded_references=True, lists_due_timers=True)
    #: The classes a planted variant swaps (``examples/broken_saga_runtimes.py``).
    orchestrator_class: type[Orchestrator] = Orchestrator
    participant_class: type[Participant] = Participant
    metrics_class: type[RuntimeMetrics] = RuntimeMetrics

    def __init__(
        self,
        factory: Callable[..., Any],
        namespace: str,
        fates: FateHook,
        stats: SuiteStats,
        refusals: bool = True,
    ) -> None:
        self._fates = fates
        #: False (a backend whose state lives in its object): no ROLLED_BACK is the database's.
        self._refusals = refusals
        self._factory = factory
        self._namespace = namespace
        self._stats = stats
        #: role ("orchestrator" or an owner) -> the real backend object it runs on
        self._raw: dict[str, SagaBackend] = {}
        #: role -> the timed seam over it, the one the runtime and the read-backs go through
        self._timed: dict[str, TimedBackend] = {}
        # One metrics source for the orchestrator and both participants, each on its own backend
        # (S-OBS-04); the harness's clock never moves during a call, so durations are exactly 0.
        self.metrics = self.metrics_class(CollectorRegistry(), clock=lambda: 0.0)
        # Every role's, in the order the runtime began them; a unit runs at most MAX_ATTEMPTS times.
        self.transactions = TransactionLog(MAX_ATTEMPTS)
        #: (role, what) -> (the role's backend generation when read, the read-back); see ``_kept``
        self._reads: dict[tuple[str, str], tuple[int, Any]] = {}
        self.orch_backend = self._open("orchestrator")
        self.orch = self._orchestrator(self.orch_backend)
        self.mgmt = Management(self.orch)
        self.parts = {owner: self._participant(owner, self._open(owner)) for owner in w.OWNERS}

    def _open(self, role: str) -> SagaBackend:
        suffix = "o" if role == "orchestrator" else role
        backend = open_backend(self._factory, f"{self._namespace}{suffix}")
        self._raw[role] = backend
        namespace = f"{self._namespace}{suffix}"
        timed = TimedBackend(backend, self._stats, self.transactions, self._refusals, namespace)
        self._timed[role] = timed
        return cast(SagaBackend, timed)

    def reopen(self, role: str) -> None:
        """Close ``role``'s backend object, open a new one on its namespace and build the runtime
        anew on it: whatever the process kept is gone, only the rows remain (the reopen fault)."""
        self._raw.pop(role).close()
        self.forget_reads()  # a read-back is the old object's; the new one's rows are read afresh
        fresh = self._open(role)
        if role == "orchestrator":
            self.orch_backend = fresh
            self.orch = self._orchestrator(fresh)
            self.mgmt = Management(self.orch)
        else:
            self.parts[role] = self._participant(role, fresh)

    # The process's one metrics source outlives a reopened backend: only the backend object is new.
    def _orchestrator(self, backend: SagaBackend) -> Orchestrator:
        return self.orchestrator_class(
            backend, frozenset(w.OWNERS), quota_limit=w.QUOTA_LIMIT, fates=self._fates, metrics=self.metrics
        )

    def _participant(self, owner: str, backend: SagaBackend) -> Participant:
        config = w.participant_config(owner)
        return self.participant_class(backend, config, fates=self._fates, metrics=self.metrics)

    def forget_reads(self) -> None:
        """Read every role's rows afresh next time: something no seam of this process sees may
        have changed them (a server killed and restarted on its data directory, a reopen)."""
        self._reads.clear()

    def _kept(self, role: str, what: str, read: Callable[[TimedBackend], R]) -> R:
        """``read`` of ``role``'s rows, or the same read-back again while nothing can have written.

        Why that is safe: every transaction begun on the role's namespace in this process, by
        any ``TimedBackend`` object (the runtime's, a reopened one, another party's), and every
        other call on such a backend, moves its ``generation`` on; only the observer's own
        read-only transactions do not (``TimedBackend.observe``: they roll back). An unchanged
        generation means no unit ran there since the read, so the rows read the same, and so do
        the checks ``read`` makes on them. What the seam cannot see, the harness says:
        ``forget_reads`` on a server restart and a reopen. The read-back is an immutable value
        the machine only compares (``Observation``, ``ParticipantObservation``...)."""
        backend = self._timed[role]
        generation = backend.generation
        kept = self._reads.get((role, what))
        if kept is not None and kept[0] == generation:
            return cast(R, kept[1])
        value = read(backend)
        self._reads[(role, what)] = (generation, value)
        return value

    def backends(self) -> tuple[SagaBackend, ...]:
        """The real backend objects, one per role."""
        return tuple(self._raw.values())

    def raw_backends(self) -> dict[str, SagaBackend]:
        """The real backend objects by role ("orchestrator" or an owner; S-TX-03's audit)."""
        return dict(self._raw)

    @staticmethod
    def project(value: object) -> object:
        return value

    # -- catalog and routes

    def publish_definition(self, artifact: m.DefinitionArtifact, digest: str) -> object:
        return self.orch.publish_definition(copy(artifact), copy(digest))

    def change_lifecycle(self, change: m.ChangeLifecycle, now_ms: int) -> object:
        return self.orch.change_lifecycle(copy(change), copy(now_ms))

    def query_definition(self, key: m.DefinitionKey) -> object:
        return self.orch.query_definition(copy(key))

    def release_instance(self, saga_id: str) -> object:
        return self.orch.release_instance(copy(saga_id))

    def due_timer_ids(self, now_ms: int) -> tuple[str, ...]:
        return tuple(sorted(r.timer_id for r in self.orch.due_timers(copy(now_ms))))

    def record_reference(self, reference: m.DefinitionReference) -> object:
        return self.orch.record_reference(copy(reference))

    def release_reference(self, reference: m.DefinitionReference) -> object:
        return self.orch.release_reference(copy(reference))

    def register_capability(self, request: m.RegisterCapability) -> object:
        return self.orch.register_capability(copy(request))

    def renew_capability(self, request: m.RenewCapability) -> object:
        return self.orch.renew_capability(copy(request))

    def select_capability_routes(self, query: m.RouteQuery, now_ms: int) -> object:
        return self.orch.select_capability_routes(copy(query), copy(now_ms))

    def select_capability_route(self, query: m.RouteQuery, now_ms: int) -> object:
        return self.orch.select_capability_route(copy(query), copy(now_ms))

    def catalog_snapshot(self, now_ms: int) -> object:
        return self.orch.catalog_snapshot(copy(now_ms))

    def plant_route(self, route: m.CapabilityRoute) -> bool:
        """The row written around the registry, as an older release would, in one unit run as the
        runtime runs its own (``run_unit``): False when the database refused every attempt with a
        definite rollback, which a contended database may do (nothing of the row applied, S-TX-01)."""

        def body(tx: SagaTransaction) -> Keep[bool]:
            tx.upsert_capability(route_to_row(route))
            return Keep(True)

        return run_unit(self.orch_backend, "plant", body) is True

    # -- starts

    def start_saga(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object:
        return self.orch.start_saga(copy(request), copy(now_ms), m.Eligibility(revoked_at).holds_at)

    def start_saga_joined(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object:
        """The harness is the host whose transaction the start joins: it owns the COMMIT (under
        the injected fate) and the gate in front of it, which it leaves open (S-START-06)."""
        holds_at = m.Eligibility(revoked_at).holds_at

        def outer(tx: Any) -> Keep[m.StartOutcome] | Discard[m.StartOutcome]:
            outcome = self.orch.start_saga_joined(tx, copy(request), copy(now_ms), holds_at)
            return Keep(outcome) if isinstance(outcome, m.Started) else Discard(outcome)

        return run_unit(self.orch_backend, "host", outer, self._fates)

    # -- the orchestrator's side of the wire, and its timers

    def pending_commands(self) -> tuple[m.CommandEnvelope, ...]:
        return self.orch.pending_commands()

    def mark_command_published(self, command_id: str) -> None:
        self.orch.mark_command_published(copy(command_id))

    def handle_result(self, envelope: m.ResultEnvelope, producer: str, now_ms: int) -> object:
        return self.orch.handle_result(copy(envelope), copy(producer), copy(now_ms))

    def claim_timer(self, timer_id: str, worker: str, now_ms: int, lease_ms: int) -> object:
        return self.orch.claim_timer(copy(timer_id), copy(worker), copy(now_ms), copy(lease_ms))

    def fire_timer(self, timer_id: str, token: int, now_ms: int) -> object:
        return self.orch.fire_timer(copy(timer_id), copy(token), copy(now_ms))

    def renew_timer(self, timer_id: str, token: int, now_ms: int, lease_ms: int) -> object:
        return self.orch.renew_timer(copy(timer_id), copy(token), copy(now_ms), copy(lease_ms))

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> object:
        return self.orch.release_timer(copy(timer_id), copy(token), copy(now_ms))

    # -- management and the business query API

    def manage(self, request: m.Manage, expect: str = "none") -> object:
        return self.mgmt.manage(request)  # its revisions are the model's (compared after every step)

    def get_saga(self, request: m.GetSaga) -> object:
        return self.mgmt.get_saga(request)

    def list_sagas(self, request: m.ListSagas) -> object:
        return self.mgmt.list_sagas(request)

    def read_audit(self, request: m.ReadAudit) -> object:
        return self.mgmt.read_audit(request)

    # -- participants

    def handle_command(
        self, owner: str, command: m.CommandEnvelope, producer: str, decision: m.Decision
    ) -> object:
        return self.parts[owner].handle_command(copy(command), copy(producer), copy(decision))

    def pending_results(self, owner: str) -> tuple[m.ResultEnvelope, ...]:
        return self.parts[owner].pending_results()

    def mark_result_published(self, owner: str, message_id: str) -> None:
        self.parts[owner].mark_result_published(copy(message_id))

    # -- read-backs: the backends' rows, raw

    def observe(self) -> Observation:
        return self._kept("orchestrator", "instances", self._observe)

    def _observe(self, backend: TimedBackend) -> Observation:
        def rows(tx: SagaTransaction) -> tuple[Any, ...]:
            listed = tx.list_instances()
            return (
                listed,
                tx.journal(),
                tx.list_commands(),
                tx.list_timers(),
                {r.saga_id: tx.load_control(r.saga_id) or m.ACTIVE_CONTROL for r in listed},
                {r.saga_id: _receipt(tx, r.saga_id) for r in listed},
            )

        instances, journal, commands, timers, controls, receipts = backend.observe(rows)
        for instance in instances:
            # The start receipt is the start's unique key, written with the instance (S-START-03);
            # a replay is judged against it (S-START-02): it must name the instance's saga, its
            # definition and its start digest.
            receipt = receipts[instance.saga_id]
            held = (
                receipt
                if not isinstance(receipt, ReceiptRow)
                else (receipt.saga_id, receipt.definition, receipt.start_digest)
            )
            if held != (instance.saga_id, instance.definition, instance.start_digest):
                raise Violation(
                    "S-START-03",
                    f"saga {instance.saga_id}'s start receipt reads back as {held}",
                    {"saga_id": instance.saga_id},
                )
        for row in commands:
            # The row's definition columns are what retirement is checked against (S-CAT-07): they
            # must name the definition of the envelope the row holds.
            if row.definition != row.envelope.definition:
                raise Violation(
                    "S-CAT-07",
                    f"command {row.command_id}'s row names {row.definition}, its envelope "
                    f"{row.envelope.definition}",
                    {"command_id": row.command_id},
                )
        return Observation(
            {r.saga_id: instance_from_row(r) for r in instances},
            tuple(journal_from_row(r) for r in journal),
            {r.command_id: r.published for r in commands},
            {r.timer_id: timer_from_row(r) for r in timers},
            {r.command_id: r.envelope for r in commands},
            controls,
        )

    def observe_catalog(self) -> CatalogObservation:
        return self._kept("orchestrator", "catalog", self._observe_catalog)

    @staticmethod
    def _observe_catalog(backend: TimedBackend) -> CatalogObservation:
        definitions, capabilities = backend.observe(
            lambda tx: (tx.list_definitions(), tx.list_capabilities())
        )
        return CatalogObservation(
            {r.key: (r.digest, r.document) for r in definitions},
            {r.key: r.lifecycle for r in definitions},
            {capability_key_of(r): route_from_row(r) for r in capabilities},
        )

    def observe_participant(self, owner: str) -> ParticipantObservation:
        return self._kept(owner, "facts", self._observe_participant)

    @staticmethod
    def _observe_participant(backend: TimedBackend) -> ParticipantObservation:
        effects, results = backend.observe(lambda tx: (tx.list_effects(), tx.list_results()))
        for row in results:
            # The outbox row is found and marked by its key (S-PART-01): it must be its envelope's id.
            if row.message_id != row.envelope.message_id:
                raise Violation(
                    "S-PART-01",
                    f"result row {row.message_id} holds the envelope of {row.envelope.message_id}",
                    {"message_id": row.envelope.message_id},
                )
        return ParticipantObservation(tuple(e.effect_id for e in effects), tuple(r.envelope for r in results))

    def read_metrics(self) -> MetricsObservation:
        """A scrape of the orchestrator process and its snapshot, with its backend's facts (S-OBS-05, -06)."""
        snapshot, text = with_facts(self.metrics, self.orch_backend)
        return MetricsObservation(text.decode("utf-8"), flatten(snapshot))

    @staticmethod
    def process_epoch() -> int:
        return 0  # one process, the harness's own, for the whole example

    def transaction_log(self) -> TransactionLog:
        return self.transactions

    @property
    def refusals(self) -> bool:
        """Whether other sessions write this runtime's database, so that it may refuse a unit or a
        read on its own (contention): False for a backend whose state lives in its object."""
        return self._refusals

    def result_claimed(self, message_id: str) -> bool:
        return read_only(self.orch_backend, lambda tx: tx.result_claimed(message_id))

    def close(self) -> None:
        for backend in self._raw.values():
            backend.close()
