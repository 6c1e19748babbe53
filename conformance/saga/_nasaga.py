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

from conformance._machine import SuiteStats
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._nasaga_crash import CrashSwitch, HostKilled
from conformance.saga._nasaga_management import NasagaManagement
from conformance.saga._nasaga_metrics import observation, process_samples
from conformance.saga._nasaga_race import RaceReport, race
from conformance.saga._nasaga_terms import (
    CAPABILITIES,
    PHASE,
    START_REFUSALS,
    STATUS,
    Seen,
    command_of,
    decision_for,
    definition_key,
    kind_of,
    namespace_config,
    nasaga_definition,
    project,
    result_of,
)
from conformance.saga._nasaga_undriven import NasagaUndriven
from conformance.saga._port import (
    CatalogObservation,
    FateHook,
    MetricsObservation,
    Observation,
    ParticipantObservation,
)
from impls.nasaga import Engine, NasagaHost, NasagaHostError, OutboxRow
from model import saga as m

_HOSTS: dict[tuple[str, str | None], NasagaHost] = {}
#: nasaga's answers that say a COMMIT was sent and its outcome is unknown (S-TX-02).
UNCERTAIN = frozenset({"transaction.commit_uncertain", "backend.outcome_unknown"})


def _host(engine: Engine, dsn: str | None) -> NasagaHost:
    """One host process per engine and endpoint per run; it never outlives the run (atexit)."""
    host = _HOSTS.get((engine, dsn))
    if host is None or not host.alive():
        try:
            host = NasagaHost.start(engine, dsn=dsn, timeout=60.0)
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"the nasaga host did not start: {exc}") from exc
        if not _HOSTS:
            atexit.register(_close_hosts)
        _HOSTS[(engine, dsn)] = host
    return host


def _close_hosts() -> None:
    for host in _HOSTS.values():
        host.close()
    _HOSTS.clear()


class NasagaRuntime(NasagaUndriven, NasagaManagement):
    """nasaga's Orchestrator and one participant runtime per owner, on one namespace."""

    capabilities = CAPABILITIES
    #: Business keys a machine starts beyond the world's (nasaga-kafka's rebalance keys).
    extra_keys: tuple[str, ...] = ()

    def __init__(
        self,
        engine: Engine,
        namespace: str,
        stats: SuiteStats,
        fates: FateHook,
        dsn: str | None = None,
        quota: bool = False,
    ) -> None:
        self.host = _host(engine, dsn)
        self.ns = f"n{namespace}"[:40]
        self.stats = stats
        #: Asked just before each unit's call: behind the fault proxy it arms the proxy for the
        #: unit's COMMIT (``_wire.SagaWireRules``); nasaga's fates are otherwise its own.
        self.fates = fates
        config = namespace_config(quota)  # ``quota``: the saga suite's tenant caps (S-START-13)
        self.crash = CrashSwitch(self.host, self.ns, w.OWNERS, config)
        try:
            self._call(lambda: self.host.open_namespace(self.ns, list(w.OWNERS), config=config))
            for tenant in config.get("tenant_quotas", {}):  # capped: a start needs a reconciled ledger (N-10)
                self._call(lambda t=tenant: self.host.reconcile_tenant_quota(self.ns, t))
        except NasagaHostError as exc:
            # e.g. nasaga-mysql refusing MariaDB's schema (docs/nasaga-findings.md N-02): no verdict.
            raise HarnessEnvironmentError(f"nasaga could not open a namespace on {engine}: {exc}") from exc
        # The process-wide latency buckets and counters before this example (S-OBS-02, -03); taken
        # again when a killed host's successor attached, whose process counts from zero.
        self.baseline: Mapping[str, float] = {}
        self._rebase()
        self.crash.resumed = self._rebase
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

    def _unit(self, unit: str, body: Any) -> tuple[Any, str | None]:
        """One unit of work (a start, a delivery): its COMMIT may meet the wire, its host the
        armed crash point (``_nasaga_crash``); an uncertain COMMIT is the model's ``OutcomeUnknown``."""
        self.fates(unit)
        answer, refused = self._refusal(lambda: self.crash.run(body))
        if refused in UNCERTAIN:
            return None, "OutcomeUnknown"
        return answer, refused

    # -- translation -----------------------------------------------------------------------

    def _artifact(self, tenant: str, workflow: str, version: int) -> m.DefinitionArtifact:
        return self.artifacts[m.DefinitionKey(tenant, workflow, version)]

    def _command(self, envelope: Mapping[str, Any]) -> m.CommandEnvelope:
        return command_of(envelope, self.artifacts)

    def _result(self, envelope: Mapping[str, Any]) -> m.ResultEnvelope:
        return result_of(envelope, self.artifacts)

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
        lifecycle = self._lifecycle(key)
        if lifecycle is None:
            return Seen("UnknownDefinition")
        return Seen("CatalogEntry", (repr(key), lifecycle))

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
        body, refused = self._unit(
            f"start {saga_id}",
            lambda extra: self.host.start_saga(
                self.ns,
                saga_id=saga_id,
                tenant=key.tenant,
                workflow=key.workflow,
                version=key.version,
                business_key=request.business_key,
                now_ms=now_ms,
                **args,
                **extra,
            ),
        )
        if isinstance(body, HostKilled):
            return body
        if refused is not None:
            return Seen(START_REFUSALS.get(refused, refused))
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
        body, refused = self._unit(
            f"command {command.command_id}",
            lambda extra: self.host.deliver_command(
                self.ns, owner, envelope, decision_for(command.phase, decision), producer=producer, **extra
            ),
        )
        if isinstance(body, HostKilled):
            return body
        if refused == "step.retryable":
            return Seen("not-committed")
        if refused is not None:
            return Seen("refused") if refused.startswith("command.") else Seen(refused)
        if body.handled == "duplicate":
            return Seen("duplicate")
        kind = kind_of(command.phase, str(body.status))
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
        if envelope.definition_digest != m.definition_digest(self._artifact(*definition_key(raw))):
            raw["definition_digest"] = envelope.definition_digest  # the forged digest, as sent
        body, refused = self._unit(
            f"result {envelope.message_id}",
            lambda extra: self.host.deliver_result(self.ns, raw, now_ms=now_ms, producer=producer, **extra),
        )
        if isinstance(body, HostKilled):
            return body
        if refused is not None:
            if refused == "result.paused":
                return Seen("deferred")  # rolled back, redelivered after resume (S-MGT-05)
            return Seen("refused") if refused.startswith("result.") else Seen(refused)
        return Seen("duplicate") if body.outcome == "duplicate" else Seen("accepted")

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
        status = STATUS.get(str(row["status"]))
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
            lifecycle = self._lifecycle(key)
            if lifecycle is not None:
                lifecycles[key] = m.Lifecycle(lifecycle)
        return CatalogObservation({k: ("", b"") for k in lifecycles}, lifecycles, {})

    def observe_participant(self, owner: str) -> ParticipantObservation:
        rows = self._call(lambda: self.host.effects(self.ns, owner))
        effects = []
        for row in rows:
            if row["decision"] != "succeeded":
                continue
            artifact = (
                self._artifact(*definition_key(row))
                if "workflow" in row
                else self._artifact_of(row["saga_id"])
            )
            index = [s.name for s in artifact.steps].index(row["step"])
            phase = PHASE[row["phase"]]
            # A resolve that confirms success confirms the execute effect (model: _participant._plan).
            target = m.Phase.EXECUTE if phase is m.Phase.RESOLVE else phase
            effects.append(m.effect_id_for(str(row["saga_id"]), index, target))
        results = tuple(self._result(row.envelope) for row in self._rows(owner))
        return ParticipantObservation(tuple(effects), results)

    def read_metrics(self) -> MetricsObservation:
        """nasaga's rendered operational metrics and its latency snapshot (``_nasaga_metrics``).
        ``now_ms`` only decides ``nasaga_due_timer``, which is not compared (N-42)."""
        return observation(self._call(lambda: self.host.read_metrics(self.ns, now_ms=0)), self.baseline)

    def _rebase(self) -> None:
        self.baseline = process_samples(self._call(lambda: self.host.read_metrics(self.ns, now_ms=0)))

    def process_epoch(self) -> int:
        return self.crash.kills  # the host processes killed so far

    def transaction_log(self) -> None:
        return None  # nasaga owns its connections and has no retry loop: one call, one attempt

    def _artifact_of(self, saga_id: str) -> m.DefinitionArtifact:
        for key, artifact in self.artifacts.items():
            for business_key in (*w.BUSINESS_KEYS, w.OVER_QUOTA_KEY, *w.UPLOAD_KEYS, *self.extra_keys):
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

    def race_timers(self, same_owner: bool, takeover: bool) -> RaceReport:
        """Two more hosts race real timers on a namespace of their own (``_nasaga_race``)."""
        return race(self.host.engine, self.host.dsn, same_owner, takeover)

    def close(self) -> None:
        self.crash.close()
        if self.host.alive():
            try:
                self.host.close_namespace(self.ns, drop=True)
            except NasagaHostError as exc:
                if exc.is_environment:
                    raise HarnessEnvironmentError(f"the nasaga host failed: {exc}") from exc


def open_nasaga_pg(
    namespace: str, fates: FateHook, stats: SuiteStats, endpoint: str | None = None
) -> NasagaRuntime:
    """``endpoint``: the DSN the host reaches PostgreSQL at (the fault proxy's, ``_target``)."""
    return NasagaRuntime("postgres", namespace, stats, fates, endpoint, quota=True)


def open_nasaga_mysql(
    namespace: str, fates: FateHook, stats: SuiteStats, endpoint: str | None = None
) -> NasagaRuntime:
    return NasagaRuntime("mysql", namespace, stats, fates, endpoint, quota=True)
