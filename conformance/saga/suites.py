"""Registers the saga family (conformance/backends.py SAGA_BACKENDS) and its ``saga`` suite.

Coverage: every rule ran, every saga fault kind was injected, every terminal status was
reached at quiescence, a stale fencing token was refused and the gate absorbed an attempt.
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
    return targets


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
