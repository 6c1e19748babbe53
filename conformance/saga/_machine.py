"""Runtime level: orchestrator + participants + timer workers over one backend, the model beside.

Every rule drives the real runtime (``impls.saga``) and the model (``model.saga``) with the same
input and the same injected fate, compares the outcomes value for value, and ``after_step``
reads the backend's rows raw and compares them with the model's state: instances and journal
(S-ORCH-02, S-STEP-08), command outbox (S-ORCH-02), timers and their fences (S-TIMER-01),
each participant's gate, business facts and result outbox (S-PART-01, S-PART-03). At
quiescence the world is driven without faults until nothing is in flight, and every saga must
be Completed, Compensated or awaiting manual intervention (S-STEP-07).

Faults are rules and arguments: a COMMIT that rolls back or whose answer is lost (``fate``), an
ACK lost after a committed delivery (the envelope stays on the wire and is redelivered), a
relay that dies between publishing and recording it (duplicates), envelopes picked in any
order, forged results, a participant effect left uncertain, a timer worker that loses its
lease to another while it still holds its token, lifecycle moves racing starts. Each honours
the run's fault filter (``--faults``) as the commit machines' ``arm_*`` rules do: a fault the
filter does not allow is not injected (the step still runs, fault-free), so a replay with the
same filter runs the same program. Duplicates are a consequence of other faults (lost ACKs,
relay crashes); without ``duplicate`` the transport drops an envelope already absorbed instead
of delivering it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._faults import FaultKind
from conformance._machine import ConformanceMachine, step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._faults import (
    ACK_LOST,
    COMMIT_ROLLED_BACK,
    COMMIT_UNKNOWN,
    DUPLICATE,
    EFFECT_UNCERTAIN,
    FORGED,
    LEASE_LOST,
    LIFECYCLE_RACE,
    RELAY_CRASH,
    REORDER,
    STALE_GENERATION,
)
from conformance.saga._target import SagaTarget, TimedBackend
from impls.saga import Orchestrator, Participant, SagaBackend
from impls.saga._convert import instance_from_row, journal_from_row, timer_from_row
from impls.saga._routes import capability_key_of, route_from_row, route_to_row
from impls.saga._unit import Abort, Commit, read_only, run_unit
from model import saga as m

FATES = {
    "committed": m.CommitFate.COMMITTED,
    "rolled_back": m.CommitFate.ROLLED_BACK,
    "unknown_applied": m.CommitFate.UNKNOWN_APPLIED,
    "unknown_not_applied": m.CommitFate.UNKNOWN_NOT_APPLIED,
}
fates = st.sampled_from(["committed"] * 5 + ["rolled_back", "unknown_applied", "unknown_not_applied"])
DECISIONS = {d.value: d for d in m.Decision}
decisions = st.sampled_from(["succeed"] * 3 + ["reject", "unknown", "unknown", "transient_failure"])
indexes = st.integers(0, 7)
# Faults drawn as arguments of the delivery rules too, not only as rules of their own: swarm
# testing switches whole rules off for an example, and the delivery rules are the ones that
# every example with a saga in it keeps on, so rare faults stay reachable in every profile.
relays = st.sampled_from(["ok", "ok", "ok", "crash"])
forgeries = st.sampled_from(["none", "none", "none", "owner", "digest", "producer"])
#: At quiescence the fake services answer the charge (step 1, executed) by business key, so
#: every terminal status is reached through its legitimate path in every example: k1 succeeds
#: (Completed), k2 is rejected (reserve compensated: Compensated), k3 stays unconfirmable and
#: the step's policy asks for manual intervention (Awaiting manual intervention).
SETTLED_CHARGE = {
    m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key): decision
    for key, decision in zip(w.BUSINESS_KEYS, ("succeed", "reject", "unknown"), strict=True)
}

#: How a start gives its payload (S-START-10, S-START-11): JSON bytes, a raw payload with the
#: JSON contract, a raw non-JSON payload with or without its schema, both forms, neither.
PAYLOAD_FORMS: dict[str, Callable[[bytes], tuple[bytes | None, m.SagaPayload | None]]] = {
    "json": lambda data: (data, None),
    "raw_json": lambda data: (None, m.SagaPayload(data, m.JSON_CONTRACT)),
    "raw_schema": lambda _data: (None, m.SagaPayload(w.RAW_BYTES, w.UPLOAD_CONTRACT)),
    "raw_no_schema": lambda _data: (
        None,
        m.SagaPayload(w.RAW_BYTES, m.PayloadContract(w.UPLOAD_CONTRACT.media_type)),
    ),
    "both": lambda data: (data, m.SagaPayload(data, m.JSON_CONTRACT)),
    "none": lambda _data: (None, None),
}
#: The rule a transport-contract refusal breaks (S-ROUTE-05..08; the credentials digest: S-ROUTE-01).
VIOLATION_RULES = {
    m.TransportViolation.HTTP_ORIGIN_NOT_BARE: "S-ROUTE-05",
    m.TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL: "S-ROUTE-05",
    m.TransportViolation.GRPC_ORIGIN_NOT_BARE_HTTPS: "S-ROUTE-06",
    m.TransportViolation.KAFKA_TOPIC_INVALID: "S-ROUTE-07",
    m.TransportViolation.REDIS_STREAM_KEY_INVALID: "S-ROUTE-07",
    m.TransportViolation.PATH_ON_NON_HTTP: "S-ROUTE-08",
    m.TransportViolation.CREDENTIALS_DIGEST_INVALID: "S-ROUTE-01",
}
shapes = st.sampled_from(
    list(range(w.VALID_SHAPES)) * 2 + list(range(w.VALID_SHAPES, len(w.DESCRIPTOR_SHAPES)))
)
foreign = st.sampled_from([False] * 5 + [True])


def _start_rule(expected: object, joined: bool) -> str:
    if joined:
        return "S-START-06"
    if isinstance(expected, m.PayloadRejected):
        exactly_one = expected.problem in (m.PayloadProblem.BOTH_GIVEN, m.PayloadProblem.NONE_GIVEN)
        return "S-START-10" if exactly_one else "S-START-11"
    rules = {m.QuotaExhausted: "S-START-13", m.DefinitionNotStartable: "S-CAT-05", m.Started: "S-START-01"}
    return rules.get(type(expected), "S-START-01" if isinstance(expected, m.AlreadyExists) else "S-START-08")


def _route_rule(expected: object) -> str:
    if isinstance(expected, m.RouteInvalid):
        return VIOLATION_RULES[expected.violation]
    rules = {
        m.DefinitionNotLoadable: "S-CAT-09",
        m.LeaseExpired: "S-ROUTE-09",
        m.StaleGeneration: "S-ROUTE-02",
        m.CapabilityRegistered: "S-ROUTE-02",
        m.CapabilityRenewed: "S-ROUTE-09",
    }
    return rules.get(type(expected), "S-ROUTE-01")


def _shape_of(descriptor: m.CapabilityDescriptor) -> int:
    shape = (descriptor.transport, descriptor.address, descriptor.base_path, descriptor.credentials_digest)
    return w.DESCRIPTOR_SHAPES.index(shape) if shape in w.DESCRIPTOR_SHAPES else 0


def _key_order(key: m.CapabilityKey) -> tuple[str, str, int, int, str, str]:
    d = key.definition
    return (d.tenant, d.workflow, d.version, key.step_index, key.owner, key.replica)


def _unwrapped(method: Any) -> Any:
    # Quiescence drives the rules' bodies without recording them as program steps.
    while hasattr(method, "__wrapped__"):
        method = method.__wrapped__
    return method


def show(value: Any) -> str:
    return repr(value)[:600]


class SagaMachine(ConformanceMachine):
    def __init__(self) -> None:
        super().__init__()
        target: SagaTarget = self.context.target
        ns = self.context.new_namespace()
        self.fate = m.CommitFate.COMMITTED
        self.backends: list[SagaBackend] = []
        self.orch_backend = self._open(target, f"{ns}o")
        self.orch = Orchestrator(
            self.orch_backend, frozenset(w.OWNERS), quota_limit=w.QUOTA_LIMIT, fates=self._fate
        )
        self.parts = {
            owner: Participant(
                self._open(target, f"{ns}{owner}"), w.participant_config(owner), fates=self._fate
            )
            for owner in w.OWNERS
        }
        self.model = m.OrchestratorStore(trusted_producers=frozenset(w.OWNERS), quota_limit=w.QUOTA_LIMIT)
        self.model_parts = {owner: m.ParticipantState(w.participant_config(owner)) for owner in w.OWNERS}
        self.results_published: set[str] = set()
        self.wire = w.Wire()
        self.now = 0
        self.leases: dict[str, tuple[str, int]] = {}
        #: Route generations each replica learnt from its receipts, oldest first.
        self.generations: dict[m.CapabilityKey, list[int]] = {}
        #: Only catalog and route steps write definition and capability rows; the after-step
        #: comparison of those rows runs after them (and at quiescence), not after every step.
        self.catalog_touched = True
        self._catalog_setup()

    def _open(self, target: SagaTarget, namespace: str) -> SagaBackend:
        backend = target.open(namespace)
        self.backends.append(backend)
        return cast(SagaBackend, TimedBackend(backend, self.context.stats))

    def _fate(self, _unit: str) -> m.CommitFate:
        fate, self.fate = self.fate, m.CommitFate.COMMITTED
        return fate

    def _allows(self, kind: FaultKind) -> bool:
        return self.context.faults.allows(kind.name)

    def _set_fate(self, name: str) -> m.CommitFate:
        fate = FATES[name]
        kind = {m.CommitFate.COMMITTED: None, m.CommitFate.ROLLED_BACK: COMMIT_ROLLED_BACK}.get(
            fate, COMMIT_UNKNOWN
        )
        if kind is not None and not self._allows(kind):
            fate = m.CommitFate.COMMITTED
        elif kind is not None:
            self.context.inject(kind.name)
        self.fate = fate
        return fate

    def _catalog_setup(self) -> None:
        request = m.PublishDefinition(w.ARTIFACT, w.DIGEST)
        self.model, expected = m.publish_definition(self.model, request)
        self.expect("S-CAT-02", expected, self.orch.publish_definition(w.ARTIFACT, w.DIGEST))
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE)
        self.model, expected2 = m.change_lifecycle(self.model, change, self.now)
        self.expect("S-CAT-04", expected2, self.orch.change_lifecycle(change, self.now))
        # The upload definition stays a candidate until a ``catalog`` rule activates it.
        upload = m.PublishDefinition(w.UPLOAD, w.UPLOAD_DIGEST)
        self.model, expected3 = m.publish_definition(self.model, upload)
        self.expect("S-CAT-02", expected3, self.orch.publish_definition(w.UPLOAD, w.UPLOAD_DIGEST))

    def expect(self, rule_id: str, expected: object, actual: object) -> None:
        self.note(f"model: {show(expected)}")
        self.note(f"runtime: {show(actual)}")
        if expected != actual:
            raise Violation(
                rule_id,
                "the runtime's outcome differs from the model's",
                {"expected": show(expected), "actual": show(actual)},
            )

    def close(self) -> None:
        for backend in self.backends:
            backend.close()

    # -- starts and catalog ---------------------------------------------------------------

    @initialize(key=indexes)
    @step
    def first_start(self, key: int) -> None:
        """Every example opens with one saga admitted, so deliveries have work from the first step
        (swarm testing may switch ``start`` off for a whole example)."""
        self._start(key, 0, -1, "committed")

    @rule(
        key=indexes,
        payload=indexes,
        revoked=st.sampled_from([-1, -1, -1, 0, 1]),
        fate=fates,
        definition=st.sampled_from(["order"] * 4 + ["upload"]),
        form=st.sampled_from(["declared"] * 6 + list(PAYLOAD_FORMS)),
        joined=st.sampled_from([False, False, False, True]),
    )
    @step
    def start(
        self,
        key: int,
        payload: int,
        revoked: int,
        fate: str,
        definition: str = "order",
        form: str = "declared",
        joined: bool = False,
    ) -> None:
        self._start(key, payload, revoked, fate, definition, form, joined)

    def _start(
        self,
        key: int,
        payload: int,
        revoked: int,
        fate: str,
        definition: str = "order",
        form: str = "declared",
        joined: bool = False,
    ) -> None:
        """A start beside the model (S-START-01..13, S-CAT-05, S-CAT-08).

        ``definition`` picks the order saga or the upload one (a candidate until activated,
        then admitting its schema-declared non-JSON input); ``form`` how the payload is given
        (``declared``: the definition's own contract); the fourth order key is tried only once
        the tenant's quota is full; ``joined`` runs the start inside a transaction the harness
        owns as the host (S-START-06).
        """
        if definition == "upload":
            def_key, business_key = w.UPLOAD_KEY, w.UPLOAD_KEYS[key % len(w.UPLOAD_KEYS)]
        elif key % 4 == 3 and self.model.quota_used.get(w.KEY.tenant, 0) >= w.QUOTA_LIMIT:
            def_key, business_key = w.KEY, w.OVER_QUOTA_KEY
        else:
            def_key, business_key = w.KEY, w.BUSINESS_KEYS[key % len(w.BUSINESS_KEYS)]
        if form == "declared":
            form = "raw_schema" if definition == "upload" else "json"
        json_payload, raw_payload = PAYLOAD_FORMS[form](w.PAYLOADS[payload % len(w.PAYLOADS)])
        request = m.StartSaga(def_key, business_key, json_payload=json_payload, raw_payload=raw_payload)
        eligibility = m.Eligibility(None if revoked < 0 else revoked)
        commit = self._set_fate(fate)
        attempt = m.StartAttempt(
            request, self.now, eligibility=eligibility, joined_outer=joined, commit=commit
        )
        self.model, expected = m.start_saga(self.model, attempt)
        if joined:
            actual = self._start_joined(request, eligibility)
        else:
            actual = self.orch.start_saga(request, self.now, eligibility.holds_at)
        self.fate = m.CommitFate.COMMITTED
        self.expect(_start_rule(expected, joined), expected, actual)
        self.context.reach(f"start:{type(expected).__name__}")
        if joined and revoked == 1 and not isinstance(expected, m.EligibilityRevoked):
            self.context.reach("joined-start-left-last-gate")
        if isinstance(expected, m.Started) and raw_payload is not None and form == "raw_schema":
            self.context.reach("non-json-start-admitted")

    def _start_joined(self, request: m.StartSaga, eligibility: m.Eligibility) -> object:
        """The harness is the host whose transaction the start joins: it owns the COMMIT (under
        the injected fate) and the gate in front of it, which it leaves open (S-START-06)."""

        def outer(tx: Any) -> Commit[m.StartOutcome] | Abort[m.StartOutcome]:
            outcome = self.orch.start_saga_joined(tx, request, self.now, eligibility.holds_at)
            return Commit(outcome) if isinstance(outcome, m.Started) else Abort(outcome)

        return run_unit(self.orch_backend, "host", outer, self._fate)

    @rule(action=st.sampled_from(["activate"] * 8 + ["deprecate", "retire"]))
    @step
    def lifecycle(self, action: str) -> None:
        if not self._allows(LIFECYCLE_RACE):
            return
        if action != "activate" and len(self.model.instances) < 2:
            action = "activate"  # keep the definition startable until some sagas run
        self.context.inject(LIFECYCLE_RACE.name)
        self.catalog_touched = True
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction(action))
        self.model, expected = m.change_lifecycle(self.model, change, self.now)
        self.expect(
            "S-CAT-07" if action == "retire" else "S-CAT-04",
            expected,
            self.orch.change_lifecycle(change, self.now),
        )

    @rule(index=indexes)
    @step
    def release_instance(self, index: int) -> None:
        ids = sorted(self.model.instances)
        if not ids:
            return
        saga_id = ids[index % len(ids)]
        self.model, expected = m.release_instance(self.model, saga_id)
        self.expect("S-CAT-11", expected, self.orch.release_instance(saga_id))

    # -- catalog publications and capability routes -------------------------------------

    @rule(
        op=st.sampled_from(
            ["republish", "republish", "invalid", "activate_upload", "plant_invalid", "query"]
        ),
        index=indexes,
    )
    @step
    def catalog(self, op: str, index: int) -> None:
        """Publications the catalog answers idempotently or refuses (S-DEF-01, S-CAT-03), the
        upload definition's activation (S-CAT-04, S-ROUTE-04) and queries in any lifecycle (S-CAT-10).

        ``republish`` presents the order definition again, a conflicting one under its key, or the
        upload definition (a candidate or later); ``plant_invalid`` writes an invalid route row on
        the candidate and tries to activate it.
        """
        self.catalog_touched = True
        if op in ("republish", "invalid"):
            artifact = (
                (w.ARTIFACT, w.CONFLICT, w.UPLOAD)[index % 3] if op == "republish" else w.INVALID[index % 5]
            )
            digest = m.definition_digest(artifact)
            self.model, expected = m.publish_definition(self.model, m.PublishDefinition(artifact, digest))
            rule_id = "S-DEF-01" if op == "invalid" else "S-CAT-03"
            self.expect(rule_id, expected, self.orch.publish_definition(artifact, digest))
            self.context.reach(f"publish:{type(expected).__name__}")
        elif op == "activate_upload":
            self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        elif op == "plant_invalid":
            if self._plant_invalid_route(index):
                self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        else:
            key = (w.KEY, w.UPLOAD_KEY, w.SPARE_KEY)[index % 3]
            self.expect("S-CAT-10", m.query_definition(self.model, key), self.orch.query_definition(key))

    def _lifecycle(self, key: m.DefinitionKey, action: m.LifecycleAction) -> object:
        self.catalog_touched = True
        change = m.ChangeLifecycle(key, action)
        self.model, expected = m.change_lifecycle(self.model, change, self.now)
        rule_id = {m.ActivationBlocked: "S-ROUTE-04", m.RetirementBlocked: "S-CAT-07"}.get(
            type(expected), "S-CAT-04"
        )
        self.expect(rule_id, expected, self.orch.change_lifecycle(change, self.now))
        if isinstance(expected, m.ActivationBlocked):
            self.context.reach("activation-blocked")
        return expected

    def _plant_invalid_route(self, index: int) -> bool:
        """A route row written around ``register_capability`` (say, by an older release) on the
        candidate: its activation must refuse while the row breaks the transport contract (S-ROUTE-04)."""
        entry = self.model.catalog.entries.get(w.UPLOAD_KEY)
        if entry is None or entry.lifecycle is not m.Lifecycle.CANDIDATE:
            return False
        key = m.CapabilityKey(w.UPLOAD_KEY, 0, "p0", w.REPLICAS[index % len(w.REPLICAS)])
        existing = self.model.routes.routes.get(key)
        generation = 1 if existing is None else existing.generation + 1
        route = m.CapabilityRoute(w.descriptor(key, w.VALID_SHAPES), generation, self.now + w.ROUTE_LEASE_MS)
        self.model = attrs.evolve(self.model, routes=m.RouteTable({**self.model.routes.routes, key: route}))
        tx = self.orch_backend.begin()
        tx.upsert_capability(route_to_row(route))
        tx.commit()
        return True

    @rule(
        definition=st.sampled_from(["order", "order", "order", "upload"]),
        step_index=st.sampled_from([0, 0, 0, 1, 2]),
        replica=st.sampled_from(w.REPLICAS),
        shape=shapes,
        stranger=foreign,
        fate=fates,
        pair=st.booleans(),
    )
    @step
    def register_route(
        self,
        definition: str,
        step_index: int,
        replica: str,
        shape: int,
        stranger: bool,
        fate: str,
        pair: bool,
    ) -> None:
        """A replica (re-)registers its route (S-ROUTE-01..08, S-CAT-09); a lost answer is re-tried.

        With ``pair`` the step's other replica registers next, at the next valid address: two
        distinct targets of one step, which single-route selection must not collapse (S-ROUTE-12).
        """
        key = self._capability_key(definition, step_index, replica)
        self._register(key, shape, self._principal(key, stranger), w.ROUTE_LEASE_MS, fate)
        if pair:
            other = attrs.evolve(key, replica=w.REPLICAS[1 - w.REPLICAS.index(replica)])
            self._register(other, (shape + 1) % w.VALID_SHAPES, other.owner, w.ROUTE_LEASE_MS, "committed")

    def _capability_key(self, definition: str, step_index: int, replica: str) -> m.CapabilityKey:
        def_key, artifact = w.DEFINITIONS[definition]
        owner = artifact.steps[step_index].owner if step_index < len(artifact.steps) else w.OWNERS[0]
        return m.CapabilityKey(def_key, step_index, owner, replica)

    def _principal(self, key: m.CapabilityKey, stranger: bool) -> str:
        return w.OWNERS[1 - w.OWNERS.index(key.owner)] if stranger else key.owner

    def _route_write(
        self,
        label: str,
        model_op: Callable[[Any, Any], tuple[Any, Any]],
        runtime_op: Callable[[Any], object],
        request: object,
        applied: type,
        fate: str,
    ) -> object:
        """One registry write beside the model under ``fate``: the model's outcome settled as the
        database settles it, compared with the runtime's (S-ROUTE-02, S-ROUTE-03, S-ROUTE-09)."""
        self.catalog_touched = True
        commit = self._set_fate(fate)
        after, outcome = model_op(self.model, request)
        expected: object = outcome
        if isinstance(outcome, applied):
            self.model, expected = m.settle(self.model, after, commit, outcome)
        actual = runtime_op(request)
        self.fate = m.CommitFate.COMMITTED
        self.expect(_route_rule(expected), expected, actual)
        self.context.reach(f"{label}:{type(expected).__name__}")
        return expected

    def _register(self, key: m.CapabilityKey, shape: int, principal: str, lease_ms: int, fate: str) -> None:
        # The claimed generation is carried and must be ignored (S-ROUTE-03).
        request = m.RegisterCapability(w.descriptor(key, shape), principal, lease_ms, self.now, 7)
        expected = self._route_write(
            "register",
            m.register_capability,
            self.orch.register_capability,
            request,
            m.CapabilityRegistered,
            fate,
        )
        if isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            # The replica never learnt its generation: it reports the same content again, which must
            # converge on what the catalog committed, the same generation if it applied (S-ROUTE-03).
            self.model, expected = m.register_capability(self.model, request)
            self.expect("S-ROUTE-03", expected, self.orch.register_capability(request))
            if isinstance(expected, m.CapabilityRegistered) and not expected.fresh:
                self.context.reach("route-retry-converged")
        if isinstance(expected, m.CapabilityRegistered):
            held = self.generations.setdefault(key, [])
            if expected.generation not in held:
                held.append(expected.generation)

    @rule(index=indexes, stale=st.booleans(), stranger=foreign, fate=fates)
    @step
    def renew_route(self, index: int, stale: bool, stranger: bool, fate: str) -> None:
        """A replica renews its lease with the generation it holds (S-ROUTE-02, S-ROUTE-09, S-CAT-09).

        With ``stale`` it is a replica whose generation a re-registration superseded: fenced.
        """
        keys = sorted(self.generations, key=_key_order)
        if not keys:
            return
        key = keys[index % len(keys)]
        held = self.generations[key]
        if stale and self._allows(STALE_GENERATION):
            if len(held) < 2:
                # The replica restarts at another address: a new generation for new content. Its old
                # incarnation still holds the previous generation and keeps renewing.
                route = self.model.routes.routes[key]
                shape = (_shape_of(route.descriptor) + 1) % w.VALID_SHAPES
                self._register(key, shape, key.owner, w.ROUTE_LEASE_MS, "committed")
            if len(held) >= 2:
                self.context.inject(STALE_GENERATION.name)
                self._renew(key, held[-2], self._principal(key, stranger), fate)
                return
        self._renew(key, held[-1], self._principal(key, stranger), fate)

    def _renew(self, key: m.CapabilityKey, generation: int, principal: str, fate: str) -> None:
        request = m.RenewCapability(key, generation, principal, w.ROUTE_LEASE_MS, self.now)
        expected = self._route_write(
            "renew", m.renew_capability, self.orch.renew_capability, request, m.CapabilityRenewed, fate
        )
        if isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            # Renewing again is safe: the lease only grows and the generation is unchanged.
            self.model, expected = m.renew_capability(self.model, request)
            self.expect("S-ROUTE-09", expected, self.orch.renew_capability(request))

    @rule(
        definition=st.sampled_from(["order", "order", "upload", "spare"]),
        step_index=st.integers(0, 1),
        read=st.sampled_from(["routes", "route", "snapshot"]),
    )
    @step
    def select_routes(self, definition: str, step_index: int, read: str) -> None:
        """Route selection or the catalog snapshot read beside the model (S-ROUTE-09..12)."""
        query = m.RouteQuery(w.DEFINITIONS[definition][0], step_index)
        if read == "routes":
            routes = m.select_capability_routes(self.model, query, self.now)
            self.expect("S-ROUTE-11", routes, self.orch.select_capability_routes(query, self.now))
            self.context.reach(f"select:{type(routes).__name__}")
        elif read == "route":
            single = m.select_capability_route(self.model, query, self.now)
            self.expect("S-ROUTE-12", single, self.orch.select_capability_route(query, self.now))
            self.context.reach(f"select-one:{type(single).__name__}")
        else:
            snapshot = m.catalog_snapshot(self.model, self.now)
            self.expect("S-ROUTE-10", snapshot, self.orch.catalog_snapshot(self.now))

    @rule()
    @step
    def retire_spare(self) -> None:
        """Walk the spare definition to retirement with a route on it, then try to route on it:
        a live lease blocks retirement until it runs out (S-CAT-07); a retired definition takes no
        registration or renewal (S-CAT-09) and its artifact stays queryable (S-CAT-10)."""
        key = m.CapabilityKey(w.SPARE_KEY, 0, w.SPARE.steps[0].owner, w.REPLICAS[0])
        if w.SPARE_KEY in self.model.catalog.entries:
            return  # walked once per example: the rest of the walk is the same every time
        self.model, published = m.publish_definition(self.model, m.PublishDefinition(w.SPARE, w.SPARE_DIGEST))
        self.expect("S-CAT-02", published, self.orch.publish_definition(w.SPARE, w.SPARE_DIGEST))
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.ACTIVATE)
        self._register(key, 0, key.owner, w.LEASE_MS, "committed")
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.DEPRECATE)
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.RETIRE)
        self.now += w.LEASE_MS  # the replica stopped renewing; its lease runs out
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.RETIRE)
        self._register(key, 1, key.owner, w.ROUTE_LEASE_MS, "committed")
        self._renew(key, self.generations.get(key, [1])[-1], key.owner, "committed")
        self.expect(
            "S-CAT-10", m.query_definition(self.model, w.SPARE_KEY), self.orch.query_definition(w.SPARE_KEY)
        )
        entry = self.model.catalog.entries[w.SPARE_KEY]
        if entry.lifecycle is m.Lifecycle.RETIRED:
            self.context.reach("retired-definition-touched")

    # -- transport -----------------------------------------------------------------------

    @rule(crash=st.booleans())
    @step
    def relay_commands(self, crash: bool) -> None:
        self._relay_commands(crash)

    def _relay_commands(self, crash: bool) -> None:
        crash = crash and self._allows(RELAY_CRASH)
        expected = m.pending_commands(self.model)
        actual = self.orch.pending_commands()
        self.expect("S-ORCH-02", expected, actual)
        for command in actual:
            self.wire.commands.append(command)
            if crash:
                self.context.inject(RELAY_CRASH.name)
                break  # died after publishing, before recording it: the next relay publishes again
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.orch.mark_command_published(command.command_id)

    @rule(index=indexes, decision=decisions, fate=fates, ack_lost=st.booleans(), relay=relays)
    @step
    def deliver_command(
        self, index: int, decision: str, fate: str, ack_lost: bool, relay: str = "ok"
    ) -> None:
        self._relay_commands(crash=relay == "crash")
        if not self.wire.commands:
            return
        position = self._pick(index, len(self.wire.commands))
        command = self.wire.commands[position]
        owner = command.owner
        chosen = DECISIONS[decision]
        if chosen is m.Decision.UNKNOWN:
            if self._allows(EFFECT_UNCERTAIN):
                self.context.inject(EFFECT_UNCERTAIN.name)
            else:
                chosen = m.Decision.SUCCEED
        _, probe = m.handle_command(
            self.model_parts[owner],
            m.CommandDelivery(command, w.ORCHESTRATOR, chosen, m.CommitFate.COMMITTED),
        )
        if isinstance(probe, m.DuplicateCommand) and not self._allows(DUPLICATE):
            self.wire.commands.pop(position)  # the transport drops what was already absorbed
            return
        commit = self._set_fate(fate)
        self.model_parts[owner], expected = m.handle_command(
            self.model_parts[owner], m.CommandDelivery(command, w.ORCHESTRATOR, chosen, commit)
        )
        actual = self.parts[owner].handle_command(command, w.ORCHESTRATOR, chosen)
        self.fate = m.CommitFate.COMMITTED
        rule_id = {
            m.MessageRefused: "S-PART-05",
            m.DuplicateCommand: "S-PART-02",
            m.DeadLettered: "S-PART-04",
        }.get(type(expected), "S-PART-01")
        if isinstance(expected, m.CommandProcessed) and expected.absorbed:
            rule_id = "S-PART-03"
            self.context.reach("absorbed-by-gate")
        self.expect(rule_id, expected, actual)
        if isinstance(expected, m.DuplicateCommand):
            self.context.inject(DUPLICATE.name)
        if expected.verdict is not m.Verdict.REDELIVER:
            if ack_lost and self._allows(ACK_LOST):
                self.context.inject(ACK_LOST.name)
            else:
                self.wire.commands.pop(position)

    def _pick(self, index: int, pending: int) -> int:
        """The envelope delivered next: any of those pending (a reorder), or the head."""
        if not self._allows(REORDER):
            return 0
        position = index % pending
        if position:
            self.context.inject(REORDER.name)
        return position

    @rule(crash=st.booleans())
    @step
    def relay_results(self, crash: bool) -> None:
        self._relay_results(crash)

    def _relay_results(self, crash: bool) -> None:
        crash = crash and self._allows(RELAY_CRASH)
        for owner in w.OWNERS:
            expected = tuple(
                r for r in self.model_parts[owner].outbox if r.message_id not in self.results_published
            )
            actual = self.parts[owner].pending_results()
            self.expect("S-PART-01", expected, actual)
            for result in actual:
                self.wire.results.append((owner, result))
                if crash:
                    self.context.inject(RELAY_CRASH.name)
                    return
                self.results_published.add(result.message_id)
                self.parts[owner].mark_result_published(result.message_id)

    @rule(index=indexes, fate=fates, ack_lost=st.booleans(), relay=relays, forge=forgeries)
    @step
    def deliver_result(
        self, index: int, fate: str, ack_lost: bool, relay: str = "ok", forge: str = "none"
    ) -> None:
        self._relay_results(crash=relay == "crash")
        if not self.wire.results:
            return
        position = self._pick(index, len(self.wire.results))
        producer, envelope = self.wire.results[position]
        _, probe = m.handle_result(
            self.model, m.ResultDelivery(envelope, producer, self.now, m.CommitFate.COMMITTED)
        )
        if isinstance(probe, m.DuplicateResult) and not self._allows(DUPLICATE):
            self.wire.results.pop(position)  # the transport drops what was already absorbed
            return
        if forge != "none" and self._allows(FORGED):
            self._forge(producer, envelope, forge)  # a forged twin arrives first
        outcome = self._deliver_result(producer, envelope, fate)
        if outcome.verdict is not m.Verdict.REDELIVER:
            if ack_lost and self._allows(ACK_LOST):
                self.context.inject(ACK_LOST.name)
            else:
                self.wire.results.pop(position)

    def _deliver_result(self, producer: str, envelope: m.ResultEnvelope, fate: str) -> m.ResultOutcome:
        commit = self._set_fate(fate)
        self.model, expected = m.handle_result(
            self.model, m.ResultDelivery(envelope, producer, self.now, commit)
        )
        actual = self.orch.handle_result(envelope, producer, self.now)
        self.fate = m.CommitFate.COMMITTED
        rule_id = {
            m.MessageRefused: "S-ORCH-01",
            m.DuplicateResult: "S-ORCH-03",
            m.StaleResult: "S-ORCH-04",
        }.get(type(expected), "S-ORCH-02")
        self.expect(rule_id, expected, actual)
        if isinstance(expected, m.DuplicateResult):
            self.context.inject(DUPLICATE.name)
        return expected

    @rule(index=indexes, how=st.sampled_from(["owner", "digest", "producer"]))
    @step
    def forge_result(self, index: int, how: str) -> None:
        """A forged twin of a genuine result: it must claim nothing (S-ORCH-01, S-DLV-03)."""
        if not self._allows(FORGED):
            return
        self._relay_results(crash=False)
        if not self.wire.results:
            return
        producer, envelope = self.wire.results[index % len(self.wire.results)]
        self._forge(producer, envelope, how)

    def _forge(self, producer: str, envelope: m.ResultEnvelope, how: str) -> None:
        self.context.inject(FORGED.name)
        if how == "owner":
            other = w.OWNERS[1 - w.OWNERS.index(envelope.owner)]
            forged, producer = attrs.evolve(envelope, owner=other), other
        elif how == "digest":
            forged = attrs.evolve(envelope, definition_digest="0" * 64)
        else:
            forged, producer = envelope, "mallory"
        claimed_before = envelope.message_id in self.model.inbox
        self._deliver_result(producer, forged, "committed")
        claimed = read_only(self.orch_backend, lambda tx: tx.result_claimed(envelope.message_id))
        if claimed != claimed_before:
            raise Violation(
                "S-ORCH-01",
                "a refused message took its genuine twin's inbox key",
                {"message_id": envelope.message_id},
            )

    # -- clock and timers ----------------------------------------------------------------

    @rule(ms=st.sampled_from([10, 60, 120, 500]))
    @step
    def advance_clock(self, ms: int) -> None:
        self.now += ms

    @rule(worker=st.sampled_from(w.WORKERS), index=indexes)
    @step
    def claim_timer(self, worker: str, index: int) -> None:
        due = m.due_timers(self.model.timers, self.now)
        if not due and self.model.timers.timers:
            # Nothing due yet: the worker waits until the next timer or lease expiry.
            self.now = max(
                self.now,
                min(
                    max(t.due_ms, 0 if t.lease is None else t.lease.expires_ms)
                    for t in self.model.timers.timers.values()
                ),
            )
            due = m.due_timers(self.model.timers, self.now)
        if not due:
            return
        # Expired leases first: taking one over is the interesting case (a stale holder remains).
        due = tuple(sorted(due, key=lambda t: t.lease is None))
        if not self._allows(LEASE_LOST):
            # Only timers no other worker still holds a token for: a takeover is the fault.
            taken = {timer_id for other, (timer_id, _) in self.leases.items() if other != worker}
            due = tuple(t for t in due if t.timer_id not in taken)
            if not due:
                return
        timer = due[index % len(due)] if index % 2 else due[0]
        request = m.ClaimTimer(timer.timer_id, worker, self.now, w.LEASE_MS)
        self.model, expected = m.claim_timer(self.model, request)
        actual = self.orch.claim_timer(timer.timer_id, worker, self.now, w.LEASE_MS)
        self.expect("S-TIMER-03", expected, actual)
        if isinstance(expected, m.TimerClaimed):
            for other, (held, _token) in self.leases.items():
                if other != worker and held == timer.timer_id:
                    self.context.inject(LEASE_LOST.name)  # the other worker still holds a stale token
            self.leases[worker] = (timer.timer_id, expected.token)

    @rule(worker=st.sampled_from(w.WORKERS), fate=fates)
    @step
    def fire_timer(self, worker: str, fate: str) -> None:
        if worker not in self.leases:
            return
        timer_id, token = self.leases[worker]
        commit = self._set_fate(fate)
        self.model, expected = m.fire_timer(self.model, m.FireTimer(timer_id, token, self.now, commit))
        actual = self.orch.fire_timer(timer_id, token, self.now)
        self.fate = m.CommitFate.COMMITTED
        stale = isinstance(expected, m.StaleFencingToken)
        if stale:
            self.context.reach("fenced-write-refused")
        self.expect("S-TIMER-02" if stale else "S-TIMER-05", expected, actual)
        if not isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            del self.leases[worker]

    @rule(fate=fates)
    @step
    def stale_worker_advances(self, fate: str) -> None:
        """w1 claims a timer, its lease lapses, w2 takes it over, w1 still tries to fire (S-TIMER-02)."""
        if not self.model.timers.timers or not self._allows(LEASE_LOST):
            return
        self.leases.pop("w1", None)
        self.leases.pop("w2", None)
        _unwrapped(SagaMachine.claim_timer)(self, worker="w1", index=0)
        if "w1" not in self.leases:
            return
        self.now += w.LEASE_MS
        _unwrapped(SagaMachine.claim_timer)(self, worker="w2", index=0)
        _unwrapped(SagaMachine.fire_timer)(self, worker="w1", fate=fate)

    @rule(worker=st.sampled_from(w.WORKERS), renew=st.booleans())
    @step
    def renew_or_release(self, worker: str, renew: bool) -> None:
        if worker not in self.leases:
            return
        timer_id, token = self.leases[worker]
        expected: object
        if renew:
            self.model, renewed = m.renew_timer(
                self.model, m.RenewTimer(timer_id, token, self.now, w.LEASE_MS)
            )
            expected = renewed
            actual: object = self.orch.renew_timer(timer_id, token, self.now, w.LEASE_MS)
        else:
            self.model, released = m.release_timer(self.model, m.ReleaseTimer(timer_id, token))
            expected = released
            actual = self.orch.release_timer(timer_id, token)
            del self.leases[worker]
        self.expect(
            "S-TIMER-02" if isinstance(expected, m.StaleFencingToken) else "S-TIMER-01", expected, actual
        )

    # -- checks ----------------------------------------------------------------------------

    def after_step(self) -> None:
        rows = read_only(
            self.orch_backend,
            lambda tx: (tx.list_instances(), tx.journal(), tx.list_commands(), tx.list_timers()),
        )
        instances, journal, commands, timers = rows
        actual_instances = {r.saga_id: instance_from_row(r) for r in instances}
        if actual_instances != dict(self.model.instances):
            raise Violation(
                "S-ORCH-02",
                "instances differ from the model",
                {"expected": show(dict(self.model.instances)), "actual": show(actual_instances)},
            )
        expected_journal = sorted(self.model.journal, key=lambda e: (e.saga_id, e.revision))
        actual_journal = [journal_from_row(r) for r in journal]
        if actual_journal != expected_journal:
            raise Violation(
                "S-STEP-08",
                "journal differs from the model",
                {"expected": show(expected_journal), "actual": show(actual_journal)},
            )
        for saga_id in {e.saga_id for e in actual_journal}:
            problems = m.journal_violations([e for e in actual_journal if e.saga_id == saga_id])
            if problems:
                raise Violation("S-STEP-08", "illegal journal", {"problems": list(problems)})
        expected_outbox = {k: e.published for k, e in self.model.outbox.items()}
        actual_outbox = {r.command_id: r.published for r in commands}
        if actual_outbox != expected_outbox:
            raise Violation(
                "S-ORCH-02",
                "command outbox differs from the model",
                {"expected": show(expected_outbox), "actual": show(actual_outbox)},
            )
        actual_timers = {r.timer_id: timer_from_row(r) for r in timers}
        if actual_timers != dict(self.model.timers.timers):
            raise Violation(
                "S-TIMER-01",
                "timers differ from the model",
                {"expected": show(dict(self.model.timers.timers)), "actual": show(actual_timers)},
            )
        if self.catalog_touched:
            self._compare_catalog()
            self.catalog_touched = False
        for owner, part in self.parts.items():
            state = self.model_parts[owner]
            facts = read_only(part.backend, lambda tx: (tx.list_effects(), tx.list_results()))
            effects = tuple(e.effect_id for e in facts[0])
            if len(set(effects)) != len(effects):
                raise Violation(
                    "S-PART-03", "an effect took effect twice", {"owner": owner, "effects": list(effects)}
                )
            if effects != state.effects:
                raise Violation(
                    "S-PART-01",
                    "business facts differ from the model",
                    {"owner": owner, "expected": list(state.effects), "actual": list(effects)},
                )
            results = tuple(r.envelope for r in facts[1])
            if results != state.outbox:
                raise Violation(
                    "S-PART-01",
                    "result outbox differs from the model",
                    {"owner": owner, "expected": show(state.outbox), "actual": show(results)},
                )
        for instance in self.model.instances.values():
            if instance.status in m.TERMINAL_STATUSES:
                self.context.reach(f"terminal:{instance.status.name}")

    def _compare_catalog(self) -> None:
        """Definition and capability rows read raw vs the model: refused publications and route
        operations wrote nothing, committed ones exactly their rows (S-CAT-01, S-CAT-04, S-ROUTE-02)."""
        definitions, capabilities = read_only(
            self.orch_backend, lambda tx: (tx.list_definitions(), tx.list_capabilities())
        )
        entries = self.model.catalog.entries
        expected_seals = {k: (e.digest, e.document) for k, e in entries.items()}
        actual_seals = {r.key: (r.digest, r.document) for r in definitions}
        if actual_seals != expected_seals:
            raise Violation(
                "S-CAT-01",
                "published definitions differ from the model",
                {"expected": show(sorted(expected_seals)), "actual": show(sorted(actual_seals))},
            )
        expected_lifecycles = {k: e.lifecycle for k, e in entries.items()}
        actual_lifecycles = {r.key: r.lifecycle for r in definitions}
        if actual_lifecycles != expected_lifecycles:
            raise Violation(
                "S-CAT-04",
                "definition lifecycles differ from the model",
                {"expected": show(expected_lifecycles), "actual": show(actual_lifecycles)},
            )
        actual_routes = {capability_key_of(r): route_from_row(r) for r in capabilities}
        if actual_routes != dict(self.model.routes.routes):
            raise Violation(
                "S-ROUTE-02",
                "capability routes differ from the model",
                {"expected": show(dict(self.model.routes.routes)), "actual": show(actual_routes)},
            )

    def at_quiescence(self) -> None:
        """Drive without faults until nothing is in flight; every saga must be terminal (S-STEP-07).

        Business keys never started get their saga now (when the catalog still admits starts),
        and the charge is answered per ``SETTLED_CHARGE``: each terminal status is then reached
        by the runtime's own paths in every example, and the coverage gate does not hang on
        which rules swarm testing happened to switch on.
        """
        self.fate = m.CommitFate.COMMITTED
        for key, business_key in enumerate(w.BUSINESS_KEYS):
            if m.saga_id_for(w.KEY.tenant, w.KEY.workflow, business_key) not in self.model.receipts:
                self._start(key, 0, -1, "committed")
        if self.model.quota_used.get(w.KEY.tenant, 0) >= w.QUOTA_LIMIT:
            self._start(3, 0, -1, "committed")  # the fourth key: beyond the quota (S-START-13)
        upload = self.model.catalog.entries[w.UPLOAD_KEY]
        if upload.lifecycle is m.Lifecycle.ACTIVE and not any(
            i.definition == w.UPLOAD_KEY for i in self.model.instances.values()
        ):
            self._start(0, 0, -1, "committed", "upload")  # its schema-declared raw input (S-START-11)
        self.catalog_touched = True
        self.after_step()
        for _ in range(40):
            self.leases.clear()
            self._relay_commands(crash=False)
            while self.wire.commands:
                head = self.wire.commands[0]
                charge = head.step_index == 1 and head.phase is m.Phase.EXECUTE
                decision = SETTLED_CHARGE.get(head.saga_id, "succeed") if charge else "succeed"
                _unwrapped(SagaMachine.deliver_command)(
                    self, index=0, decision=decision, fate="committed", ack_lost=False
                )
            self._relay_results(crash=False)
            while self.wire.results:
                _unwrapped(SagaMachine.deliver_result)(self, index=0, fate="committed", ack_lost=False)
            if all(i.status in m.TERMINAL_STATUSES for i in self.model.instances.values()):
                break
            self.now += 1000
            for timer in m.due_timers(self.model.timers, self.now):
                self.leases["recovery"] = (timer.timer_id, 0)
                self.model, claimed = m.claim_timer(
                    self.model, m.ClaimTimer(timer.timer_id, "recovery", self.now, w.LEASE_MS)
                )
                self.expect(
                    "S-TIMER-03",
                    claimed,
                    self.orch.claim_timer(timer.timer_id, "recovery", self.now, w.LEASE_MS),
                )
                if isinstance(claimed, m.TimerClaimed):
                    self.leases["recovery"] = (timer.timer_id, claimed.token)
                    _unwrapped(SagaMachine.fire_timer)(self, worker="recovery", fate="committed")
            self.after_step()
        for instance in self.model.instances.values():
            if instance.status not in m.TERMINAL_STATUSES:
                raise Violation(
                    "S-STEP-07",
                    "a saga did not reach a terminal state",
                    {"saga_id": instance.saga_id, "status": instance.status.value},
                )
            self.context.reach(f"terminal:{instance.status.name}")
        rows = read_only(self.orch_backend, lambda tx: tx.list_instances())
        for row in rows:
            if row.status not in m.TERMINAL_STATUSES:
                raise Violation("S-STEP-07", "a stored saga is not terminal", {"saga_id": row.saga_id})
