"""Registers the saga family (conformance/backends.py SAGA_BACKENDS) and its ``saga`` suite.

Coverage: every rule ran, every saga fault kind was injected, every terminal status was
reached at quiescence, a stale fencing token was refused and the gate absorbed an attempt; on
the catalog side a conflicting and an invalid publication were refused, a planted route blocked
a candidate's activation, a lost route registration converged on re-report, a stale route
generation was fenced, a route selection was ambiguous, a retired definition refused routes;
and among starts one beyond the quota was refused, a schema-declared non-JSON one admitted and a
joined one left the last eligibility gate to its host. With a runtime that shows metrics, its
scrapes reconciled with the harness's ledger, a failed attempt and a stale fire among them, and
the label policy held with sagas of several tenants (``OBSERVABILITY_TARGETS``, S-OBS-*).
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Family, Suite, register_family, register_suite
from conformance.backends import SAGA_BACKENDS
from conformance.saga._faults import SAGA_FAULTS
from conformance.saga._target import SagaTarget
from model.saga import TERMINAL_STATUSES


def _saga_machine() -> type[ConformanceMachine]:
    from conformance.saga._machine import SagaMachine

    return SagaMachine


def saga_targets(stats: SuiteStats) -> Mapping[str, str]:
    targets = {f"step:{name}": "this rule never ran" for name in step_names(_saga_machine())}
    for kind in SAGA_FAULTS:
        targets[f"fault:{kind.name}"] = f"no {kind.name} fault was injected"
    for status in TERMINAL_STATUSES:
        targets[f"terminal:{status.name}"] = f"no saga ended {status.value}"
    targets["fenced-write-refused"] = "no stale timer worker was refused"
    targets["absorbed-by-gate"] = "no attempt was absorbed by the participant gate"
    targets["publish:DefinitionConflict"] = "no publication conflicted with a published digest"
    targets["publish:InvalidDefinition"] = "no invalid definition was refused"
    targets["activation-blocked"] = "no invalid route blocked a candidate's activation"
    targets["route-retry-converged"] = "no lost route registration converged on its re-report"
    targets["renew:StaleGeneration"] = "no stale route generation was fenced"
    targets["select-one:AmbiguousRoute"] = "no single-route selection met several targets"
    targets["retired-definition-touched"] = "no route was tried on a retired definition"
    targets["start:QuotaExhausted"] = "no start beyond the tenant's quota was refused"
    targets["non-json-start-admitted"] = "no schema-declared non-JSON start was admitted"
    targets["joined-start-left-last-gate"] = "no joined start passed the gate its host owns"
    if stats.details.get("metrics") != "unavailable":  # a runtime that shows no metrics skips these
        targets.update(OBSERVABILITY_TARGETS)
    return targets


#: What the metrics checks (``_metrics_checks``, S-OBS-*) must have seen at some quiescence.
OBSERVABILITY_TARGETS = {
    "obs:reconciled": "the metrics never reconciled with the harness's ledger at a quiescence",
    "obs:labels-bounded": "the label policy was never checked on a scrape",
    "obs:several-tenants": "no scrape was checked with sagas of several tenants",
    "obs:failed-attempt-observed": "no failed or rolled-back attempt was reconciled in a stage",
    "obs:stale-fire-unobserved": "no stale fire was shown to observe no timer lateness",
    "obs:lateness-observed": "no timer fired late enough to land above zero",
}


def _named_backends() -> Mapping[str, BackendUnderTest]:
    return {
        name: BackendUnderTest(name, "saga", {"backend": spec.factory}, spec.service)
        for name, spec in SAGA_BACKENDS.items()
    }


SAGA_FAMILY = register_family(Family("saga", _named_backends, ("backend",)))

SAGA_SUITE = register_suite(
    Suite(
        name="saga",
        family="saga",
        description="orchestrator + participants + timers over a SagaBackend beside the model, under faults",
        fault_kinds=SAGA_FAULTS,
        machine=_saga_machine,
        make_target=SagaTarget.of,
        coverage_targets=saga_targets,
    )
)
