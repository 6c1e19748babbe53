"""The runtime under test: what the saga machine drives and what it reads back.

The saga suite judges a *runtime* (orchestrator, participants, timers, catalog) over its own
storage, not a storage port: Ratchet's runtime over any ``impls.saga.SagaBackend`` is one
implementation (``conformance/saga/_ratchet.py``), the real nasaga runtime in its Rust host is
another (``conformance/saga/_nasaga.py``). Every call takes and returns the model's vocabulary
(``model.saga`` requests and outcomes), so the machine compares outcomes value for value.

A runtime observes the world at its own resolution. ``project`` maps a model value (an outcome,
an observation) to what this runtime can show of it: the identity for Ratchet's runtime, which
stores the model's own values; a coarser value for a runtime with its own ids and encodings.
What a port cannot show is said by its ``capabilities`` and ``blind_spots``, and the coverage
gate leaves out exactly the targets that depend on it (``SagaCapabilities``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from model import saga as m


@attrs.frozen
class RuntimeCapabilities:
    """What the harness can do to a runtime beyond driving its public calls.

    Each flag switches rules or fault kinds on; a runtime without it is still judged on the rest
    and the gate drops the targets it cannot reach (``conformance/saga/suites.py``).
    """

    #: The harness decides each local COMMIT's fate (rolled back, answer lost) in-process.
    injectable_fates: bool = True
    #: A start can join a transaction the harness owns as the host (S-START-06).
    joined_starts: bool = True
    #: A route row can be written around the registry, as an older release would (S-ROUTE-04).
    raw_route_rows: bool = True
    #: Capability routes: registration, renewal, selection, snapshot (S-ROUTE-*).
    routes: bool = True
    #: The orchestrator's per-tenant start quota is the harness's (S-START-13).
    quota: bool = True
    #: The quota holds instances in flight (``QuotaMode.IN_FLIGHT``: the transition that makes an
    #: instance terminal returns its unit) rather than every start ever admitted; the seed is
    #: silent on release (finding N-10), so the model is told which, never a looser check.
    quota_in_flight: bool = False
    #: Timer workers claim, fire, renew and release one timer by id with the harness's tokens.
    timers: bool = True
    #: A command delivered to a participant is sent as the harness changed it (digest, identities,
    #: payload), not re-read from the runtime's own outbox (S-PART-05, ``_forged_commands``).
    forged_command_fields: bool = True
    #: A participant refuses a command addressed to another participant's step (S-PART-05). nasaga
    #: places that check in its transport route, which the host bypasses (finding N-05).
    misaddressed_commands: bool = True
    #: A definition can be retired once nothing live references it (S-CAT-07).
    retirement: bool = True
    #: A terminal instance's reference on its definition can be released (S-CAT-11).
    instance_release: bool = True
    #: Definitions carry per-step attempt and resolve budgets (S-DEF-01).
    attempt_budgets: bool = True
    #: The transition journal reads back in the model's vocabulary (S-STEP-08).
    step_journal: bool = True
    #: The participant runtime dead-letters a command once its transient-failure budget is spent
    #: (S-PART-04). nasaga's leaves that to its transports (seed: 重试耗尽只进入 DLT, the Transport
    #: table); without it a failing command stays redeliverable, as the model is then told.
    dead_letters: bool = True
    #: A compensation can be answered unknown and then awaits manual intervention, as the model
    #: has it (S-STEP-06). nasaga resolves an unknown one in the compensating direction (not
    #: modelled): without it such a compensation is answered as it succeeded. A *rejected* one is
    #: drawn on every runtime (nasaga's nearest answer, ``halted``, N-09), so ``retry_compensation``
    #: can follow (S-MGT-07).
    unconfirmed_compensations: bool = True
    #: A compensation the operator retried meets the participant's gate, which answers it from its
    #: record (S-PART-03). nasaga reopens a halted compensation under the retry's recovery
    #: operation and runs it again (N-09): without it the reopened compensation is answered with
    #: the verdict the model's gate replays (the reopening is out of scope, N-17).
    gate_replays_retried_compensations: bool = True
    #: An operation id is bound once per saga, across every action (S-MGT-03). nasaga keeps its
    #: control operations (pause, resume) and its recovery operations apart (finding N-22): the
    #: model is then told ``OperationScope.FAMILY``, never a looser check.
    operation_ids_per_saga: bool = True
    #: Management actions (S-MGT-01..05: pause, resume, their refusals) are driven.
    management: bool = True
    #: Retry compensation, retry resolution and manual close are driven (S-MGT-06..08).
    recovery_actions: bool = True
    #: A manual close the model applies commits (S-MGT-08). nasaga-pgsql's never does (finding
    #: N-01): without it such a close is still asked for, the model told that its unit rolls back,
    #: so the runtime must refuse nothing the model accepts and leave every row as it was.
    manual_close: bool = True
    #: The business query API (get, list, audit trail) is read back (S-MGT-09, S-MGT-10).
    business_queries: bool = True
    #: Migration and audit references are recorded and released through ``ReferencePort``, and
    #: block retirement while recorded (S-CAT-07, S-CAT-11). Off unless a runtime says so.
    recorded_references: bool = False
    #: The runtime lists the timers a worker could claim now: ``DueTimersPort`` (S-TIMER-04). Off
    #: unless a runtime says so.
    lists_due_timers: bool = False
    #: The runtime's metrics can be scraped and its structured snapshot read: ``MetricsPort``
    #: (S-OBS-*). Off unless a runtime says so: one that shows none is judged on the rest.
    metrics: bool = False
    #: The process counts units by outcome in the three counter families of S-OBS-04 (transport,
    #: processing, governance), reconciled call by call with the ledger. nasaga's process source
    #: holds other counters (quota and action-rate refusals, Kafka units; finding N-41).
    process_counters: bool = True
    #: Metric names stay distinct under OpenMetrics, where a counter's family is its name without
    #: ``_total`` (S-OBS-04). nasaga renders a counter ``nasaga_manual_intervention_total`` beside
    #: a gauge ``nasaga_manual_intervention`` (finding N-42): its names are then checked as the
    #: text format 0.0.4 it declares spells them, each ``# TYPE`` once.
    openmetrics_names: bool = True
    #: A result refused for its producer, and a start refused for its definition, are decided
    #: inside the transaction, so its stage observes them (S-OBS-02). nasaga refuses both from its
    #: registry before opening one (finding N-44): such a refusal observes no stage there.
    refusals_in_transaction: bool = True
    #: The runtime's host process can be killed (SIGKILL) at a crash point inside a unit and a
    #: fresh one resumed from the database (``_host_faults``, issue 20). Off unless a runtime says so.
    host_crash: bool = False
    #: Two host processes of the runtime can race the same durable timers on one namespace
    #: (``_host_faults.race_timers``, issue 20). Off unless a runtime says so.
    timer_race: bool = False

    def reopens(self, before: m.ParticipantState, command: m.CommandEnvelope) -> bool:
        """Whether delivering ``command`` runs a compensation the participant refused again: a new
        attempt the operator's retry issued, on a runtime without
        ``gate_replays_retried_compensations`` (nasaga reopens its halted gate, N-09)."""
        record = before.gate.get(command.effect_id)
        return (
            not self.gate_replays_retried_compensations
            and command.phase is m.Phase.COMPENSATE
            and command.command_id not in before.inbox
            and record is not None
            and record.kind is m.ResultKind.REJECTED
        )

    def missing(self) -> tuple[str, ...]:
        """The capabilities this runtime lacks, by name (the coverage gate reads them)."""
        return tuple(f.name for f in attrs.fields(RuntimeCapabilities) if not getattr(self, f.name))


@attrs.frozen
class Observation:
    """The orchestrator's durable facts read back, in the model's vocabulary."""

    instances: Mapping[str, m.SagaInstance]
    journal: tuple[m.JournalEntry, ...]  # ordered by (saga id, revision)
    outbox: Mapping[str, bool]  # command id -> published
    timers: Mapping[str, m.Timer]
    #: Each command as its outbox row holds it (S-ORCH-02: the message a participant receives),
    #: or None where the runtime does not show it.
    commands: Mapping[str, m.CommandEnvelope] | None = None
    #: Each retained instance's control state and revision (S-MGT-05: absent rows are active at
    #: revision 1), or None where the runtime does not show it.
    controls: Mapping[str, m.Control] | None = None


@attrs.frozen
class CatalogObservation:
    seals: Mapping[m.DefinitionKey, tuple[str, bytes]]  # key -> (digest, canonical document)
    lifecycles: Mapping[m.DefinitionKey, m.Lifecycle]
    routes: Mapping[m.CapabilityKey, m.CapabilityRoute]


@attrs.frozen
class ParticipantObservation:
    effects: tuple[str, ...]  # effect ids of the business facts, in the order they took effect
    results: tuple[m.ResultEnvelope, ...]  # the result outbox, oldest first


@attrs.frozen
class MetricsObservation:
    """A scrape and the structured snapshot read at the same moment (S-OBS-05).

    ``exposition`` is the Prometheus text format as the runtime serves it (process metrics and
    the facts of its backend); ``snapshot`` is the runtime's structured snapshot flattened into
    samples: ``sample_key(name, labels)`` -> value, histogram buckets cumulative as in the text.
    """

    exposition: str
    snapshot: Mapping[str, float]
    #: Process-wide samples read when this runtime's namespace opened: a process that serves
    #: examples one after another keeps counting across them, and the ledger is this example's.
    baseline: Mapping[str, float] = attrs.field(factory=dict)
    #: The backend's facts as the model's fact samples, for a runtime that renders them under its
    #: own names; only the facts it has a name for (S-OBS-06). None: read them from the scrape.
    facts: Mapping[str, float] | None = None


def sample_key(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="x",b="y"}`` with labels sorted: one spelling of a sample for both sides."""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


class TransactionLog:
    """Every transaction begun on a runtime's backends, in order: True once the database refused it.

    Shared by the backends of one runtime (orchestrator and participants), since a call of the
    runtime may open transactions on any of them.
    """

    def __init__(self, attempts: int | None = None) -> None:
        self.refused: list[bool] = []
        #: The refused transactions whose refusal answered their COMMIT (not one of their statements).
        self.refused_at_commit: set[int] = set()
        #: How many times the runtime runs one unit at most (None: no bound known): a unit refused
        #: that often is given up, and the transaction after it is the next unit's.
        self.attempts = attempts

    def refused_inside(self, start: int) -> bool:
        """Whether the last transaction from ``start`` on was refused at one of its statements,
        before its COMMIT: the body running in it saw the refusal (S-OBS-04, joined starts)."""
        last = len(self.refused) - 1
        return start <= last and self.refused[last] and last not in self.refused_at_commit

    def retried_within(self, start: int) -> int:
        """The refused transactions from ``start`` on that another attempt of the same unit
        followed: the attempts the runtime ran again within the call that began at ``start``
        (S-OBS-02). A unit refused on every one of its ``attempts`` was given up, so what follows
        its last refusal is another unit (a dead letter's, after its command's refused try)."""
        retried, run = 0, 0
        for refused in self.refused[start:-1]:
            run = run + 1 if refused else 0
            if run == self.attempts:
                run = 0  # given up, not run again
            elif refused:
                retried += 1
        return retried


class ReferencePort(Protocol):
    """What a runtime with ``RuntimeCapabilities.recorded_references`` also offers (S-CAT-07)."""

    def record_reference(self, reference: m.DefinitionReference) -> object: ...
    def release_reference(self, reference: m.DefinitionReference) -> object: ...


class DueTimersPort(Protocol):
    """What a runtime with ``RuntimeCapabilities.lists_due_timers`` also offers (S-TIMER-04)."""

    def due_timer_ids(self, now_ms: int) -> tuple[str, ...]: ...


class MetricsPort(Protocol):
    """What a runtime with ``RuntimeCapabilities.metrics`` also offers."""

    def read_metrics(self) -> MetricsObservation: ...

    def process_epoch(self) -> int:
        """How many times the process behind the metrics was replaced (a killed host resumed): a new
        process counts from zero, so the ledger starts again with it."""
        ...

    def transaction_log(self) -> TransactionLog | None:
        """The runtime's transactions as its storage port saw them, when the harness sits at that
        port (Ratchet's runtime); None for a runtime that owns its database connections."""
        ...


FateHook = Callable[[str], m.CommitFate]


class SagaRuntime(Protocol):
    """One orchestrator and its participants (owners ``conformance/saga/_world.OWNERS``)."""

    @property
    def capabilities(self) -> RuntimeCapabilities: ...

    def project(self, value: object) -> object:
        """``value`` (a model outcome or observation) as this runtime can show it."""
        ...

    # -- catalog and routes
    def publish_definition(self, artifact: m.DefinitionArtifact, digest: str) -> object: ...
    def change_lifecycle(self, change: m.ChangeLifecycle, now_ms: int) -> object: ...
    def query_definition(self, key: m.DefinitionKey) -> object: ...
    def release_instance(self, saga_id: str) -> object: ...
    def register_capability(self, request: m.RegisterCapability) -> object: ...
    def renew_capability(self, request: m.RenewCapability) -> object: ...
    def select_capability_routes(self, query: m.RouteQuery, now_ms: int) -> object: ...
    def select_capability_route(self, query: m.RouteQuery, now_ms: int) -> object: ...
    def catalog_snapshot(self, now_ms: int) -> object: ...
    def plant_route(self, route: m.CapabilityRoute) -> bool: ...

    # -- starts
    def start_saga(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object: ...
    def start_saga_joined(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object: ...

    # -- the orchestrator's side of the wire, and its timers
    def pending_commands(self) -> tuple[m.CommandEnvelope, ...]: ...
    def mark_command_published(self, command_id: str) -> None: ...
    def handle_result(self, envelope: m.ResultEnvelope, producer: str, now_ms: int) -> object: ...
    def claim_timer(self, timer_id: str, worker: str, now_ms: int, lease_ms: int) -> object: ...
    def fire_timer(self, timer_id: str, token: int, now_ms: int) -> object: ...
    def renew_timer(self, timer_id: str, token: int, now_ms: int, lease_ms: int) -> object: ...
    def release_timer(self, timer_id: str, token: int, now_ms: int) -> object: ...

    # -- management and the business query API (S-MGT-*)
    def manage(self, request: m.Manage, expect: str = "none") -> object:
        """``expect``: none, or the current or a stale revision pair as this runtime shows it
        (the operator reads the runtime it acts on); ``request.expectation`` is the model's."""
        ...

    def get_saga(self, request: m.GetSaga) -> object: ...
    def list_sagas(self, request: m.ListSagas) -> object: ...
    def read_audit(self, request: m.ReadAudit) -> object: ...

    # -- participants
    def handle_command(
        self, owner: str, command: m.CommandEnvelope, producer: str, decision: m.Decision
    ) -> object: ...
    def pending_results(self, owner: str) -> tuple[m.ResultEnvelope, ...]: ...
    def mark_result_published(self, owner: str, message_id: str) -> None: ...

    # -- read-backs, raw where the runtime allows it
    def observe(self) -> Observation: ...
    def observe_catalog(self) -> CatalogObservation: ...
    def observe_participant(self, owner: str) -> ParticipantObservation: ...
    def result_claimed(self, message_id: str) -> bool: ...

    def close(self) -> None: ...


class RuntimeFactory(Protocol):
    """Opens a runtime on fresh namespaces derived from ``namespace``; ``fates`` decides COMMITs."""

    def __call__(self, namespace: str, fates: FateHook) -> SagaRuntime: ...


def model_observation(state: m.OrchestratorStore) -> Observation:
    """The model's side of ``SagaRuntime.observe``."""
    return Observation(
        dict(state.instances),
        tuple(sorted(state.journal, key=lambda e: (e.saga_id, e.revision))),
        {k: e.published for k, e in state.outbox.items()},
        dict(state.timers.timers),
        {k: e.command for k, e in state.outbox.items()},
        {saga_id: m.control_of(state, saga_id) for saga_id in state.instances},
    )


def model_catalog(state: m.OrchestratorStore) -> CatalogObservation:
    entries = state.catalog.entries
    return CatalogObservation(
        {k: (e.digest, e.document) for k, e in entries.items()},
        {k: e.lifecycle for k, e in entries.items()},
        dict(state.routes.routes),
    )


def model_participant(state: m.ParticipantState) -> ParticipantObservation:
    return ParticipantObservation(tuple(state.effects), tuple(state.outbox))
