"""nasaga's vocabulary in the model's: statuses, phases, answers, refusals, definitions, and the
resolution (``Seen``, ``project``) at which the nasaga port compares outcomes with the model.

The port (``_nasaga.py``) does the I/O; this module is the pure part of the translation, so the
mapping decided in docs/nasaga-findings.md is one table per concept, here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._port import (
    CatalogObservation,
    Observation,
    ParticipantObservation,
    RuntimeCapabilities,
)
from model import saga as m

#: What the harness cannot do to nasaga through its public API (docs/nasaga-findings.md).
CAPABILITIES = RuntimeCapabilities(
    injectable_fates=False,  # nasaga owns its transactions; no in-process COMMIT fate
    joined_starts=False,
    raw_route_rows=False,
    routes=False,
    # nasaga's quota counts sagas in flight (finding N-10): the model is told so; each tenant's
    # ledger is initialized by nasaga's own reconciliation when the namespace opens
    quota_in_flight=True,
    timers=False,  # execute is never re-dispatched after a timeout (finding N-03)
    retirement=False,  # any instance blocks retirement, terminal ones too (finding N-11)
    instance_release=False,
    attempt_budgets=False,  # no per-step attempt budget in nasaga's definition
    step_journal=False,
    dead_letters=False,  # the participant rolls a failing command back; its transports dead-letter
    metrics=True,  # its latency snapshot and rendered operational metrics (read_metrics)
    process_counters=False,  # its process source counts refusals and Kafka units only (N-41)
    openmetrics_names=False,  # a counter and a gauge share one OpenMetrics family name (N-42)
    refusals_in_transaction=False,  # a result's producer is checked before the transaction (N-44)
    # the port delivers the envelope nasaga wrote, by command id: a changed digest, identity or
    # payload does not reach the host (producer and owner forgeries do)
    forged_command_fields=False,
    misaddressed_commands=False,  # its owner check is in the transport route the host bypasses (N-05)
    # Pause/resume are ported (``_nasaga_management``); the resolve budget is the model's count of
    # polls, given to nasaga as ``resolve_max_attempts`` (``namespace_config``, finding N-21).
    management=True,
    # an unknown compensation is resolved in the compensating direction (not modelled); a
    # rejected one is sent as ``halted`` (N-09), and a retried one is reopened, then answered as
    # the model's gate replays it
    unconfirmed_compensations=False,
    gate_replays_retried_compensations=False,
    operation_ids_per_saga=False,  # control and recovery operations are two ledgers (N-22)
    manual_close=False,  # a close never commits on PostgreSQL (N-01): asked, it must roll back whole
    host_crash=True,  # the host is killed at its crash points and resumed (_nasaga_crash)
    timer_race=True,  # two hosts race real timers on a namespace of their own (_nasaga_race)
)


def namespace_config(quota: bool = True) -> dict[str, Any]:
    """nasaga's ``OrchestratorConfig`` for a world's namespace (``open_namespace config``).

    ``resolve_max_attempts`` is the model's ``resolve_budget``: nasaga counts the resolve polls of
    one step per direction against it (``reissue_resolve``, ``rt/orchestrator.rs:3794-3810``) as
    the model counts polls per step (``_instance.plan``), so both stop after the same poll
    (finding N-21). It is one number per orchestrator, so every resolving step of the world must
    declare the same budget. ``enable_manual_close`` lets the operator close (S-MGT-08; N-01).
    ``tenant_quotas`` (with ``quota``: the saga suite's, whose model caps starts; the transport
    suites' models do not) caps every tenant of the world at the model's ``QUOTA_LIMIT`` (nasaga
    leaves an unlisted tenant uncapped, the model caps each; S-START-13, finding N-10).
    """
    budgets = {
        step.resolve_budget
        for _, artifact in w.DEFINITIONS.values()
        for step in artifact.steps
        if step.uncertain_policy is m.UncertainPolicy.RESOLVE
    }
    if len(budgets) != 1:
        raise ValueError(f"nasaga has one resolve budget per orchestrator; the world declares {budgets}")
    config: dict[str, Any] = {"resolve_max_attempts": budgets.pop(), "enable_manual_close": True}
    if quota:
        config["tenant_quotas"] = {tenant: w.QUOTA_LIMIT for tenant in quota_tenants()}
    return config


def quota_tenants() -> tuple[str, ...]:
    """The tenants the world starts sagas for, each capped (``namespace_config``)."""
    return tuple(sorted({key.tenant for key, _ in w.DEFINITIONS.values()}))


#: What this port does not compare, and why.
BLIND_SPOTS = {
    "journal": "nasaga's transition rows use its own statuses and triggers; statuses are compared",
    "timers": "timer rules are off (finding N-03); nasaga's timer rows are not the model's",
    "seals": "nasaga seals its own canonical document with its own digest; keys are compared",
    "instance fields": "start digest, revision, awaiting, step statuses and first payload",
}

STATUS = {
    "RUNNING": m.SagaStatus.RUNNING,
    "WAITING_RESOLUTION": m.SagaStatus.RESOLVING,
    "COMPENSATING": m.SagaStatus.COMPENSATING,
    "COMPLETED": m.SagaStatus.COMPLETED,
    "COMPENSATED": m.SagaStatus.COMPENSATED,
    "MANUAL_INTERVENTION": m.SagaStatus.AWAITING_MANUAL_INTERVENTION,
    "MANUALLY_CLOSED": m.SagaStatus.MANUALLY_CLOSED,
}
#: A model status as nasaga's list filter names it (``CANCELLING`` is the model's resolving, N-03).
STATUS_NAMES: dict[m.SagaStatus, tuple[str, ...]] = {
    model: tuple(name for name, mapped in STATUS.items() if mapped is model) for model in m.SagaStatus
}
STATUS_NAMES[m.SagaStatus.RESOLVING] += ("CANCELLING",)
PHASE = {"execute": m.Phase.EXECUTE, "compensate": m.Phase.COMPENSATE, "resolve": m.Phase.RESOLVE}
#: A participant's answer as the model names it. HALTED is what nasaga's participant commits when
#: a step that may not be uncertain answers unknown: the model's manual-intervention policy.
KIND = {
    "SUCCEEDED": m.ResultKind.SUCCEEDED,
    "REJECTED": m.ResultKind.REJECTED,
    "UNKNOWN": m.ResultKind.UNKNOWN,
    "HALTED": m.ResultKind.UNKNOWN,
    "RESOLUTION_PENDING": m.ResultKind.UNKNOWN,
}
DECISION = {
    m.Decision.SUCCEED: "succeeded",
    m.Decision.REJECT: "rejected",
    m.Decision.UNKNOWN: "unknown",
    m.Decision.TRANSIENT_FAILURE: "retryable",
}


def decision_for(phase: m.Phase, decision: m.Decision) -> str:
    """The host's answer for a model decision. nasaga's compensation cannot be rejected; its
    refusal is ``halted`` (``CompensationOutcome``, ``core/outcome.rs:72-85``), which ends in
    manual intervention as the model's rejected compensation does (S-STEP-06, finding N-09)."""
    if phase is m.Phase.COMPENSATE and decision is m.Decision.REJECT:
        return "halted"
    return DECISION[decision]


def kind_of(phase: m.Phase, status: str) -> m.ResultKind | None:
    """A result status as the model names it; a halted compensation is the model's rejected one
    (``decision_for``, N-09)."""
    if phase is m.Phase.COMPENSATE and status == "HALTED":
        return m.ResultKind.REJECTED
    return KIND.get(status)


#: nasaga's closed refusals of a start, as the model names them.
START_REFUSALS = {
    "start.definition_inactive": "DefinitionNotStartable",
    "start.invalid_payload": "PayloadRejected",
    "start.definition_empty": "DefinitionNotStartable",
    "start.request_conflict": "StartConflict",
    "start.tenant_quota_exceeded": "QuotaExhausted",
    "host.eligibility_denied": "EligibilityRevoked",
    "host.no_definitions": "UnknownDefinition",
}


@attrs.frozen
class Seen:
    """An outcome at the seed's resolution: what kind of answer, and the facts the seed fixes."""

    kind: str
    detail: tuple[str, ...] = ()


#: nasaga's management refusals as the model names them.
MANAGEMENT_REFUSALS = {
    "management.invalid_context": "ManagementContextInvalid",
    "management.permission_denied": "PermissionDenied",
    "management.not_found": "ManagedSagaNotFound",
    "management.precondition_failed": "ManagementPrecondition",
    "management.operation_conflict": "OperationConflict",
    "concurrency.stale_snapshot": "StaleSnapshot",
    # A control operation id reused with other facts is the store's conflict
    # (`pg/instance.rs:620-627`), which nasaga's own `SagaManagementError::from_error` names
    # OperationConflict (`rt/management.rs:82-99`); the host reports the backend family first.
    "backend.conflict": "OperationConflict",
}


def seen_management(value: object) -> object | None:
    """The model's management outcome as this port shows it (``None``: not a management value)."""
    if isinstance(value, m.ManagementApplied | m.ManagementReplayed):
        return Seen("managed", (value.action.value,))
    if isinstance(value, m.ResultDeferred):
        return Seen("deferred")
    names = (
        m.ManagementContextInvalid,
        m.PermissionDenied,
        m.ManagedSagaNotFound,
        m.ManagementPrecondition,
        m.OperationConflict,
        m.StaleSnapshot,
    )
    if isinstance(value, names):
        return Seen(type(value).__name__)
    if isinstance(value, m.SagaView):
        return Seen("view", view_detail(value))
    if isinstance(value, m.SagaPage):
        return Seen("page", (*("|".join(view_detail(v)) for v in value.items), f"next={value.next_after}"))
    if isinstance(value, m.AuditTrail):
        return Seen("audit", audit_detail(value.management))
    return None


def view_detail(view: m.SagaView) -> tuple[str, ...]:
    """A saga view at nasaga's resolution: its revisions are nasaga's own numbers (N-17)."""
    return (view.saga_id, repr(view.definition), view.business_key, view.status.value, view.control.value)


def audit_detail(records: tuple[m.AuditRecord, ...]) -> tuple[str, ...]:
    """The management records as nasaga keeps them: control changes (pause, resume) in one
    stream, the recovery actions in another, each in commit order (``load_audit_trail``)."""
    control = (m.ManagementAction.PAUSE, m.ManagementAction.RESUME)
    shown = [r for r in records if r.action in control] + [r for r in records if r.action not in control]
    return tuple(f"{r.action.value} {r.operation_id} {r.actor} {r.reason}" for r in shown)


def _seen_start(outcome: object) -> Seen:
    if isinstance(outcome, m.Started | m.AlreadyExists):
        return Seen(type(outcome).__name__, (outcome.saga_id,))
    if isinstance(outcome, m.DefinitionNotLoadable):  # a retired or candidate definition
        return Seen("DefinitionNotStartable")
    return Seen(type(outcome).__name__)


def project(value: object) -> object:
    """A model value as this port shows it (``SagaRuntime.project``)."""
    managed = seen_management(value)
    if managed is not None:
        return managed
    if isinstance(value, Observation):
        return Observation({k: project_instance(v) for k, v in value.instances.items()}, (), value.outbox, {})
    if isinstance(value, CatalogObservation):
        return CatalogObservation({k: ("", b"") for k in value.seals}, value.lifecycles, {})
    if isinstance(value, ParticipantObservation):
        return value
    if isinstance(value, m.Started | m.AlreadyExists | m.StartConflict | m.PayloadRejected):
        return _seen_start(value)
    if isinstance(value, m.DefinitionNotStartable | m.DefinitionNotLoadable | m.UnknownDefinition):
        return _seen_start(value)
    if isinstance(value, m.EligibilityRevoked | m.QuotaExhausted):
        return _seen_start(value)
    if isinstance(value, m.CommandProcessed):
        return Seen("processed", (value.result.kind.value,))
    if isinstance(value, m.DeadLettered | m.RolledBack):
        # Dead-lettering is the transport's (seed, Transport table); the participant rolled back.
        return Seen("not-committed")
    if isinstance(value, m.ResultApplied | m.StaleResult):
        return Seen("accepted")  # nasaga records a stale result like any other (finding N-13)
    if isinstance(value, m.DuplicateCommand | m.DuplicateResult):
        return Seen("duplicate")
    if isinstance(value, m.MessageRefused):
        return Seen("refused")
    if isinstance(value, m.Published | m.AlreadyPublished):
        return Seen(type(value).__name__, (repr(value.key),))
    if isinstance(value, m.DefinitionConflict | m.InvalidDefinition):
        return Seen(type(value).__name__, (repr(value.key),))
    if isinstance(value, m.LifecycleChanged):
        return Seen("LifecycleChanged", (repr(value.key), value.after.value))
    if isinstance(value, m.LifecycleUnchanged):
        return Seen("LifecycleUnchanged", (repr(value.key), value.lifecycle.value))
    if isinstance(value, m.CatalogEntry):
        return Seen("CatalogEntry", (repr(value.artifact.key), value.lifecycle.value))
    if isinstance(value, tuple) and all(isinstance(c, m.CommandEnvelope | m.ResultEnvelope) for c in value):
        return value
    return Seen(type(value).__name__)


def project_instance(instance: m.SagaInstance) -> m.SagaInstance:
    return attrs.evolve(
        instance,
        start_digest="",
        steps=(),
        awaiting=None,
        revision=0,
        first_payload=m.SagaPayload(b"", m.JSON_CONTRACT),
    )


def _nasaga_step(step: m.StepDefinition, contract: m.PayloadContract | None) -> dict[str, Any]:
    """The model's step in nasaga's artifact shape (docs/nasaga.md, concept map)."""
    resolution: Any = (
        {"mode": "poll", "budget_ms": max(step.timeout_ms, 1) * max(step.resolve_budget, 1)}
        if step.uncertain_policy is m.UncertainPolicy.RESOLVE
        else "forbidden"  # an unknown answer then halts the step: manual intervention
    )
    spec: dict[str, Any] = {
        "name": step.name,
        "owner": step.owner,
        "compensation": "compensable" if step.compensation is not None else "non-compensable",
        # nasaga ties the two: a step that may be uncertain resolves (never a local fence), one
        # that may not is fenced locally (definition_mode_conflict otherwise).
        "cancel_mode": "resolve-only" if resolution != "forbidden" else "local-fenceable",
        "resolution": resolution,
        "timeout_ms": step.timeout_ms,
        "timeout_policy": "accept-late-success",
    }
    if contract is not None and not m.is_json_media_type(contract.media_type):
        spec["payload_contract"] = {"content_type": contract.media_type, "schema_id": contract.schema_id}
    return spec


def nasaga_definition(artifact: m.DefinitionArtifact) -> dict[str, Any]:
    key = artifact.key
    steps = [
        _nasaga_step(step, artifact.first_input if i == 0 else None) for i, step in enumerate(artifact.steps)
    ]
    return {"workflow": key.workflow, "version": key.version, "tenant": key.tenant, "steps": steps}


def definition_key(row: Mapping[str, Any]) -> tuple[str, str, int]:
    return str(row["tenant_id"]), str(row["workflow"]), int(row["definition_version"])


def first_payload(envelope: Mapping[str, Any], artifact: m.DefinitionArtifact) -> m.SagaPayload | None:
    raw = envelope.get("raw_payload")
    if raw is not None:
        contract = m.PayloadContract(str(raw["content_type"]), raw.get("schema_id") or None)
        # nasaga's SagaPayload serializes its body as a JSON array of byte values.
        return m.SagaPayload(bytes(raw["body"]), contract)
    payload = envelope.get("payload")
    if payload is None:
        return None
    return m.SagaPayload(json.dumps(payload, separators=(",", ":")).encode(), m.JSON_CONTRACT)


def command_of(
    envelope: Mapping[str, Any], artifacts: Mapping[m.DefinitionKey, m.DefinitionArtifact]
) -> m.CommandEnvelope:
    """nasaga's command envelope renamed into the model's ids (docs/nasaga.md, "Names")."""
    artifact = artifacts[m.DefinitionKey(*definition_key(envelope))]
    names = [s.name for s in artifact.steps]
    phase = PHASE.get(envelope["phase"])
    if phase is None or envelope["step"] not in names:
        raise Violation(
            "S-ORCH-02",
            "the runtime issued a command the model has no place for",
            {"phase": str(envelope["phase"]), "step": str(envelope["step"])},
        )
    index = names.index(envelope["step"])
    saga_id = str(envelope["saga_id"])
    effect = m.effect_id_for(saga_id, index, phase)
    carries = phase is m.Phase.EXECUTE and index == 0
    return m.CommandEnvelope(
        command_id=m.command_id_for(effect, int(envelope["attempt"])),
        effect_id=effect,
        target_effect_id=m.effect_id_for(saga_id, index, m.Phase.EXECUTE)
        if phase is m.Phase.RESOLVE
        else None,
        saga_id=saga_id,
        definition=artifact.key,
        definition_digest=m.definition_digest(artifact),
        step_index=index,
        step_name=artifact.steps[index].name,
        owner=artifact.steps[index].owner,
        phase=phase,
        attempt=int(envelope["attempt"]),
        payload=first_payload(envelope, artifact) if carries else None,
    )


def result_of(
    envelope: Mapping[str, Any], artifacts: Mapping[m.DefinitionKey, m.DefinitionArtifact]
) -> m.ResultEnvelope:
    command = command_of({**envelope, "payload": None}, artifacts)
    kind = kind_of(command.phase, str(envelope["status"]))
    if kind is None:
        raise Violation(
            "S-PART-01",
            "a result with a status the model has no name for",
            {"status": str(envelope["status"])},
        )
    return m.ResultEnvelope(
        message_id=m.result_message_id_for(command.command_id),
        command_id=command.command_id,
        effect_id=command.effect_id,
        saga_id=command.saga_id,
        definition_digest=command.definition_digest,
        step_index=command.step_index,
        phase=command.phase,
        owner=command.owner,
        kind=kind,
    )
