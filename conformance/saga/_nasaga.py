"""The real nasaga runtime (``hosts/nasaga`` via ``impls.nasaga``) as a ``SagaRuntime``.

Theory of operation
-------------------
nasaga names things its own way: the harness passes the model's saga id to ``start_saga`` (nasaga
takes the caller's), but nasaga derives its own effect, command and result ids (UUIDv5) and its
own definition digests. The port *renames* what nasaga wrote into the model's vocabulary from
the facts each envelope carries — (saga, step, phase, attempt) give the model's effect, command
and message ids, the definition key gives the model's digest — and keeps the reverse map, so a
delivery hands nasaga its own envelope. Nothing is compared by nasaga's ids.

Outcomes are compared at the resolution the seed fixes (``Seen``): the kind of answer (started,
already exists, refused, processed with a result kind, duplicate, applied, ...), not the
model's internal fields (journal revision, start digest encoding, fencing token values). Durable
facts are read back raw: instance statuses, the command outbox's published flags, each
participant's business facts (the host's step writes one row per handler call inside nasaga's
participant transaction) and result outbox. ``BLIND_SPOTS`` lists what this port cannot show
and why; docs/nasaga-findings.md decides every place nasaga and the model disagree.
"""

from __future__ import annotations

import atexit
import json
import time
from collections.abc import Mapping
from typing import Any

import attrs

from conformance._machine import SuiteStats
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._port import (
    CatalogObservation,
    FateHook,
    Observation,
    ParticipantObservation,
    RuntimeCapabilities,
)
from impls.nasaga import Engine, NasagaHost, NasagaHostError, OutboxRow
from model import saga as m

#: What the harness cannot do to nasaga through its public API (docs/nasaga-findings.md).
CAPABILITIES = RuntimeCapabilities(
    injectable_fates=False,  # nasaga owns its transactions; no in-process COMMIT fate
    joined_starts=False,
    raw_route_rows=False,
    routes=False,
    quota=False,  # nasaga counts sagas in flight, the model admitted starts (finding N-10)
    timers=False,  # execute is never re-dispatched after a timeout (finding N-03)
    retirement=False,  # any instance blocks retirement, terminal ones too (finding N-11)
    instance_release=False,
    attempt_budgets=False,  # no per-step attempt budget in nasaga's definition
    step_journal=False,
)

#: What this port does not compare, and why.
BLIND_SPOTS = {
    "journal": "nasaga's transition rows use its own statuses and triggers; statuses are compared",
    "timers": "timer rules are off (finding N-03); nasaga's timer rows are not the model's",
    "seals": "nasaga seals its own canonical document with its own digest; keys are compared",
    "instance fields": "start digest, revision, awaiting, step statuses and first payload",
}

_STATUS = {
    "RUNNING": m.SagaStatus.RUNNING,
    "WAITING_RESOLUTION": m.SagaStatus.RESOLVING,
    "COMPENSATING": m.SagaStatus.COMPENSATING,
    "COMPLETED": m.SagaStatus.COMPLETED,
    "COMPENSATED": m.SagaStatus.COMPENSATED,
    "MANUAL_INTERVENTION": m.SagaStatus.AWAITING_MANUAL_INTERVENTION,
}
_PHASE = {"execute": m.Phase.EXECUTE, "compensate": m.Phase.COMPENSATE, "resolve": m.Phase.RESOLVE}
#: A participant's answer as the model names it. HALTED is what nasaga's participant commits when
#: a step that may not be uncertain answers unknown: the model's manual-intervention policy.
_KIND = {
    "SUCCEEDED": m.ResultKind.SUCCEEDED,
    "REJECTED": m.ResultKind.REJECTED,
    "UNKNOWN": m.ResultKind.UNKNOWN,
    "HALTED": m.ResultKind.UNKNOWN,
    "RESOLUTION_PENDING": m.ResultKind.UNKNOWN,
}
_DECISION = {
    m.Decision.SUCCEED: "succeeded",
    m.Decision.REJECT: "rejected",
    m.Decision.UNKNOWN: "unknown",
    m.Decision.TRANSIENT_FAILURE: "retryable",
}
#: nasaga's closed refusals of a start, as the model names them.
_START_REFUSALS = {
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


def _seen_start(outcome: object) -> Seen:
    if isinstance(outcome, m.Started | m.AlreadyExists):
        return Seen(type(outcome).__name__, (outcome.saga_id,))
    if isinstance(outcome, m.DefinitionNotLoadable):  # a retired or candidate definition
        return Seen("DefinitionNotStartable")
    return Seen(type(outcome).__name__)


def project(value: object) -> object:
    """A model value as this port shows it (``SagaRuntime.project``)."""
    if isinstance(value, Observation):
        return Observation(
            {k: _project_instance(v) for k, v in value.instances.items()}, (), value.outbox, {}
        )
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


def _project_instance(instance: m.SagaInstance) -> m.SagaInstance:
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


_HOSTS: dict[str, NasagaHost] = {}


def _host(engine: Engine) -> NasagaHost:
    """One host process per engine per run; it never outlives the run (atexit)."""
    host = _HOSTS.get(engine)
    if host is None or not host.alive():
        try:
            host = NasagaHost.start(engine, timeout=60.0)
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"the nasaga host did not start: {exc}") from exc
        if not _HOSTS:
            atexit.register(_close_hosts)
        _HOSTS[engine] = host
    return host


def _close_hosts() -> None:
    for host in _HOSTS.values():
        host.close()
    _HOSTS.clear()


class NasagaRuntime:
    """nasaga's Orchestrator and one participant runtime per owner, on one namespace."""

    capabilities = CAPABILITIES

    def __init__(self, engine: Engine, namespace: str, stats: SuiteStats) -> None:
        self.host = _host(engine)
        self.ns = f"n{namespace}"[:40]
        self.stats = stats
        self._call(lambda: self.host.open_namespace(self.ns, list(w.OWNERS)))
        self.artifacts: dict[m.DefinitionKey, m.DefinitionArtifact] = {}
        #: model command id -> nasaga's command envelope; model message id -> (producer, nasaga envelope)
        self.commands: dict[str, Mapping[str, Any]] = {}
        self.results: dict[str, Mapping[str, Any]] = {}
        self.published: set[str] = set()  # model command ids the harness relayed
        self.results_published: set[str] = set()

    project = staticmethod(project)

    def _call(self, body: Any) -> Any:
        """One host request; a crashed or hung host is an outage (exit 2), never a verdict."""
        started = time.perf_counter()
        try:
            return body()
        except NasagaHostError as exc:
            if exc.is_environment:
                raise HarnessEnvironmentError(f"the nasaga host failed: {exc}") from exc
            raise
        finally:
            self.stats.backend_seconds += time.perf_counter() - started

    def _refusal(self, body: Any) -> tuple[Any, str | None]:
        try:
            return self._call(body), None
        except NasagaHostError as exc:
            return None, exc.code or "refused"

    # -- translation -----------------------------------------------------------------------

    def _artifact(self, tenant: str, workflow: str, version: int) -> m.DefinitionArtifact:
        return self.artifacts[m.DefinitionKey(tenant, workflow, version)]

    def _command(self, envelope: Mapping[str, Any]) -> m.CommandEnvelope:
        artifact = self._artifact(envelope["tenant_id"], envelope["workflow"], envelope["definition_version"])
        names = [s.name for s in artifact.steps]
        phase = _PHASE.get(envelope["phase"])
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
            payload=_payload(envelope, artifact) if carries else None,
        )

    def _result(self, envelope: Mapping[str, Any]) -> m.ResultEnvelope:
        command = self._command({**envelope, "payload": None})
        kind = _KIND.get(str(envelope["status"]))
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

    # -- catalog ---------------------------------------------------------------------------

    def publish_definition(self, artifact: m.DefinitionArtifact, digest: str) -> object:
        del digest  # nasaga seals and digests the document itself
        body, refused = self._refusal(
            lambda: self.host.publish_definition(self.ns, nasaga_definition(artifact))
        )
        key = repr(artifact.key)
        if refused is None:
            self.artifacts.setdefault(artifact.key, artifact)
            kind = "Published" if body["disposition"] == "published" else "AlreadyPublished"
            return Seen(kind, (key,))
        if refused == "catalog.digest_conflict":
            return Seen("DefinitionConflict", (key,))
        if refused.startswith("definition.") or refused == "catalog.invalid_argument":
            return Seen("InvalidDefinition", (key,))
        return Seen(refused, (key,))

    def change_lifecycle(self, change: m.ChangeLifecycle, now_ms: int) -> object:
        """A managed lifecycle move; one that changes nothing is the model's no-op (S-CAT-04)."""
        del now_ms
        key = change.key
        op = {"activate": "activate_definition", "deprecate": "deprecate_definition"}[change.action.value]
        before = self._lifecycle(key)
        body, refused = self._refusal(
            lambda: self.host.call(
                op, namespace=self.ns, tenant=key.tenant, workflow=key.workflow, version=key.version
            )
        )
        if refused in ("catalog.failed_precondition", "catalog.precondition_failed"):
            return Seen("IllegalLifecycleTransition")
        if refused is not None:
            return Seen(refused, (repr(key),))
        after = str(body["record"].get("lifecycle", "")).lower()
        kind = "LifecycleUnchanged" if before == after else "LifecycleChanged"
        return Seen(kind, (repr(key), after))

    def _lifecycle(self, key: m.DefinitionKey) -> str | None:
        body = self._call(
            lambda: self.host.call(
                "load_definition",
                namespace=self.ns,
                tenant=key.tenant,
                workflow=key.workflow,
                version=key.version,
            )
        )
        record = body.get("record")
        return None if record is None else str(record["lifecycle"]).lower()

    def query_definition(self, key: m.DefinitionKey) -> object:
        body = self._call(
            lambda: self.host.call(
                "load_definition",
                namespace=self.ns,
                tenant=key.tenant,
                workflow=key.workflow,
                version=key.version,
            )
        )
        record = body.get("record")
        if record is None:
            return Seen("UnknownDefinition")
        return Seen("CatalogEntry", (repr(key), str(record.get("lifecycle", "")).lower()))

    # -- starts ----------------------------------------------------------------------------

    def start_saga(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object:
        key = request.definition
        saga_id = m.saga_id_for(key.tenant, key.workflow, request.business_key)
        args: dict[str, Any] = {}
        if request.json_payload is not None:
            try:
                args["payload"] = json.loads(request.json_payload)
            except ValueError:
                args["raw_payload"] = {
                    "content_type": m.JSON_MEDIA_TYPE,
                    "body_hex": request.json_payload.hex(),
                }
        if request.raw_payload is not None:
            contract = request.raw_payload.contract
            raw: dict[str, Any] = {
                "content_type": contract.media_type,
                "body_hex": request.raw_payload.data.hex(),
            }
            if contract.schema_id is not None:
                raw["schema_id"] = contract.schema_id
            args["raw_payload"] = raw
        if revoked_at is not None:
            args["eligibility"] = [checkpoint < revoked_at for checkpoint in range(revoked_at + 1)]
        body, refused = self._refusal(
            lambda: self.host.start_saga(
                self.ns,
                saga_id=saga_id,
                tenant=key.tenant,
                workflow=key.workflow,
                version=key.version,
                business_key=request.business_key,
                now_ms=now_ms,
                **args,
            )
        )
        if refused is not None:
            return Seen(_START_REFUSALS.get(refused, refused))
        kind = "Started" if body.outcome == "started" else "AlreadyExists"
        return Seen(kind, (body.instance.saga_id,))

    def start_saga_joined(self, request: m.StartSaga, now_ms: int, revoked_at: int | None) -> object:
        raise NotImplementedError("joined starts are not driven on nasaga (capabilities)")

    def release_instance(self, saga_id: str) -> object:
        raise NotImplementedError("no instance release on nasaga (capabilities)")

    # -- the wire --------------------------------------------------------------------------

    def _rows(self, role: str) -> list[OutboxRow]:
        rows: list[OutboxRow] = self._call(lambda: self.host.read_outbox(self.ns, role))
        return [row for row in rows if row.kind in ("command", "result")]

    def pending_commands(self) -> tuple[m.CommandEnvelope, ...]:
        pending = []
        for row in self._rows("orchestrator"):
            command = self._command(row.envelope)
            self.commands.setdefault(command.command_id, row.envelope)
            if command.command_id not in self.published:
                pending.append(command)
        return tuple(pending)

    def mark_command_published(self, command_id: str) -> None:
        # The harness is the relay: nasaga's dispatcher is not driven, so "published" is ours.
        self.published.add(command_id)

    def handle_command(
        self, owner: str, command: m.CommandEnvelope, producer: str, decision: m.Decision
    ) -> object:
        envelope = self.commands[command.command_id]
        body, refused = self._refusal(
            lambda: self.host.deliver_command(
                self.ns, owner, envelope, _DECISION[decision], producer=producer
            )
        )
        if refused == "step.retryable":
            return Seen("not-committed")
        if refused is not None:
            return Seen("refused") if refused.startswith("command.") else Seen(refused)
        if body.handled == "duplicate":
            return Seen("duplicate")
        kind = _KIND.get(str(body.status))
        return Seen("processed", (kind.value if kind is not None else str(body.status),))

    def pending_results(self, owner: str) -> tuple[m.ResultEnvelope, ...]:
        pending = []
        for row in self._rows(owner):
            result = self._result(row.envelope)
            self.results.setdefault(result.message_id, row.envelope)
            if result.message_id not in self.results_published:
                pending.append(result)
        return tuple(pending)

    def mark_result_published(self, owner: str, message_id: str) -> None:
        self.results_published.add(message_id)

    def handle_result(self, envelope: m.ResultEnvelope, producer: str, now_ms: int) -> object:
        raw = dict(self.results[envelope.message_id])
        if envelope.definition_digest != m.definition_digest(self._artifact(*_key(raw))):
            raw["definition_digest"] = envelope.definition_digest  # the forged digest, as sent
        body, refused = self._refusal(
            lambda: self.host.deliver_result(self.ns, raw, now_ms=now_ms, producer=producer)
        )
        if refused is not None:
            return Seen("refused") if refused.startswith("result.") else Seen(refused)
        return Seen("duplicate") if body.outcome == "duplicate" else Seen("accepted")

    # -- timers and routes: not driven (capabilities) --------------------------------------

    def claim_timer(self, timer_id: str, worker: str, now_ms: int, lease_ms: int) -> object:
        raise NotImplementedError

    def fire_timer(self, timer_id: str, token: int, now_ms: int) -> object:
        raise NotImplementedError

    def renew_timer(self, timer_id: str, token: int, now_ms: int, lease_ms: int) -> object:
        raise NotImplementedError

    def release_timer(self, timer_id: str, token: int) -> object:
        raise NotImplementedError

    def register_capability(self, request: m.RegisterCapability) -> object:
        raise NotImplementedError

    def renew_capability(self, request: m.RenewCapability) -> object:
        raise NotImplementedError

    def select_capability_routes(self, query: m.RouteQuery, now_ms: int) -> object:
        raise NotImplementedError

    def select_capability_route(self, query: m.RouteQuery, now_ms: int) -> object:
        raise NotImplementedError

    def catalog_snapshot(self, now_ms: int) -> object:
        raise NotImplementedError

    def plant_route(self, route: m.CapabilityRoute) -> None:
        raise NotImplementedError

    # -- read-backs ------------------------------------------------------------------------

    def observe(self) -> Observation:
        instances: dict[str, m.SagaInstance] = {}
        for row in (
            self._call(lambda: self.host.call("list_instances", namespace=self.ns, tenant=w.KEY.tenant))[
                "instances"
            ]
            + self._call(
                lambda: self.host.call("list_instances", namespace=self.ns, tenant=w.UPLOAD_KEY.tenant)
            )["instances"]
        ):
            instances[row["saga_id"]] = self._instance(row)
        outbox = {}
        for row in self._rows("orchestrator"):
            command = self._command(row.envelope)
            outbox[command.command_id] = command.command_id in self.published
        return Observation(instances, (), outbox, {})

    def _instance(self, row: Mapping[str, Any]) -> m.SagaInstance:
        status = _STATUS.get(str(row["status"]))
        if status is None:
            raise Violation(
                "S-STEP-08", "a saga in a status the model has no name for", {"status": str(row["status"])}
            )
        artifact = self._artifact(row["tenant"], row["workflow"], row["definition_version"])
        return m.SagaInstance(
            saga_id=str(row["saga_id"]),
            definition=artifact.key,
            definition_digest=m.definition_digest(artifact),
            start_digest="",
            business_key=str(row.get("business_key", "")),
            status=status,
            steps=(),
            awaiting=None,
            revision=0,
            first_payload=m.SagaPayload(b"", m.JSON_CONTRACT),
        )

    def observe_catalog(self) -> CatalogObservation:
        """Every definition key the world names, read back one by one (nasaga lists only the
        loadable ones in its dynamic catalog)."""
        keys = {w.KEY, w.UPLOAD_KEY, w.SPARE_KEY, w.CONFLICT.key, *(a.key for a in w.INVALID)}
        lifecycles: dict[m.DefinitionKey, m.Lifecycle] = {}
        for key in sorted(keys, key=repr):
            body = self._call(
                lambda key=key: self.host.call(
                    "load_definition",
                    namespace=self.ns,
                    tenant=key.tenant,
                    workflow=key.workflow,
                    version=key.version,
                )
            )
            record = body.get("record")
            if record is not None:
                lifecycles[key] = m.Lifecycle(str(record["lifecycle"]).lower())
        return CatalogObservation({k: ("", b"") for k in lifecycles}, lifecycles, {})

    def observe_participant(self, owner: str) -> ParticipantObservation:
        rows = self._call(lambda: self.host.effects(self.ns, owner))
        effects = []
        for row in rows:
            if row["decision"] != "succeeded":
                continue
            artifact = self._artifact(*_key(row)) if "workflow" in row else self._artifact_of(row["saga_id"])
            index = [s.name for s in artifact.steps].index(row["step"])
            phase = _PHASE[row["phase"]]
            # A resolve that confirms success confirms the execute effect (model: _participant._plan).
            target = m.Phase.EXECUTE if phase is m.Phase.RESOLVE else phase
            effects.append(m.effect_id_for(str(row["saga_id"]), index, target))
        results = tuple(self._result(row.envelope) for row in self._rows(owner))
        return ParticipantObservation(tuple(effects), results)

    def _artifact_of(self, saga_id: str) -> m.DefinitionArtifact:
        for key, artifact in self.artifacts.items():
            for business_key in (*w.BUSINESS_KEYS, w.OVER_QUOTA_KEY, *w.UPLOAD_KEYS):
                if m.saga_id_for(key.tenant, key.workflow, business_key) == saga_id:
                    return artifact
        raise Violation(
            "S-PART-01", "a business fact for a saga the harness never started", {"saga_id": saga_id}
        )

    def result_claimed(self, message_id: str) -> bool:
        raw = self.results.get(message_id)
        if raw is None:
            return False
        claims = self._call(lambda: self.host.call("read_inbox", namespace=self.ns, role="orchestrator"))[
            "claims"
        ]
        return any(c["message_id"] == raw["event_id"] for c in claims)

    def close(self) -> None:
        if self.host.alive():
            try:
                self.host.close_namespace(self.ns, drop=True)
            except NasagaHostError as exc:
                if exc.is_environment:
                    raise HarnessEnvironmentError(f"the nasaga host failed: {exc}") from exc


def _key(row: Mapping[str, Any]) -> tuple[str, str, int]:
    return str(row["tenant_id"]), str(row["workflow"]), int(row["definition_version"])


def _payload(envelope: Mapping[str, Any], artifact: m.DefinitionArtifact) -> m.SagaPayload | None:
    raw = envelope.get("raw_payload")
    if raw is not None:
        contract = m.PayloadContract(str(raw["content_type"]), raw.get("schema_id") or None)
        data = bytes.fromhex(raw["body_hex"]) if "body_hex" in raw else str(raw.get("body_text", "")).encode()
        return m.SagaPayload(data, contract)
    payload = envelope.get("payload")
    if payload is None:
        return None
    return m.SagaPayload(json.dumps(payload, separators=(",", ":")).encode(), m.JSON_CONTRACT)


def open_nasaga_pg(namespace: str, fates: FateHook, stats: SuiteStats) -> NasagaRuntime:
    del fates  # COMMIT fates are not injectable on nasaga (CAPABILITIES)
    return NasagaRuntime("postgres", namespace, stats)


def open_nasaga_mysql(namespace: str, fates: FateHook, stats: SuiteStats) -> NasagaRuntime:
    del fates
    return NasagaRuntime("mysql", namespace, stats)
