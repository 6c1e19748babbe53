"""Deliberately broken saga *runtimes* whose metrics lie, each in one way the contract forbids.

Each is Ratchet's own runtime over the in-memory saga backend with one class swapped, so every
outcome and every row is correct and the only thing the harness can find is the metric. Each
factory is a runtime factory (``(namespace, fates, stats) -> SagaRuntime``), the role a runtime
that brings its own storage fills (``conformance/saga/_target.py``)::

    path = "examples.broken_saga_runtimes:retry_counted_twice"
    run_matrix([(BackendUnderTest("twice", "saga", {"runtime": path}), suite_named("saga"))], options)

===================  ========  ==============================================================
factory              rule      the bug
===================  ========  ==============================================================
retry_counted_twice  S-OBS-04  a command that committed after a failed try is counted as
                               processed twice (once for the try that rolled back)
labels_by_tenant     S-OBS-08  starts are also counted per tenant, with the tenant as a label
stage_per_unit       S-OBS-02  a unit's transaction stage observes its first attempt only: the
                               attempts run again after the database refused one are not seen
                               (on ``examples.contended_saga_backend``, which refuses some)
===================  ========  ==============================================================

Two more break a row or an answer the suite reads back, not a metric (issue 15's harness
columns: the checks that closed blind spots of ``make mutation``):

=========================  ========  ========================================================
factory                    rule      the bug
=========================  ========  ========================================================
pause_skips_a_revision     S-MGT-05  a pause or resume writes its control revision one too
                                     high (the answer is right; the control row read back is not)
references_never_released  S-CAT-11  releasing a migration or audit reference answers released
                                     and deletes nothing (it blocks retirement for ever)
=========================  ========  ========================================================

``BROKEN_SAGA_RUNTIMES`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import attrs
from prometheus_client import CollectorRegistry, Counter

from conformance._machine import SuiteStats
from conformance.saga._port import FateHook, SagaRuntime
from conformance.saga._ratchet import RatchetRuntime
from examples.contended_saga_backend import contended
from impls.saga import Clock, EligibilityCheck, Orchestrator, Participant, RuntimeMetrics, always_eligible
from impls.saga.memory import MemorySagaBackend, open_memory_saga_backend
from impls.saga.memory._backend import MemoryTransaction
from model.saga import (
    CommandEnvelope,
    CommandOutcome,
    CommandProcessed,
    Control,
    Decision,
    DefinitionReference,
    OutcomeUnknown,
    ReferenceReleased,
    RolledBack,
    Stage,
    StartOutcome,
    StartSaga,
    Unit,
    UnknownReference,
)


class RetryCountedTwice(Participant):
    """S-OBS-04: the redelivery that finally commits also counts the try that rolled back."""

    def handle_command(self, command: CommandEnvelope, producer: str, decision: Decision) -> CommandOutcome:
        retried = command.command_id in self.delivery_failures
        outcome = super().handle_command(command, producer, decision)
        if retried and isinstance(outcome, CommandProcessed):
            self.metrics.count(Unit.COMMAND, outcome)
        return outcome


class TenantMetrics(RuntimeMetrics):
    """S-OBS-08: one more counter, labelled by the tenant a start names."""

    def __init__(self, registry: CollectorRegistry | None = None, clock: Clock = lambda: 0.0) -> None:
        super().__init__(registry, clock)
        self.starts_by_tenant = Counter(
            "nasaga_starts_by_tenant", "Starts per tenant.", ["tenant"], registry=self.registry
        )


class TenantLabelled(Orchestrator):
    def start_saga(
        self, request: StartSaga, now_ms: int, eligible: EligibilityCheck = always_eligible
    ) -> StartOutcome:
        outcome = super().start_saga(request, now_ms, eligible)
        if isinstance(self.metrics, TenantMetrics):
            self.metrics.starts_by_tenant.labels(request.definition.tenant).inc()
        return outcome


class FirstAttemptMetrics(RuntimeMetrics):
    """S-OBS-02: the stage of a unit is timed around its first attempt only."""

    def timing(self, stage: Stage) -> Callable[[], AbstractContextManager[None]]:
        inner = super().timing(stage)
        entered: list[bool] = []

        def first() -> AbstractContextManager[None]:
            if entered:
                return nullcontext()
            entered.append(True)
            return inner()

        return first


class _SkippingTransaction(MemoryTransaction):
    def save_control(self, saga_id: str, control: Control, expected_revision: int) -> bool:
        return super().save_control(
            saga_id, attrs.evolve(control, revision=control.revision + 1), expected_revision
        )


class _SkippingBackend(MemorySagaBackend):
    """S-MGT-05: every control row is saved one revision ahead of the one asked for."""

    def begin(self) -> MemoryTransaction:
        return _SkippingTransaction(self)


class ReferencesKept(Orchestrator):
    """S-CAT-11: a release of a recorded reference answers released and deletes nothing."""

    def release_reference(
        self, reference: DefinitionReference
    ) -> ReferenceReleased | UnknownReference | RolledBack | OutcomeUnknown:
        return ReferenceReleased(reference)


class _ReferencesKeptRuntime(RatchetRuntime):
    orchestrator_class = ReferencesKept


class _RetryCountedTwiceRuntime(RatchetRuntime):
    participant_class = RetryCountedTwice


class _TenantLabelledRuntime(RatchetRuntime):
    orchestrator_class = TenantLabelled
    metrics_class = TenantMetrics


class _StagePerUnitRuntime(RatchetRuntime):
    metrics_class = FirstAttemptMetrics


def retry_counted_twice(namespace: str, fates: FateHook, stats: SuiteStats) -> SagaRuntime:
    return _RetryCountedTwiceRuntime(open_memory_saga_backend, namespace, fates, stats)


def labels_by_tenant(namespace: str, fates: FateHook, stats: SuiteStats) -> SagaRuntime:
    return _TenantLabelledRuntime(open_memory_saga_backend, namespace, fates, stats)


def stage_per_unit(namespace: str, fates: FateHook, stats: SuiteStats) -> SagaRuntime:
    return _StagePerUnitRuntime(contended, namespace, fates, stats)


def pause_skips_a_revision(namespace: str, fates: FateHook, stats: SuiteStats) -> SagaRuntime:
    return RatchetRuntime(_SkippingBackend, namespace, fates, stats)


def references_never_released(namespace: str, fates: FateHook, stats: SuiteStats) -> SagaRuntime:
    return _ReferencesKeptRuntime(open_memory_saga_backend, namespace, fates, stats)


BROKEN_SAGA_RUNTIMES: dict[str, str] = {
    "pause_skips_a_revision": "S-MGT-05",
    "references_never_released": "S-CAT-11",
    "retry_counted_twice": "S-OBS-04",
    "labels_by_tenant": "S-OBS-08",
    "stage_per_unit": "S-OBS-02",
}
