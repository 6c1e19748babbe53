"""The runtime's metrics: one process source, a stage histogram, counters, facts read at scrape.

One ``RuntimeMetrics`` serves every orchestrator and participant of a process, whatever backend
each runs on (S-OBS-04): its prometheus-client collectors live in one registry and are created
once, so a mixed application (an orchestrator on PostgreSQL, participants on MariaDB and SQLite)
never registers a metric twice. ``process_metrics()`` is that source for production, registered
on prometheus-client's default registry on first use; tests and the harness pass their own with
a private registry and a clock they control.

The stage histogram ``nasaga_stage_duration_seconds`` has the five fixed stages of
``model.saga.Stage`` and the fixed bounds ``STAGE_BUCKETS`` (S-OBS-01). ``timed(stage)`` observes
on the way out whatever happened inside, so failed and rolled-back attempts count (S-OBS-02).
Timer lateness is observed by the fire transaction once its fence held (S-OBS-03).

``snapshot()`` reads the same collectors ``exposition()`` renders (S-OBS-05), so the two cannot
drift. The database facts are no process state: ``read_facts`` reads them through the backend
port in one read transaction, the same for every backend (S-OBS-06), and ``with_facts`` renders
them beside the process exposition. Every label value is one of the model's closed sets
(S-OBS-07); no identity, tenant, endpoint or body is ever a label (S-OBS-08).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import attrs
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from model.saga import (
    GOVERNANCE_METRIC,
    PROCESSING_METRIC,
    STAGE_BUCKETS,
    STAGE_METRIC,
    TRANSPORT_METRIC,
    Cause,
    DeliveryVerdict,
    Operation,
    SagaStatus,
    Stage,
    StoreFacts,
    Unit,
    outcome_label,
)

from ._backend import SagaBackend, SagaTransaction
from ._unit import read_only

#: A monotonic clock in seconds; the harness passes one that only moves when it says so.
Clock = Callable[[], float]

#: A sample of the snapshot: (sample name, sorted (label, value) pairs).
SampleKey = tuple[str, tuple[tuple[str, str], ...]]


@attrs.frozen
class StageSnapshot:
    """One stage: attempts observed, seconds in total, non-cumulative bucket counts (``+Inf`` last)."""

    count: int
    total_seconds: float
    buckets: tuple[int, ...]


@attrs.frozen
class MetricsSnapshot:
    """The structured snapshot: the same buckets and counters as the exposition (S-OBS-05)."""

    stages: Mapping[Stage, StageSnapshot]
    counters: Mapping[SampleKey, float]
    facts: StoreFacts | None = None


class RuntimeMetrics:
    """The one source of a process's saga metrics (S-OBS-01, S-OBS-04, S-OBS-05)."""

    def __init__(self, registry: CollectorRegistry | None = None, clock: Clock = time.perf_counter) -> None:
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        self.clock = clock
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._stages = Histogram(
            STAGE_METRIC,
            "Saga stage durations: handler and transactions per attempt, timer lateness after the fence.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        for stage in Stage:
            self._stages.labels(stage.value)  # all five exposed from the start, zeros included
        self._transport = Counter(
            TRANSPORT_METRIC,
            "Deliveries by direction and verdict.",
            ["direction", "verdict"],
            registry=self.registry,
        )
        self._processing = Counter(
            PROCESSING_METRIC, "Runtime units by outcome.", ["unit", "outcome"], registry=self.registry
        )
        self._governance = Counter(
            GOVERNANCE_METRIC,
            "Catalog and management actions by outcome.",
            ["operation", "outcome"],
            registry=self.registry,
        )

    # -- recording ---------------------------------------------------------------------------

    def observe(self, stage: Stage, seconds: float) -> None:
        self._child(self._stages, stage.value).observe(max(0.0, seconds))

    def timed(self, stage: Stage) -> AbstractContextManager[None]:
        """Observe the time spent inside, however it is left: failures are attempts too (S-OBS-02)."""
        return _Timed(self, stage)

    def timing(self, stage: Stage) -> Callable[[], AbstractContextManager[None]]:
        """``timed`` bound to ``stage``: what ``run_unit`` opens around each attempt."""
        return functools.partial(_Timed, self, stage)

    def count(self, kind: Unit | Operation, outcome: object) -> None:
        """One call of a unit or management action, by outcome; deliveries by verdict too."""
        label = outcome_label(outcome)
        if isinstance(kind, Operation):
            self._child(self._governance, kind.value, label).inc()
            return
        self._child(self._processing, kind.value, label).inc()
        if kind in (Unit.COMMAND, Unit.RESULT):
            verdict: DeliveryVerdict = getattr(outcome, "verdict", DeliveryVerdict.REDELIVER)
            self._child(self._transport, kind.value, verdict.value).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        # ``labels()`` validates and locks on every call; a label set's child never changes.
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self, facts: StoreFacts | None = None) -> MetricsSnapshot:
        """Read from the collectors the exposition renders, never from a copy (S-OBS-05)."""
        return _snapshot_of(list(self.registry.collect()), facts)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def read(self, facts: StoreFacts | None = None) -> tuple[MetricsSnapshot, bytes]:
        """Snapshot and exposition from one collection: one moment, one set of buckets (S-OBS-05)."""
        families = list(self.registry.collect())
        return _snapshot_of(families, facts), generate_latest(_Collected(families))


class _Timed:
    __slots__ = ("metrics", "stage", "started")

    def __init__(self, metrics: RuntimeMetrics, stage: Stage) -> None:
        self.metrics, self.stage = metrics, stage

    def __enter__(self) -> None:
        self.started = self.metrics.clock()

    def __exit__(self, *_exc: object) -> None:
        self.metrics.observe(self.stage, self.metrics.clock() - self.started)


@attrs.frozen
class _Collected:
    families: list[Metric]

    def collect(self) -> Iterable[Metric]:
        return self.families


def _snapshot_of(families: Iterable[Metric], facts: StoreFacts | None) -> MetricsSnapshot:
    stages: dict[Stage, StageSnapshot] = {}
    counters: dict[SampleKey, float] = {}
    for family in families:
        if family.name == STAGE_METRIC:
            for stage in Stage:
                mine = [s for s in family.samples if s.labels.get("stage") == stage.value]
                cumulative = [int(s.value) for s in mine if s.name.endswith("_bucket")]
                count = next(int(s.value) for s in mine if s.name.endswith("_count"))
                total = next(s.value for s in mine if s.name.endswith("_sum"))
                buckets = tuple(b - a for a, b in zip([0, *cumulative], cumulative, strict=False))
                stages[stage] = StageSnapshot(count, total, buckets)
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                counters[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return MetricsSnapshot(stages, counters, facts)


_PROCESS: RuntimeMetrics | None = None
_PROCESS_LOCK = threading.Lock()


def process_metrics() -> RuntimeMetrics:
    """The process's one source, on prometheus-client's default registry, created once (S-OBS-04)."""
    global _PROCESS
    with _PROCESS_LOCK:
        if _PROCESS is None:
            _PROCESS = RuntimeMetrics(REGISTRY)
        return _PROCESS


# -- counting decorator ----------------------------------------------------------------------


class _Metered(Protocol):
    metrics: RuntimeMetrics


S = TypeVar("S", bound=_Metered)
P = ParamSpec("P")
R = TypeVar("R")


def counted(
    kind: Unit | Operation,
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Count every return of the decorated runtime method by its outcome (S-OBS-04)."""

    def decorate(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        def counting(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            outcome = method(self, *args, **kwargs)
            self.metrics.count(kind, outcome)
            return outcome

        functools.update_wrapper(counting, method)
        return counting

    return decorate


# -- database facts --------------------------------------------------------------------------


def read_facts(backend: SagaBackend) -> StoreFacts:
    """The orchestrator's committed facts through the port, one read transaction (S-OBS-06)."""

    def read(tx: SagaTransaction) -> StoreFacts:
        instances = tx.list_instances()
        commands = tx.list_commands()
        journal = tx.journal()
        timers = tx.list_timers()
        tenants = {row.key.tenant for row in tx.list_definitions()}
        leased = sum(1 for t in timers if t.lease is not None)
        return StoreFacts(
            instances={s: sum(1 for i in instances if i.status is s) for s in SagaStatus},
            attempts=len(commands),
            retries=sum(1 for c in commands if c.envelope.attempt > 1),
            unknown_results=sum(1 for e in journal if e.cause is Cause.UNKNOWN),
            conflicts=sum(1 for e in journal if e.cause is Cause.REJECTED),
            timers_scheduled=len(timers) - leased,
            timers_leased=leased,
            quota_used=sum(tx.quota_used(t) for t in sorted(tenants)),
        )

    return read_only(backend, read)


class _FactsCollector(Collector):
    def __init__(self, facts: StoreFacts) -> None:
        self.facts = facts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        f = self.facts
        instances = GaugeMetricFamily("nasaga_instances", "Instances by status.", labels=["status"])
        for status, n in f.instances.items():
            instances.add_metric([status.value], n)
        yield instances
        timers = GaugeMetricFamily("nasaga_timers", "Durable timers by lease state.", labels=["state"])
        timers.add_metric(["scheduled"], f.timers_scheduled)
        timers.add_metric(["leased"], f.timers_leased)
        yield timers
        for name, doc, value in (
            ("nasaga_attempts", "Dispatched command attempts.", f.attempts),
            ("nasaga_retry_attempts", "Attempts past the first.", f.retries),
            ("nasaga_unknown_results", "Transitions on an unconfirmable effect.", f.unknown_results),
            ("nasaga_conflicts", "Transitions on a rejection.", f.conflicts),
            ("nasaga_quota_used", "Start quota units used, all tenants together.", f.quota_used),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


def with_facts(metrics: RuntimeMetrics, backend: SagaBackend) -> tuple[MetricsSnapshot, bytes]:
    """The process snapshot combined with the facts of ``backend``, and the same as text."""
    facts = read_facts(backend)
    snapshot, text = metrics.read(facts)
    return snapshot, text + generate_latest(_FactsCollector(facts))
