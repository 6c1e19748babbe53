"""Catalog publications, lifecycles and capability routes beside the model (S-DEF-01, S-CAT-*, S-ROUTE-*)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from conformance._machine import step
from conformance.saga import _world as w
from conformance.saga._base import SagaMachineBase, fates, indexes, unwrapped
from conformance.saga._faults import STALE_GENERATION
from conformance.saga._port import ReferencePort
from model import saga as m

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


#: Shapes (``_world.DESCRIPTOR_SHAPES``) of a step's two replicas, one mix each: HTTP + gRPC,
#: two Kafka topics, one Kafka topic, one Redis stream, gRPC twice at one address, HTTP at two
#: addresses (per-replica routes whatever their targets; ``_select_each_mix``).
SELECTION_MIXES = ((0, 2), (3, 4), (3, 3), (5, 5), (2, 2), (0, 1))
#: Principals that are no owner, one sorting before every owner and one after (``retire_spare``).
STRANGERS = ("a-stranger", "z-stranger")


class CatalogRules(SagaMachineBase):
    # -- catalog publications and capability routes -------------------------------------

    @rule(
        op=st.sampled_from(
            [
                "republish",
                "republish",
                "invalid",
                "activate_upload",
                "plant_invalid",
                "query",
                "route_then_activate",
            ]
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
                (w.ARTIFACT, w.CONFLICT, w.UPLOAD)[index % 3] if op == "republish" else self._invalid(index)
            )
            digest = m.definition_digest(artifact)
            self.model, expected = m.publish_definition(self.model, m.PublishDefinition(artifact, digest))
            rule_id = "S-DEF-01" if op == "invalid" else "S-CAT-03"
            self.expect(rule_id, expected, self.runtime.publish_definition(artifact, digest))
            self.context.reach(f"publish:{type(expected).__name__}")
        elif op == "route_then_activate" and self.caps.routes:
            # A valid route on the candidate must not block its activation (S-ROUTE-04's other side).
            route = self._capability_key("upload", 0, w.REPLICAS[index % len(w.REPLICAS)])
            self._register(route, index % w.VALID_SHAPES, route.owner, w.ROUTE_LEASE_MS, "committed")
            self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        elif op in ("activate_upload", "route_then_activate") or (
            op == "plant_invalid" and not self.caps.raw_route_rows
        ):
            self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        elif op == "plant_invalid":
            if self._plant_invalid_route(index):
                self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        else:
            key = (w.KEY, w.UPLOAD_KEY, w.SPARE_KEY)[index % 3]
            self.expect("S-CAT-10", m.query_definition(self.model, key), self.runtime.query_definition(key))

    def _invalid(self, index: int) -> m.DefinitionArtifact:
        """One of ``w.INVALID``; the last breaks the attempt budgets, which only some runtimes have."""
        count = len(w.INVALID) if self.caps.attempt_budgets else len(w.INVALID) - 1
        return w.INVALID[index % count]

    def _lifecycle(self, key: m.DefinitionKey, action: m.LifecycleAction) -> object:
        self.catalog_touched = True
        change = m.ChangeLifecycle(key, action)
        self.model, expected = m.change_lifecycle(self.model, change, self.now)
        rule_id = {m.ActivationBlocked: "S-ROUTE-04", m.RetirementBlocked: "S-CAT-07"}.get(
            type(expected), "S-CAT-04"
        )
        self.expect(rule_id, expected, self.runtime.change_lifecycle(change, self.now))
        if isinstance(expected, m.ActivationBlocked):
            self.context.reach("activation-blocked")
        return expected

    def _plant_invalid_route(self, index: int, lease_ms: int = w.ROUTE_LEASE_MS) -> bool:
        """A route row written around ``register_capability`` (say, by an older release) on the
        candidate: its activation must refuse while the row breaks the transport contract (S-ROUTE-04).
        False when there is no candidate to plant on, or when the database refused the row."""
        entry = self.model.catalog.entries.get(w.UPLOAD_KEY)
        if entry is None or entry.lifecycle is not m.Lifecycle.CANDIDATE:
            return False
        key = m.CapabilityKey(w.UPLOAD_KEY, 0, "p0", w.REPLICAS[index % len(w.REPLICAS)])
        existing = self.model.routes.routes.get(key)
        generation = 1 if existing is None else existing.generation + 1
        route = m.CapabilityRoute(w.descriptor(key, w.VALID_SHAPES), generation, self.now + lease_ms)
        before = self.model
        self.model = attrs.evolve(before, routes=m.RouteTable({**before.routes.routes, key: route}))
        if self.runtime.plant_route(route):
            return True
        # A contended database refused the row on every attempt: nothing of it applied (S-TX-01),
        # so the model goes back and the walk goes on without it.
        self.model = before
        self.refated()
        self.note("the database refused the harness's route row on every attempt: not planted")
        return False

    @precondition(lambda self: self.caps.routes)
    @rule(
        definition=st.sampled_from(["order", "order", "order", "upload"]),
        step_index=st.sampled_from([0, 0, 0, 1, 2]),
        replica=st.sampled_from(w.REPLICAS),
        shape=shapes,
        stranger=foreign,
        fate=fates,
        pair=st.booleans(),
        usurp=st.sampled_from((False, False, False, True)),
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
        usurp: bool,
    ) -> None:
        """A replica (re-)registers its route (S-ROUTE-01..08, S-CAT-09); a lost answer is re-tried.

        With ``pair`` the step's other replica registers next, at the next valid address: two
        distinct targets of one step, which single-route selection must not collapse (S-ROUTE-12).
        With ``usurp`` the key names the other owner for the step, and that owner asks: the principal
        matches the key but not the step, still OWNER_MISMATCH.
        """
        key = self._capability_key(definition, step_index, replica)
        if usurp:
            key = attrs.evolve(key, owner=w.OWNERS[1 - w.OWNERS.index(key.owner)])
            stranger = False
        self._register(key, shape, self._principal(key, stranger), w.ROUTE_LEASE_MS, fate)
        if pair:
            other = attrs.evolve(key, replica=w.REPLICAS[1 - w.REPLICAS.index(replica)])
            self._register(other, (shape + 1) % w.VALID_SHAPES, other.owner, w.ROUTE_LEASE_MS, "committed")
            if step_index < len(w.DEFINITIONS[definition][1].steps):
                # and the single-route selection that must not collapse them, right away
                unwrapped(type(self).select_routes)(
                    self, definition=definition, step_index=step_index, read="route"
                )

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
        rule_id: str | None = None,
    ) -> object:
        """One registry write beside the model under ``fate``: the model's outcome settled as the
        database settles it, compared with the runtime's (S-ROUTE-02, S-ROUTE-03, S-ROUTE-09)."""
        self.catalog_touched = True
        commit = self._set_fate(fate)
        before = self.model
        after, outcome = model_op(before, request)
        expected: object = outcome
        if isinstance(outcome, applied):
            self.model, expected = m.settle(before, after, commit, outcome)
        actual = runtime_op(request)
        self.fate = m.CommitFate.COMMITTED
        if isinstance(outcome, applied) and self.database_refused(commit, actual):
            self.model, expected = m.settle(before, after, m.CommitFate.ROLLED_BACK, outcome)
            self.refated()
        self.expect(rule_id or _route_rule(expected), expected, actual)
        self.context.reach(f"{label}:{type(expected).__name__}")
        return expected

    def _register(self, key: m.CapabilityKey, shape: int, principal: str, lease_ms: int, fate: str) -> None:
        # The claimed generation is carried and must be ignored (S-ROUTE-03).
        request = m.RegisterCapability(w.descriptor(key, shape), principal, lease_ms, self.now, 7)
        expected = self._route_write(
            "register",
            m.register_capability,
            self.runtime.register_capability,
            request,
            m.CapabilityRegistered,
            fate,
        )
        if isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            # The replica never learnt its generation: it reports the same content again, which must
            # converge on what the catalog committed, the same generation if it applied (S-ROUTE-03).
            # A unit of its own, its fate decided like any other's: a wire fault armed for a
            # registration refused before its COMMIT waits for it (``_wire``), and the model
            # settles what that COMMIT met (beside another run: OutcomeUnknown, model Registered).
            refusals = self.refusals
            expected = self._route_write(
                "re-register",
                m.register_capability,
                self.runtime.register_capability,
                request,
                m.CapabilityRegistered,
                "committed",
                "S-ROUTE-03",
            )
            if self.refusals != refusals:
                # The database refused the re-report on every attempt and the model went back
                # (S-TX-01): the replica learnt no generation (beside another run a generation
                # recorded here named a route the model never kept: a KeyError in renew_route).
                expected = m.RolledBack()
            if isinstance(expected, m.CapabilityRegistered) and not expected.fresh:
                self.context.reach("route-retry-converged")
        if isinstance(expected, m.CapabilityRegistered):
            held = self.generations.setdefault(key, [])
            if expected.generation not in held:
                held.append(expected.generation)

    @precondition(lambda self: self.caps.routes)
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
            "renew", m.renew_capability, self.runtime.renew_capability, request, m.CapabilityRenewed, fate
        )
        if isinstance(expected, m.RolledBack | m.OutcomeUnknown):
            # Renewing again is safe: the lease only grows and the generation is unchanged.
            self.model, expected = m.renew_capability(self.model, request)
            self.expect("S-ROUTE-09", expected, self.runtime.renew_capability(request))

    @precondition(lambda self: self.caps.routes)
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
            self.expect("S-ROUTE-11", routes, self.runtime.select_capability_routes(query, self.now))
            self.context.reach(f"select:{type(routes).__name__}")
        elif read == "route":
            self._select_one(query)
        else:
            snapshot = m.catalog_snapshot(self.model, self.now)
            self.expect("S-ROUTE-10", snapshot, self.runtime.catalog_snapshot(self.now))

    @precondition(lambda self: self.caps.routes)
    @rule()
    @step
    def route_walk(self) -> None:
        """A short deterministic walk, once per example, through the route outcomes a random
        program meets too rarely for a ci run to count on (docs/ci-gate.md, "reach"): a
        conflicting and an invalid publication (S-CAT-03, S-DEF-01), the candidate's activation
        blocked by an invalid route row on it, leased for a millisecond (S-ROUTE-04), a
        registration whose commit outcome is unknown but applied, re-reported until it converges
        (S-ROUTE-03), and a replica
        whose generation a re-registration superseded renewing with the old one: fenced (S-ROUTE-02)."""
        if self.route_walked:
            return
        self.route_walked = True
        self.catalog_touched = True
        for artifact in (w.CONFLICT, self._invalid(0)):
            digest = m.definition_digest(artifact)
            self.model, expected = m.publish_definition(self.model, m.PublishDefinition(artifact, digest))
            rule_id = "S-CAT-03" if artifact is w.CONFLICT else "S-DEF-01"
            self.expect(rule_id, expected, self.runtime.publish_definition(artifact, digest))
            self.context.reach(f"publish:{type(expected).__name__}")
        if self.caps.raw_route_rows and self._plant_invalid_route(0, lease_ms=1):
            # Blocked now, free again once the clock moves: the rest of the example may activate.
            self._lifecycle(w.UPLOAD_KEY, m.LifecycleAction.ACTIVATE)
        key = self._capability_key("order", 0, w.REPLICAS[0])
        self._register(key, 0, key.owner, w.ROUTE_LEASE_MS, "unknown_applied")
        if self._allows(STALE_GENERATION):
            self._register(key, 1, key.owner, w.ROUTE_LEASE_MS, "committed")  # new content, new generation
            held = self.generations.get(key, [])
            if len(held) >= 2:
                self.context.inject(STALE_GENERATION.name)
                self._renew(key, held[-2], key.owner, "committed")

    def _select_each_mix(self, key: m.CapabilityKey, other: m.CapabilityKey) -> None:
        """The step's two replicas re-register in each mix of transports and targets, and both
        selections are read beside the model after each (S-ROUTE-11, S-ROUTE-12): HTTP and gRPC
        (two transports), two Kafka topics, one Kafka topic, one Redis stream, two gRPC replicas at
        one address, two HTTP replicas at two; then the next step, which holds none of them. A
        random program seldom lines two replicas of one step up on these."""
        query = m.RouteQuery(key.definition, key.step_index)
        for first, second in SELECTION_MIXES:
            self._register(key, first, key.owner, w.LEASE_MS, "committed")
            self._register(other, second, other.owner, w.LEASE_MS, "committed")
            routes = m.select_capability_routes(self.model, query, self.now)
            self.expect("S-ROUTE-11", routes, self.runtime.select_capability_routes(query, self.now))
            self.context.reach(f"select:{type(routes).__name__}")
            self._select_one(query)
        later = m.RouteQuery(key.definition, key.step_index + 1)  # holds none of the earlier step's
        self.expect(
            "S-ROUTE-11",
            m.select_capability_routes(self.model, later, self.now),
            self.runtime.select_capability_routes(later, self.now),
        )

    def _select_one(self, query: m.RouteQuery) -> None:
        single = m.select_capability_route(self.model, query, self.now)
        self.expect("S-ROUTE-12", single, self.runtime.select_capability_route(query, self.now))
        self.context.reach(f"select-one:{type(single).__name__}")

    def _reference(self, op: str, reference: m.DefinitionReference) -> object:
        """Record or release one migration or audit reference beside the model (S-CAT-07, S-CAT-11)."""
        port = cast(ReferencePort, self.runtime)
        expected: object
        if op == "record":
            self.model, expected = m.record_reference(self.model, m.RecordReference(reference))
            actual = port.record_reference(reference)
        else:
            self.model, expected = m.release_reference(self.model, reference)
            actual = port.release_reference(reference)
        self.expect("S-CAT-07" if op == "record" else "S-CAT-11", expected, actual)
        return expected

    def _recorded_references_block(self, key: m.DefinitionKey) -> None:
        """A migration and an audit reference recorded on a deprecated definition block its
        retirement, each until it is released; a second release finds nothing, and a reference to
        an unknown definition is refused (S-CAT-07, S-CAT-11)."""
        kinds = (m.ReferenceKind.MIGRATION, m.ReferenceKind.AUDIT)
        references = [m.DefinitionReference(kind, key, f"{kind.value}-1") for kind in kinds]
        unknown = attrs.evolve(key, version=key.version + 100)
        self._reference("record", m.DefinitionReference(m.ReferenceKind.MIGRATION, unknown, "migration-0"))
        for reference in references:
            self._reference("record", reference)
        for reference in references:
            if isinstance(self._lifecycle(key, m.LifecycleAction.RETIRE), m.RetirementBlocked):
                self.context.reach("retirement-blocked-by-recorded-reference")
            if isinstance(self._reference("release", reference), m.ReferenceReleased):
                self.context.reach("recorded-reference-released")
            self._reference("release", reference)  # released once: the second finds none

    @precondition(lambda self: self.caps.routes)
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
        self.expect("S-CAT-02", published, self.runtime.publish_definition(w.SPARE, w.SPARE_DIGEST))
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.ACTIVATE)
        self._register(key, 0, key.owner, w.LEASE_MS, "committed")
        for stranger in STRANGERS:  # principals sorting before and after the owner (S-ROUTE-01)
            self._register(key, 0, stranger, w.LEASE_MS, "committed")
        # A second replica of the step at another address: the single-route read must refuse to
        # pick one (S-ROUTE-12). Directed here, on a walk most examples take, so that a ci run
        # reaches select-one:AmbiguousRoute whatever its seed (docs/ci-gate.md, "reach").
        other = attrs.evolve(key, replica=w.REPLICAS[1])
        self._register(other, 1, other.owner, w.LEASE_MS, "committed")
        self._select_one(m.RouteQuery(w.SPARE_KEY, 0))
        self._select_each_mix(key, other)
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.DEPRECATE)
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.RETIRE)
        self.now += w.LEASE_MS  # the replica stopped renewing; its lease runs out
        if self.caps.recorded_references:
            self._recorded_references_block(w.SPARE_KEY)
        self._lifecycle(w.SPARE_KEY, m.LifecycleAction.RETIRE)
        self._register(key, 1, key.owner, w.ROUTE_LEASE_MS, "committed")
        self._renew(key, self.generations.get(key, [1])[-1], key.owner, "committed")
        self.expect(
            "S-CAT-10",
            m.query_definition(self.model, w.SPARE_KEY),
            self.runtime.query_definition(w.SPARE_KEY),
        )
        entry = self.model.catalog.entries.get(w.SPARE_KEY)  # none if the database refused it (S-TX-01)
        if entry is not None and entry.lifecycle is m.Lifecycle.RETIRED:
            self.context.reach("retired-definition-touched")
