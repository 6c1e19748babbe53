"""Registers the saga family (conformance/backends.py SAGA_BACKENDS) and its ``saga`` suite.

Coverage: every rule ran, every saga fault kind was injected, every terminal status was
reached at quiescence, a stale fencing token was refused and the gate absorbed an attempt; on
the catalog side a conflicting and an invalid publication were refused, a planted route blocked
a candidate's activation, a lost route registration converged on re-report, a stale route
generation was fenced, a route selection was ambiguous, a retired definition refused routes;
and among starts one beyond the quota was refused, a schema-declared non-JSON one admitted, one
without first-step input admitted and a joined one left the last eligibility gate to its host.
With a runtime that shows metrics, its scrapes reconciled with the harness's ledger, a failed
attempt and a stale fire among them, and the label policy held with sagas of several tenants
(``OBSERVABILITY_TARGETS``, S-OBS-*).
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Family, Suite, register_family, register_suite
from conformance.backends import SAGA_BACKENDS
from conformance.saga._faults import SAGA_FAULTS
from conformance.saga._target import SagaTarget
from conformance.saga._world import DRAWN_FORGERIES, FIELD_FORGERIES
from conformance.wire import SAGA_WIRE_FAULTS
from model.saga import SETTLED_STATUSES, ManagementAction


def _saga_machine() -> type[ConformanceMachine]:
    from conformance.saga._machine import SagaMachine

    return SagaMachine


def saga_targets(stats: SuiteStats) -> Mapping[str, str]:
    targets = {f"step:{name}": "this rule never ran" for name in step_names(_saga_machine())}
    # fault:<kind> targets are the runner's, from the suite's kinds (conformance._faults.fault_targets)
    if stats.details.get("wire") == "True":  # the rule SagaTarget.specialise adds
        targets["step:arm_wire_fault"] = "this rule never ran"
    # What SagaMachine found of its backends' inspectors (S-TX-03): "decodes", "values" or "none".
    stored_rows = stats.details.get("stored-rows", "decodes")
    if stored_rows != "none":
        targets["stored-form-compared"] = "no stored instance row was compared with the model"
    if stored_rows == "decodes":
        targets["corrupt-row-refused"] = "no malformed stored row was planted and refused as CORRUPT"
    if stats.details.get("runtime:host_crash") == "True":  # the host-crash rule (_host_faults)
        targets["step:crash_host"] = "this rule never ran"
        targets["host-crash:step"] = "the host was never killed inside a participant's step"
        targets["host-crash:eligibility"] = "the host was never killed inside an orchestrator unit"
    if stats.details.get("runtime:timer_race") == "True":  # the timer race (_host_faults)
        targets["step:race_timers"] = "this rule never ran"
        targets["timer-race:one-fire"] = "two hosts never raced a due timer to one fire"
        targets["timer-race:takeover-fenced"] = "a stale holder was never refused after a takeover"
    for status in SETTLED_STATUSES:
        targets[f"terminal:{status.name}"] = f"no saga ended {status.value}"
    for action in ManagementAction:
        targets[f"manage:{action.value}:applied"] = f"no {action.value} was applied (S-MGT-*)"
    for refusal in ("PermissionDenied", "ManagementContextInvalid", "ManagedSagaNotFound", "StaleSnapshot"):
        targets[f"manage:{refusal}"] = f"no management action was refused with {refusal}"
    targets["manage:ManagementReplayed"] = "no committed operation was replayed (S-MGT-03)"
    targets["manage:ManagementPrecondition"] = "no management precondition refused an action"
    targets["query:audit-with-records"] = "no audit trail with management records was read back"
    targets["query:next-page"] = "no second page of sagas was read"
    targets["timer-renewed-while-held"] = "no timer lease was renewed by its holder while held"
    targets["fenced-write-refused"] = "no stale timer worker was refused"
    targets["absorbed-by-gate"] = "no attempt was absorbed by the participant gate"
    targets["publish:DefinitionConflict"] = "no publication conflicted with a published digest"
    targets["publish:InvalidDefinition"] = "no invalid definition was refused"
    targets["activation-blocked"] = "no invalid route blocked a candidate's activation"
    targets["route-retry-converged"] = "no lost route registration converged on its re-report"
    targets["renew:StaleGeneration"] = "no stale route generation was fenced"
    targets["select-one:AmbiguousRoute"] = "no single-route selection met several targets"
    targets["select:AmbiguousRoute"] = "no route selection met several transports or targets (S-ROUTE-11)"
    targets["retired-definition-touched"] = "no route was tried on a retired definition"
    targets["retirement-blocked-by-recorded-reference"] = (
        "no recorded migration or audit reference blocked a retirement (S-CAT-07)"
    )
    targets["recorded-reference-released"] = "no recorded reference was released (S-CAT-11)"
    targets["released-beside-pending"] = "no finished saga was released while others had pending commands"
    targets["released-at-quiescence"] = "no finished saga was released at quiescence (S-CAT-11)"
    targets["start:QuotaExhausted"] = "no start beyond the tenant's quota was refused"
    targets["non-json-start-admitted"] = "no schema-declared non-JSON start was admitted"
    targets["start-without-input-admitted"] = "no start without first-step input was admitted"
    for checkpoint in (0, 1):  # the runtime's create transaction is never resumed (r = 0)
        targets[f"eligibility-revoked:{checkpoint}"] = (
            f"no start was refused at checkpoint {checkpoint} (S-START-04)"
        )
    targets["start-conflict-both-orders"] = (
        "no replay conflicted with a stored start digest sorting both before and after its own (S-START-02)"
    )
    targets["joined-start-left-last-gate"] = "no joined start passed the gate its host owns"
    for how in DRAWN_FORGERIES:
        targets[f"forged-command:{how}"] = f"no command forged by {how} was refused (S-PART-05)"
    targets.update(OBSERVABILITY_TARGETS)
    lacks = set(filter(None, stats.details.get("runtime-lacks", "").split(",")))
    if "manual_close" in lacks and not lacks & {"management", "recovery_actions"}:
        # A close that cannot commit (N-01) is still asked for, and must roll back whole.
        targets["manage:manual_close:not-committed"] = "no close the model applies was asked for (N-01)"
    return {t: why for t, why in targets.items() if not lacks & REQUIRES.get(t, set())}


#: The coverage targets a runtime can reach only with a capability (``RuntimeCapabilities``);
#: a runtime without it is judged on the rest (docs/nasaga.md lists why nasaga lacks each).
REQUIRES: Mapping[str, set[str]] = {
    "terminal:MANUALLY_CLOSED": {"management", "recovery_actions", "manual_close"},
    **{
        target: {"management"}
        for target in (
            "step:manage",
            "step:manage_walk",
            "manage:pause:applied",
            "manage:resume:applied",
            "manage:PermissionDenied",
            "manage:ManagementContextInvalid",
            "manage:ManagedSagaNotFound",
            "manage:StaleSnapshot",
            "manage:ManagementReplayed",
            "manage:ManagementPrecondition",
        )
    },
    "manage:retry_compensation:applied": {"management", "recovery_actions"},
    "manage:retry_resolution:applied": {"management", "recovery_actions"},
    "manage:manual_close:applied": {"management", "recovery_actions", "manual_close"},
    "query:audit-with-records": {"management", "business_queries"},
    "query:next-page": {"management", "business_queries"},
    "fault:commit-rolled-back": {"injectable_fates"},
    "fault:commit-unknown": {"injectable_fates"},
    "joined-start-left-last-gate": {"joined_starts"},
    "activation-blocked": {"raw_route_rows"},
    **{
        target: {"routes", "retirement", "recorded_references"}
        for target in ("retirement-blocked-by-recorded-reference", "recorded-reference-released")
    },
    "start:QuotaExhausted": {"quota"},
    **{f"forged-command:{how}": {"forged_command_fields"} for how in FIELD_FORGERIES},
    "forged-command:owner": {"misaddressed_commands"},
    "step:release_instance": {"instance_release"},
    "released-beside-pending": {"instance_release"},
    "released-at-quiescence": {"instance_release"},
    "absorbed-by-gate": {"timers"},  # a second attempt of one effect follows a timeout
    **{
        target: {"routes"}
        for target in (
            "step:register_route",
            "step:renew_route",
            "step:select_routes",
            "step:retire_spare",
            "step:route_walk",
            "fault:stale-generation",
            "renew:StaleGeneration",
            "route-retry-converged",
            "select-one:AmbiguousRoute",
            "select:AmbiguousRoute",
            "retired-definition-touched",
        )
    },
    **{
        target: {"timers"}
        for target in (
            "step:claim_timer",
            "step:fire_timer",
            "step:stale_worker_advances",
            "step:renew_or_release",
            "fault:lease-lost",
            "fenced-write-refused",
            "timer-renewed-while-held",
        )
    },
    # A runtime that shows no metrics (``RuntimeCapabilities.metrics``) is not scraped (S-OBS-*).
    **{target: {"metrics"} for target in ("obs:reconciled", "obs:labels-bounded", "obs:several-tenants")},
    "obs:failed-attempt-observed": {"metrics", "injectable_fates"},
    "obs:stale-fire-unobserved": {"metrics", "timers"},
    "obs:lateness-observed": {"metrics", "timers"},
    "obs:facts-with-a-leased-timer": {"metrics", "timers"},
    "obs:counters-reconciled": {"metrics", "process_counters"},
}


#: What the metrics checks (``_metrics_checks``, S-OBS-*) must have seen at some quiescence.
OBSERVABILITY_TARGETS = {
    "obs:reconciled": "the metrics never reconciled with the harness's ledger at a quiescence",
    "obs:labels-bounded": "the label policy was never checked on a scrape",
    "obs:several-tenants": "no scrape was checked with sagas of several tenants",
    "obs:failed-attempt-observed": "no failed or rolled-back attempt was reconciled in a stage",
    "obs:stale-fire-unobserved": "no stale fire was shown to observe no timer lateness",
    "obs:lateness-observed": "no timer fired late enough to land above zero",
    "obs:facts-with-a-leased-timer": "the database facts were never compared while a timer was leased",
    "obs:counters-reconciled": "the process counters never reconciled with the harness's ledger",
}


def _named_backends() -> Mapping[str, BackendUnderTest]:
    return {
        name: BackendUnderTest(
            name,
            "saga",
            {spec.role: spec.factory} | ({"control": spec.control} if spec.control else {}),
            spec.service,
            spec.in_process,
            spec.examples,
        )
        for name, spec in SAGA_BACKENDS.items()
    }


SAGA_FAMILY = register_family(
    Family("saga", _named_backends, ("backend",), flag="--saga-backend", what="a SagaBackend")
)

SAGA_SUITE = register_suite(
    Suite(
        name="saga",
        family="saga",
        description="orchestrator + participants + timers over a SagaBackend beside the model, under faults",
        fault_kinds=(*SAGA_FAULTS, *SAGA_WIRE_FAULTS.values()),
        machine=_saga_machine,
        make_target=SagaTarget.of,
        coverage_targets=saga_targets,
    )
)
