"""The runtime's metrics on every saga backend: one source, every attempt, lateness after the fence,
snapshot = exposition, facts through the port (S-OBS-01..06)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from conformance.saga._metrics_checks import flatten
from conformance.saga._metrics_scrape import parse
from impls.saga import RuntimeMetrics, SagaBackend, process_metrics, read_facts, with_facts
from impls.saga.memory import open_memory_saga_backend
from impls.sql import open_sqlite_saga_backend
from model.saga import (
    CommitFate,
    Decision,
    RolledBack,
    SagaStatus,
    Stage,
    StaleFencingToken,
    StartSaga,
    TimerClaimed,
    TimerFired,
    Unit,
)

from .conftest import KEY, ORCHESTRATOR, Rig, make_rig


class Clock:
    """A manual clock: each reading moves it on by ``tick`` seconds."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def metered(rig: Rig, clock: Callable[[], float] | None = None) -> RuntimeMetrics:
    metrics = RuntimeMetrics(CollectorRegistry(), clock or Clock())
    rig.orch.metrics = metrics
    for part in rig.parts.values():
        part.metrics = metrics
    return metrics


def count(metrics: RuntimeMetrics, stage: Stage) -> int:
    return metrics.snapshot().stages[stage].count


def test_s_obs_04_one_source_serves_services_on_several_backends() -> None:
    """A mixed application: the orchestrator on memory, a participant on SQLite, one source."""
    assert process_metrics() is process_metrics()
    registry = CollectorRegistry()
    RuntimeMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated"):
        RuntimeMetrics(registry)  # what a second source per backend would do
    backends = [open_memory_saga_backend("obs-o"), open_sqlite_saga_backend("obs-p")]
    _, text = with_facts(process_metrics(), backends[0])
    families = parse(text.decode()).families
    assert len(families) == len(set(families))
    for backend in backends:
        backend.close()


def test_s_obs_01_five_stages_are_exposed_from_the_start() -> None:
    snapshot = RuntimeMetrics(CollectorRegistry()).snapshot()
    assert set(snapshot.stages) == set(Stage)
    assert all(s.count == 0 and len(s.buckets) == 15 for s in snapshot.stages.values())


def test_s_obs_02_failed_and_refused_attempts_are_observed(
    open_backend: Callable[[str], SagaBackend],
) -> None:
    fates = iter([CommitFate.ROLLED_BACK])
    rig = make_rig(open_backend, lambda _unit: next(fates, CommitFate.COMMITTED))
    metrics = metered(rig, Clock(tick=0.002))
    refused = rig.orch.start_saga(StartSaga(KEY, "k1", json_payload=b"{}"), 0)
    assert isinstance(refused, RolledBack)  # its COMMIT rolled back
    rig.start()
    command, outcome = rig.command(lambda _c: Decision.TRANSIENT_FAILURE)
    assert isinstance(outcome, RolledBack)
    rig.parts[command.owner].handle_command(command, ORCHESTRATOR, Decision.SUCCEED)
    rig.parts[command.owner].handle_command(command, ORCHESTRATOR, Decision.SUCCEED)  # a copy
    snapshot = metrics.snapshot()
    assert snapshot.stages[Stage.START_TRANSACTION].count == 2
    # Three transactions; the handler ran for the transient failure and the success, not the copy.
    assert snapshot.stages[Stage.PARTICIPANT_TRANSACTION].count == 3
    assert snapshot.stages[Stage.HANDLER].count == 2
    # Each reading of the clock moves it 2 ms: every observation is exactly one tick.
    assert snapshot.stages[Stage.HANDLER].total_seconds == pytest.approx(0.004)
    processed = dict(snapshot.counters)
    assert processed[("nasaga_processing_total", (("outcome", "rolled_back"), ("unit", "start")))] == 1
    assert (
        processed[("nasaga_processing_total", (("outcome", "duplicate_command"), ("unit", "command")))] == 1
    )
    assert (
        processed[("nasaga_transport_messages_total", (("direction", "command"), ("verdict", "redeliver")))]
        == 1
    )


def test_s_obs_03_lateness_is_observed_only_once_the_fence_held(rig: Rig) -> None:
    metrics = metered(rig)
    started = rig.start()
    (timer,) = rig.orch.due_timers(10_000)
    claim = rig.orch.claim_timer(timer.timer_id, "w1", timer.due_ms + 40, 50)
    assert isinstance(claim, TimerClaimed)
    taken = rig.orch.claim_timer(timer.timer_id, "w2", timer.due_ms + 100, 50)
    assert isinstance(taken, TimerClaimed)
    stale = rig.orch.fire_timer(timer.timer_id, claim.token, timer.due_ms + 120)
    assert isinstance(stale, StaleFencingToken)
    assert count(metrics, Stage.TIMER_LATENESS) == 0
    assert count(metrics, Stage.TRANSITION_TRANSACTION) == 1  # the refused attempt still ran
    fired = rig.orch.fire_timer(timer.timer_id, taken.token, timer.due_ms + 120)
    assert isinstance(fired, TimerFired) and fired.saga_id == started.saga_id
    lateness = metrics.snapshot().stages[Stage.TIMER_LATENESS]
    assert (lateness.count, lateness.total_seconds) == (1, 0.12)
    assert lateness.buckets[6] == 1  # (0.1, 0.25]


def test_s_obs_05_snapshot_and_exposition_are_one_reading(rig: Rig) -> None:
    metrics = metered(rig, Clock(tick=0.0003))
    rig.start()
    rig.drive()
    snapshot, text = with_facts(metrics, rig.orch.backend)
    scrape = parse(text.decode())
    assert flatten(snapshot) == dict(scrape.samples)
    metrics.count(Unit.START, RolledBack())
    assert flatten(metrics.snapshot(snapshot.facts)) != dict(scrape.samples)  # a later reading moved


def test_s_obs_06_facts_are_read_through_the_port(rig: Rig) -> None:
    rig.start("k1")
    rig.start("k2")
    rig.drive(lambda c: Decision.REJECT if c.step_index == 1 else Decision.SUCCEED)
    facts = read_facts(rig.orch.backend)
    assert facts.instances[SagaStatus.COMPENSATED] == 2
    assert sum(facts.instances.values()) == 2
    assert (facts.conflicts, facts.quota_used, facts.retries) == (2, 2, 0)
    assert facts.attempts == len(rig.delivered)
