"""Registers the ``durability`` suite (commit family: the commit machine plus server-crash, reopen and
two clients, ``_commit``) and ``saga-durability`` (the saga machine plus server-crash and reopen,
``_saga``).

Coverage asks only for what this suite adds (the commit suite asks for the rest): every rule ran,
each fault kind was injected and each crash moment reached where it applies, an acknowledged commit
survived a kill, and every example ended with its reserved keys committed. A kind that does not
apply to the backend (no service control; state kept in the store object) is not asked for: the
report's details say "not applicable" and why.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Suite, register_suite
from conformance.crash._faults import CRASH_MOMENTS, REOPEN, SERVER_CRASH, TWO_CLIENTS

EXAMPLES = {"ci": 30, "deep": 300}
SAGA_EXAMPLES = {"ci": 20, "deep": 200}  # a saga step costs ten times a commit step
CRASH_RULES = ("server_crash",)
REOPEN_RULES = ("reopen", "concurrent_clients")


def _machine() -> type[ConformanceMachine]:
    from conformance.crash._commit import DurabilityCommitMachine

    return DurabilityCommitMachine


def _target(backend: BackendUnderTest) -> object:
    from conformance.crash._commit import DurabilityTarget

    return DurabilityTarget.of(backend)


def crash_applies(stats: SuiteStats) -> bool:
    return stats.details.get("server-crash", "").startswith("on ")


def reopen_applies(stats: SuiteStats) -> bool:
    return not stats.details.get("reopen", "").startswith("not applicable")


def durability_targets(stats: SuiteStats) -> Mapping[str, str]:
    crash, reopen = crash_applies(stats), reopen_applies(stats)
    targets: dict[str, str] = {}
    for name in step_names(_machine()):
        if (name in CRASH_RULES and not crash) or (name in REOPEN_RULES and not reopen):
            continue
        targets[f"step:{name}"] = "this rule never ran"
    if crash:
        targets[f"fault:{SERVER_CRASH.name}"] = "the server was never killed"
        for moment in CRASH_MOMENTS:
            targets[f"server-crash:{moment}"] = f"the server was never killed {moment}"
        targets["committed-survived"] = "no kill came after an acknowledged commit"
    if reopen:
        targets[f"fault:{REOPEN.name}"] = "no store object was reopened"
        for what in ("store", "outbox"):
            targets[f"reopened:{what}"] = f"the {what} was never reopened"
        targets[f"fault:{TWO_CLIENTS.name}"] = "no two clients served one namespace"
    targets["quiescent-all-committed"] = "no example ended with every reserved key committed"
    return targets


DURABILITY_SUITE = register_suite(
    Suite(
        name="durability",
        family="commit",
        description="the commit suite plus server-crash (kill -9, restart), reopen and two clients",
        fault_kinds=(SERVER_CRASH, REOPEN, TWO_CLIENTS),
        machine=_machine,
        make_target=_target,
        coverage_targets=durability_targets,
        examples=EXAMPLES,
    )
)


def _saga_machine() -> type[ConformanceMachine]:
    from conformance.crash._saga import DurabilitySagaMachine

    return DurabilitySagaMachine


def _saga_target(backend: BackendUnderTest) -> object:
    from conformance.crash._saga import SagaDurabilityTarget

    return SagaDurabilityTarget.of(backend)


def saga_durability_targets(stats: SuiteStats) -> Mapping[str, str]:
    """Only what this suite adds: the saga suite's own gate asks for the rest."""
    targets: dict[str, str] = {}
    if crash_applies(stats):
        targets["step:server_crash"] = "this rule never ran"
        targets[f"fault:{SERVER_CRASH.name}"] = "the server was never killed"
        targets["server-crash:between-steps"] = "the server was never killed between steps"
        targets["committed-survived"] = "no kill came after a committed saga"
    if reopen_applies(stats):
        targets["step:reopen"] = "this rule never ran"
        targets[f"fault:{REOPEN.name}"] = "no backend object was reopened"
        for role in ("orchestrator", "participant"):
            targets[f"reopened:{role}"] = f"no {role}'s backend was reopened"
    return targets


SAGA_DURABILITY_SUITE = register_suite(
    Suite(
        name="saga-durability",
        family="saga",
        description="the saga suite plus server-crash (kill -9 between steps, restart) and reopen",
        fault_kinds=(SERVER_CRASH, REOPEN),
        machine=_saga_machine,
        make_target=_saga_target,
        coverage_targets=saga_durability_targets,
        examples=SAGA_EXAMPLES,
    )
)
