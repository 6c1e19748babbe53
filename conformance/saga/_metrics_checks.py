"""The runtime's metrics against the harness's own ledger, at every quiescence (S-OBS-01..08).

Theory of operation
-------------------
``observed(machine, runtime)`` puts a ledger in front of the runtime under test: every call
passes through unchanged, and its outcome (already compared with the model's by the rule) is
tallied with the model's reconciliation (``model.saga.unit_tally``, ``command_stages``,
``fire_lateness``). Participant and timer tallies need the model's state *before* the call;
the rules update the model first and then call the runtime, so the ledger keeps the state it
saw after the previous call, which is exactly that.

``check_metrics(machine)`` runs at the end of quiescence. It scrapes the runtime
(``MetricsPort.read_metrics``), parses the text with prometheus-client's own parser, and checks:
each family once (S-OBS-04); the five stages and their bounds (S-OBS-01); the structured
snapshot equal to the scrape (S-OBS-05); the label policy, with the identities this example
used (S-OBS-07, S-OBS-08); stage counts (S-OBS-02), timer lateness count, sum and buckets
(S-OBS-03) and every counter (S-OBS-04) equal to the ledger's; the database facts equal to the
model's (S-OBS-06). A runtime without ``RuntimeCapabilities.metrics`` is not wrapped and not
checked, and the gate drops the ``obs:`` targets (``suites.py``).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast, get_args

import attrs

from conformance._machine import RunContext
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._lateness import BUCKET, COUNT, LE, SUM, check_lateness
from conformance.saga._metrics_scrape import Scrape, parse
from conformance.saga._port import (
    MetricsObservation,
    MetricsPort,
    RuntimeCapabilities,
    SagaRuntime,
    sample_key,
)
from impls.saga import MetricsSnapshot
from model import saga as m

PROCESS_COUNTERS = (m.TRANSPORT_METRIC, m.PROCESSING_METRIC, m.GOVERNANCE_METRIC)
FAILED = (m.RolledBack, m.OutcomeUnknown, m.DeadLettered)


def _refused_from_registry(outcome: object) -> bool:
    """A start refused for a definition nasaga's registry does not hold: unknown, not loadable,
    or in no startable state but deprecated (a deprecated one is held, for replays, and refused
    inside the transaction; N-44)."""
    if isinstance(outcome, m.DefinitionNotStartable):
        return outcome.lifecycle is not m.Lifecycle.DEPRECATED
    return isinstance(outcome, m.UnknownDefinition | m.DefinitionNotLoadable)


class _Machine(Protocol):
    """What the checks read of the saga machine (``_base.SagaMachineBase``)."""

    @property
    def context(self) -> RunContext: ...
    @property
    def caps(self) -> RuntimeCapabilities: ...
    @property
    def runtime(self) -> SagaRuntime: ...
    @property
    def model(self) -> m.OrchestratorStore: ...
    @property
    def model_parts(self) -> Mapping[str, m.ParticipantState]: ...


@attrs.define
class Ledger:
    """What the harness asked and what came back, tallied as the metrics must show it."""

    stages: Counter[m.Stage] = attrs.field(factory=Counter)
    counters: Counter[str] = attrs.field(factory=Counter)  # sample key -> increments
    lateness: list[float] = attrs.field(factory=list)
    #: Fires whose last transaction the database refused: observed or not (``_lateness``).
    lateness_unsure: list[float] = attrs.field(factory=list)
    #: Handler observations a retried attempt may have added: the database refused the attempt
    #: after or before the body reached the handler, which the storage port cannot tell apart.
    handler_retries: int = 0
    failed_attempts: int = 0
    stale_fires: int = 0

    def add(self, tally: m.Tally) -> None:
        self.stages.update(tally.stages)
        for family, labels in tally.counters:
            self.counters[_counter_key(family, labels)] += 1


@functools.cache
def _counter_key(family: str, labels: tuple[tuple[str, str], ...]) -> str:
    return sample_key(f"{family}_total", dict(labels))


_UNITS: Mapping[str, m.Unit | m.Operation] = {
    "publish_definition": m.Operation.PUBLISH,
    "change_lifecycle": m.Operation.LIFECYCLE,
    "register_capability": m.Operation.ROUTE_REGISTER,
    "renew_capability": m.Operation.ROUTE_RENEW,
    "release_instance": m.Operation.RELEASE,
    "start_saga": m.Unit.START,
    "start_saga_joined": m.Unit.START,
    "handle_result": m.Unit.RESULT,
    "handle_command": m.Unit.COMMAND,
    "claim_timer": m.Unit.TIMER_CLAIM,
    "fire_timer": m.Unit.TIMER_FIRE,
    "renew_timer": m.Unit.TIMER_RENEW,
    "release_timer": m.Unit.TIMER_RELEASE,
}


#: Calls that count no metric but change the state later tallies read (a pause defers fires), or
#: whose unit the database may refuse, or after which the model moved (``Ledgered.refused_call``:
#: the state before the next call must be the one the model has after these too).
_STATE_CHANGING = frozenset(
    {
        "manage",
        "mark_command_published",
        "mark_result_published",
        "plant_route",
        "record_reference",
        "release_reference",
    }
)


class Ledgered:
    """The runtime under test with the ledger in front; every other attribute passes through."""

    def __init__(self, machine: _Machine, runtime: SagaRuntime) -> None:
        self._machine = machine
        self._runtime = runtime
        self.ledger = Ledger()
        # The machine's initial state, configuration and all (quota limit, trusted producers,
        # participant budgets): what a first call the database refused goes back to (S-TX-01).
        self._model, self._parts = machine.model, dict(machine.model_parts)
        #: The last state-changing call: the log's length and the model's state as it began.
        self._call: tuple[int, m.OrchestratorStore, dict[str, m.ParticipantState]] | None = None

    def resync(self) -> None:
        """The rule settled the model again after the call (a unit the database refused on every
        attempt, ``_base.database_refused``): keep that state for the next call instead."""
        self._model, self._parts = self._machine.model, dict(self._machine.model_parts)

    def refused_call(
        self, anywhere: bool = False
    ) -> tuple[m.OrchestratorStore, dict[str, m.ParticipantState]] | None:
        """The model's state before the last state-changing call, if the last transaction that
        call began was refused by the database (a definite rollback: ``_base.database_refused``);
        ``anywhere``: if any of them was (a dead letter's transaction follows the refused try)."""
        log = cast(MetricsPort, self._runtime).transaction_log()
        if self._call is None or log is None:
            return None
        start, model, parts = self._call
        refused = log.refused[start:]
        if not (any(refused) if anywhere else refused and refused[-1]):
            return None
        return model, dict(parts)

    def _begin(self) -> int:
        log = cast(MetricsPort, self._runtime).transaction_log()
        start = 0 if log is None else len(log.refused)
        self._call = (start, self._model, dict(self._parts))
        return start

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._runtime, name)
        unit = _UNITS.get(name)
        if unit is None and name not in _STATE_CHANGING:
            return attribute
        if unit is None:

            def passed(*args: Any) -> Any:
                self._begin()
                epoch = cast(MetricsPort, self._runtime).process_epoch()
                outcome = attribute(*args)  # no process metric of its own, but the state moves on
                if cast(MetricsPort, self._runtime).process_epoch() != epoch:
                    self.ledger = Ledger()  # a fresh process resumed inside the call (see tallied)
                self._model, self._parts = self._machine.model, dict(self._machine.model_parts)
                return outcome

            self.__dict__[name] = passed
            return passed

        def tallied(*args: Any) -> Any:
            port = cast(MetricsPort, self._runtime)
            log = port.transaction_log()
            start = self._begin()
            epoch = port.process_epoch()
            outcome = attribute(*args)
            if port.process_epoch() != epoch:
                # The process was killed inside this call and a fresh one resumed: its metrics
                # count from its own start, so the ledger does too (the killed call is not its).
                self.ledger = Ledger()
            else:
                retried = 0 if log is None else log.retried_within(start)
                inside = log is not None and log.refused_inside(start)
                last = self.refused_call() is not None
                self._tally(name, unit, args, outcome, retried, refused_inside=inside, refused_last=last)
            # The model state after this call is the state before the next one (see module doc).
            self._model, self._parts = self._machine.model, dict(self._machine.model_parts)
            return outcome

        self.__dict__[name] = tallied  # found before ``__getattr__`` from now on
        return tallied

    def _tally(
        self,
        name: str,
        unit: m.Unit | m.Operation,
        args: tuple[Any, ...],
        outcome: object,
        retried: int,
        *,
        refused_inside: bool = False,
        refused_last: bool = False,
    ) -> None:
        """``retried``: attempts the runtime ran again after its database refused them, each one
        more observation of the unit's transaction stage (S-OBS-02). ``refused_inside``: the
        database refused the call's last transaction at a statement, not at its COMMIT.
        ``refused_last``: it refused the call's last transaction (at a statement or at COMMIT)."""
        ledger = self.ledger
        joined_refused = isinstance(outcome, m.RolledBack) and refused_inside
        if (
            name == "start_saga_joined"
            and isinstance(outcome, m.RolledBack | m.OutcomeUnknown)
            and not joined_refused
        ):
            # The host's COMMIT failed after the runtime decided: the runtime counts its decision.
            # Refused at a statement of the start itself, the runtime decided RolledBack and counts
            # that (two saga runs side by side on one PostgreSQL: S-OBS-04, docs/faults.md).
            outcome = m.Started("", "", "")
        tally = m.unit_tally(unit, outcome)
        if unit is m.Unit.COMMAND:
            owner, command, producer, decision = args
            if not isinstance(outcome, get_args(m.CommandOutcome)):
                # A port that shows outcomes at its own resolution (nasaga's ``Seen``) and owns its
                # COMMITs: the model's own outcome from the state before, every COMMIT committed.
                delivery = m.CommandDelivery(command, producer, decision)
                _, outcome = m.handle_command(self._parts[owner], delivery)
            stages = m.command_stages(self._parts[owner], command, cast(m.CommandOutcome, outcome))
            if stages == (m.Stage.PARTICIPANT_TRANSACTION,) and self._machine.caps.reopens(
                self._parts[owner], command
            ):
                stages = (*stages, m.Stage.HANDLER)  # the operator's retry reopened it: it runs (N-09)
            tally = attrs.evolve(tally, stages=stages)
        if unit is m.Unit.START and not self._machine.caps.refusals_in_transaction:
            request, now_ms, revoked = args
            if not isinstance(outcome, get_args(m.StartOutcome)):
                _, outcome = m.start_saga(self._model, m.StartAttempt(request, now_ms))
            # Eligibility revoked at checkpoint 0 refuses first there, whatever else is wrong.
            if revoked == 0 or _refused_from_registry(outcome):
                tally = attrs.evolve(tally, stages=())  # refused from the registry, no transaction (N-44)
        if unit is m.Unit.RESULT and not self._machine.caps.refusals_in_transaction:
            envelope, producer, now_ms = args
            if not isinstance(outcome, get_args(m.ResultOutcome)):
                _, outcome = m.handle_result(self._model, m.ResultDelivery(envelope, producer, now_ms))
            if isinstance(outcome, m.MessageRefused):
                tally = attrs.evolve(tally, stages=())  # refused before any transaction (N-44)
        ledger.add(tally)
        if name == "start_saga_joined":
            # The host ran its transaction again after the database refused its COMMIT: each
            # refused attempt was one more joined start, decided Started, counted by the runtime.
            for _ in range(retried):
                ledger.add(m.unit_tally(unit, m.Started("", "", "")))
            retried = 0
        for stage in dict.fromkeys(tally.stages):  # a dead letter's two transactions: retried once
            if stage is m.Stage.HANDLER:
                ledger.handler_retries += retried
                if refused_last:
                    # The call's last attempt was refused too, before the body reached the handler
                    # (the inbox claim, the gate's read) or after it: observed or not, as a retried
                    # one. Counted as run, two postgres/saga runs side by side reported S-OBS-02
                    # ("observed 6 attempts, the harness ran 10"), which no replay met again.
                    ledger.stages[stage] -= 1
                    ledger.handler_retries += 1
            else:
                ledger.stages[stage] += retried
        if tally.stages and isinstance(outcome, FAILED):
            ledger.failed_attempts += 1
        if unit is m.Unit.TIMER_FIRE:
            timer_id, token, now_ms = args
            late = m.fire_lateness(self._model, timer_id, token, now_ms)
            if late is None:
                ledger.stale_fires += isinstance(outcome, m.StaleFencingToken)
            elif self.refused_call() is not None:
                ledger.lateness_unsure.append(late)  # refused before or after the fence (S-OBS-03)
            else:
                ledger.lateness.append(late)


def under_ledger(runtime: SagaRuntime) -> SagaRuntime:
    """The runtime under test itself, for a machine that needs its own type (``crash/_saga.py``)."""
    return runtime._runtime if isinstance(runtime, Ledgered) else runtime


def observed(machine: _Machine, runtime: SagaRuntime) -> SagaRuntime:
    """``runtime`` behind a ledger when it shows metrics; as it is otherwise."""
    return cast(SagaRuntime, Ledgered(machine, runtime)) if runtime.capabilities.metrics else runtime


# -- the structured snapshot, flattened ----------------------------------------------------


def flatten(snapshot: MetricsSnapshot) -> dict[str, float]:
    """Ratchet's ``MetricsSnapshot`` as samples of the text format (cumulative buckets)."""
    out: dict[str, float] = {}
    for stage, s in snapshot.stages.items():
        labels = {"stage": stage.value}
        running = 0
        for le, n in zip(LE, s.buckets, strict=True):
            running += n
            out[sample_key(BUCKET, {**labels, "le": le})] = running
        out[sample_key(COUNT, labels)] = s.count
        out[sample_key(SUM, labels)] = s.total_seconds
    for (name, pairs), value in snapshot.counters.items():
        out[sample_key(name, dict(pairs))] = value
    if snapshot.facts is not None:
        out.update(_fact_samples(snapshot.facts))
    return out


def _fact_samples(facts: m.StoreFacts) -> dict[str, float]:
    out: dict[str, float] = {
        sample_key("nasaga_instances", {"status": s.value}): n for s, n in facts.instances.items()
    }
    out[sample_key("nasaga_timers", {"state": "scheduled"})] = facts.timers_scheduled
    out[sample_key("nasaga_timers", {"state": "leased"})] = facts.timers_leased
    for name, value in (
        ("nasaga_attempts", facts.attempts),
        ("nasaga_retry_attempts", facts.retries),
        ("nasaga_unknown_results", facts.unknown_results),
        ("nasaga_conflicts", facts.conflicts),
        ("nasaga_quota_used", facts.quota_used),
    ):
        out[sample_key(name, {})] = value
    return out


# -- the checks ------------------------------------------------------------------------------


def _differ(rule: str, what: str, expected: Mapping[str, float], actual: Mapping[str, float]) -> None:
    keys = sorted(k for k in {*expected, *actual} if expected.get(k, 0) != actual.get(k, 0))
    if keys:
        raise Violation(
            rule,
            what,
            {
                "samples": [
                    f"{k}: expected {expected.get(k, 0)}, exposed {actual.get(k, 0)}" for k in keys[:12]
                ]
            },
        )


def _family(key: str) -> str:
    return key.split("{")[0].removesuffix("_total")


def _identities(machine: _Machine) -> frozenset[str]:
    model = machine.model
    tenants = {k.tenant for k in model.catalog.entries}
    keys = {*w.BUSINESS_KEYS, w.OVER_QUOTA_KEY, *w.UPLOAD_KEYS}
    messages = {*model.outbox, *model.inbox, *(e.command.effect_id for e in model.outbox.values())}
    return frozenset({*model.receipts, *tenants, *keys, *messages})


def check_metrics(machine: _Machine) -> None:
    """Every S-OBS check on one scrape; called once nothing is in flight."""
    if not machine.caps.metrics:
        return
    runtime = machine.runtime
    ledger = cast(Ledgered, runtime).ledger
    observation = cast(MetricsPort, runtime).read_metrics()
    scrape = parse(observation.exposition)
    names = scrape.families if machine.caps.openmetrics_names else _declared(observation.exposition)
    repeated = sorted(n for n, k in Counter(names).items() if k > 1)
    if repeated:
        raise Violation("S-OBS-04", "a metric family is exposed twice", {"families": ", ".join(repeated)})
    _check_stage_set(scrape)
    _differ(
        "S-OBS-05",
        "the structured snapshot differs from the exposition",
        observation.snapshot,
        scrape.samples,
    )
    for rule, problem in m.label_violations(scrape.series, _identities(machine), _catalog_labels(machine)):
        raise Violation(rule, "a label breaks the label policy", {"sample": problem})
    reach: Callable[[str], None] = machine.context.reach
    reach("obs:labels-bounded")
    if len({i.definition.tenant for i in machine.model.instances.values()}) > 1:
        reach("obs:several-tenants")
    grown = _growth(scrape.samples, observation.baseline)
    _check_stages(ledger, grown)
    if machine.caps.process_counters:
        counters = {k: v for k, v in grown.items() if _family(k) in PROCESS_COUNTERS}
        _differ(
            "S-OBS-04", "process counters differ from the harness's ledger", dict(ledger.counters), counters
        )
        reach("obs:counters-reconciled")
    check_facts(machine, observation)
    reach("obs:reconciled")
    if ledger.failed_attempts:
        reach("obs:failed-attempt-observed")
    if ledger.stale_fires:
        reach("obs:stale-fire-unobserved")
    if any(late > 0 for late in ledger.lateness):
        reach("obs:lateness-observed")


def check_facts(machine: _Machine, observation: MetricsObservation | None = None) -> None:
    """The database facts the runtime shows vs the model's (S-OBS-06); a scrape of its own if none."""
    observation = observation or cast(MetricsPort, machine.runtime).read_metrics()
    facts = _fact_samples(m.store_facts(machine.model))
    shown = parse(observation.exposition).samples if observation.facts is None else observation.facts
    keys = [k for k in facts if observation.facts is None or k in observation.facts]
    expected, actual = {k: facts[k] for k in keys}, {k: shown.get(k, 0) for k in keys}
    _differ("S-OBS-06", "database facts differ from the model", expected, actual)


def _declared(text: str) -> tuple[str, ...]:
    """The metric names of the ``# TYPE`` lines, as the text format 0.0.4 spells them."""
    return tuple(line.split(" ")[2] for line in text.splitlines() if line.startswith("# TYPE "))


def _growth(samples: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, float]:
    """What each sample grew by since ``baseline`` (the samples themselves without one)."""
    return {k: v - baseline.get(k, 0) for k, v in samples.items()}


def _bound(le: str | None) -> float | None:
    """A bucket bound as a number: the text format spells ``1``, ``1.0`` and ``1e0`` alike."""
    try:
        return None if le is None else float(le)
    except ValueError:
        return None


def _catalog_labels(machine: _Machine) -> dict[str, frozenset[str]]:
    """Label sets closed by this example's catalog: a definition's workflow and version and the
    fixed quantiles of a lifecycle summary (docs/nasaga-findings.md N-40)."""
    keys = machine.model.catalog.entries
    return {
        "workflow": frozenset(k.workflow for k in keys),
        "definition_version": frozenset(str(k.version) for k in keys),
        "quantile": m.SUMMARY_QUANTILES,
    }


def _check_stage_set(scrape: Scrape) -> None:
    stages = {s.labels.get("stage") for s in scrape.series if s.family == m.STAGE_METRIC}
    bounds = {_bound(s.labels.get("le")) for s in scrape.series if s.name == BUCKET}
    declared = {s.value for s in m.Stage}
    if stages != declared or bounds != {*m.STAGE_BUCKETS, math.inf}:
        raise Violation(
            "S-OBS-01",
            "the stage histogram is not the five fixed stages over the fixed bounds",
            {"stages": ", ".join(sorted(map(str, stages))), "bounds": ", ".join(sorted(map(str, bounds)))},
        )


def _check_stages(ledger: Ledger, samples: Mapping[str, float]) -> None:
    for stage in m.Stage:
        if stage is m.Stage.TIMER_LATENESS:
            continue
        labels = {"stage": stage.value}
        exposed = samples.get(sample_key(COUNT, labels), 0)
        ran = ledger.stages[stage]
        slack = ledger.handler_retries if stage is m.Stage.HANDLER else 0
        if not ran <= exposed <= ran + slack:
            retried = f" (and up to {slack} retried)" if slack else ""
            raise Violation(
                "S-OBS-02",
                f"{stage.value} observed {exposed:g} attempts, the harness ran {ran}{retried}",
                {"stage": stage.value},
            )
    check_lateness(ledger.lateness, ledger.lateness_unsure, samples)
