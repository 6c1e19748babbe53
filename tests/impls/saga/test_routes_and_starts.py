"""Capability routes, catalog publications and start admission in the runtime, over every backend.

Each test drives ``impls.saga.Orchestrator`` on a real backend (memory, SQLite; PostgreSQL and
MariaDB when their services run) and states the model's answer as the expected value.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from impls.saga import Orchestrator, SagaBackend, SagaTransaction
from impls.saga._routes import route_to_row
from impls.saga._unit import Discard, Keep, read_only, run_unit
from model.saga import (
    JSON_CONTRACT,
    ActivationBlocked,
    AlreadyExists,
    AlreadyPublished,
    AmbiguousRoute,
    CapabilityDescriptor,
    CapabilityKey,
    CapabilityRefused,
    CapabilityRegistered,
    CapabilityRenewed,
    CapabilityRoute,
    CatalogEntry,
    ChangeLifecycle,
    CommitFate,
    DefinitionArtifact,
    DefinitionConflict,
    DefinitionKey,
    DefinitionNotLoadable,
    DefinitionNotStartable,
    DefinitionReference,
    EligibilityRevoked,
    InvalidDefinition,
    LeaseExpired,
    Lifecycle,
    LifecycleAction,
    LifecycleChanged,
    NoRoute,
    OutcomeUnknown,
    PayloadContract,
    PayloadProblem,
    PayloadRejected,
    Published,
    QuotaExhausted,
    ReferenceKind,
    RefusalReason,
    RegisterCapability,
    RenewCapability,
    RetirementBlocked,
    RolledBack,
    RouteInvalid,
    RouteQuery,
    RouteSet,
    SagaPayload,
    SelectedRoute,
    StaleGeneration,
    Started,
    StartOutcome,
    StartSaga,
    StepDefinition,
    Transport,
    TransportViolation,
    UncertainPolicy,
    UnknownCapability,
    UnknownStep,
    definition_digest,
    definition_problems,
)

from .conftest import ARTIFACT, DIGEST, KEY, OWNERS, STEPS, Rig, make_rig

CREDENTIALS = "cd" * 32
LEASE = 100


def _key(step: int = 0, replica: str = "r1", definition: DefinitionKey = KEY) -> CapabilityKey:
    return CapabilityKey(definition, step, STEPS[step].owner, replica)


def _http(
    key: CapabilityKey, origin: str = "https://a.example", path: str | None = "/saga"
) -> CapabilityDescriptor:
    return CapabilityDescriptor(key, Transport.HTTP, origin, path, CREDENTIALS)


def _register(
    orch: Orchestrator, descriptor: CapabilityDescriptor, now: int, principal: str | None = None
) -> object:
    owner = descriptor.key.owner if principal is None else principal
    return orch.register_capability(RegisterCapability(descriptor, owner, LEASE, now, claimed_generation=41))


def _renew(orch: Orchestrator, key: CapabilityKey, generation: int, now: int) -> object:
    return orch.renew_capability(RenewCapability(key, generation, key.owner, LEASE, now))


def _retire(orch: Orchestrator, key: DefinitionKey, now: int) -> None:
    for action in (LifecycleAction.ACTIVATE, LifecycleAction.DEPRECATE, LifecycleAction.RETIRE):
        assert isinstance(orch.change_lifecycle(ChangeLifecycle(key, action), now), LifecycleChanged)


# -- S-ROUTE-01..03: registration and generations -----------------------------------------------


def test_s_route_02_03_generations_are_allocated_by_the_catalog(rig: Rig) -> None:
    key = _key()
    assert _register(rig.orch, _http(key), 0) == CapabilityRegistered(key, 1, LEASE, fresh=True)
    # The same content again (say after a lost answer) keeps the generation; the lease only grows.
    assert _register(rig.orch, _http(key), 50) == CapabilityRegistered(key, 1, 50 + LEASE, fresh=False)
    assert _register(rig.orch, _http(key), 10) == CapabilityRegistered(key, 1, 50 + LEASE, fresh=False)
    moved = _http(key, "https://b.example")
    assert _register(rig.orch, moved, 60) == CapabilityRegistered(key, 2, 60 + LEASE, fresh=True)


def test_s_route_01_04_registration_refusals(rig: Rig) -> None:
    key = _key(1)
    assert _register(rig.orch, _http(key), 0, principal="p0") == CapabilityRefused(
        key, RefusalReason.OWNER_MISMATCH
    )
    beyond = CapabilityKey(KEY, 3, "p0", "r1")
    assert _register(rig.orch, _http(beyond), 0) == UnknownStep(KEY, 3)
    assert _register(rig.orch, _http(key, "https://a.example/x"), 0) == RouteInvalid(
        TransportViolation.HTTP_ORIGIN_NOT_BARE
    )
    assert _register(rig.orch, _http(key, path="/saga/"), 0) == RouteInvalid(
        TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL
    )
    grpc = CapabilityDescriptor(key, Transport.GRPC, "http://g.example", None, CREDENTIALS)
    assert _register(rig.orch, grpc, 0) == RouteInvalid(TransportViolation.GRPC_ORIGIN_NOT_BARE_HTTPS)
    kafka = CapabilityDescriptor(key, Transport.KAFKA, "topic", "/saga", CREDENTIALS)
    assert _register(rig.orch, kafka, 0) == RouteInvalid(TransportViolation.PATH_ON_NON_HTTP)
    digest = attrs.evolve(_http(key), credentials_digest="nope")
    assert _register(rig.orch, digest, 0) == RouteInvalid(TransportViolation.CREDENTIALS_DIGEST_INVALID)
    assert read_only(rig.orch.backend, lambda tx: tx.list_capabilities()) == ()


def test_s_route_03_a_lost_registration_answer_converges_on_re_report(
    open_backend: Callable[[str], SagaBackend],
) -> None:
    lost = [CommitFate.UNKNOWN_APPLIED, CommitFate.UNKNOWN_NOT_APPLIED]

    def fates(unit: str) -> CommitFate:
        return lost.pop(0) if unit == "route-register" and lost else CommitFate.COMMITTED

    rig = make_rig(open_backend, fates)
    key = _key()
    assert _register(rig.orch, _http(key), 0) == OutcomeUnknown()  # applied
    assert _register(rig.orch, _http(key), 0) == OutcomeUnknown()  # not applied
    assert _register(rig.orch, _http(key), 0) == CapabilityRegistered(key, 1, LEASE, fresh=False)


# -- S-ROUTE-02, S-ROUTE-09: renewal, fencing, expiry ------------------------------------------


def test_s_route_02_09_renewal_is_fenced_by_generation_and_lease(rig: Rig) -> None:
    key = _key()
    _register(rig.orch, _http(key), 0)
    assert _renew(rig.orch, key, 1, 50) == CapabilityRenewed(key, 1, 50 + LEASE)
    _register(rig.orch, _http(key, "https://b.example"), 60)
    assert _renew(rig.orch, key, 1, 70) == StaleGeneration(key, 1, 2)
    assert _renew(rig.orch, key, 2, 60 + LEASE) == LeaseExpired(key, 60 + LEASE)
    assert _renew(rig.orch, _key(replica="r2"), 1, 0) == UnknownCapability(_key(replica="r2"))
    foreign = rig.orch.renew_capability(RenewCapability(key, 2, "p1", LEASE, 70))
    assert foreign == CapabilityRefused(key, RefusalReason.OWNER_MISMATCH)


def test_s_cat_09_retired_definitions_take_no_registration_or_renewal(rig: Rig) -> None:
    spare = DefinitionArtifact(DefinitionKey("acme", "spare", 1), (STEPS[0],))
    assert isinstance(rig.orch.publish_definition(spare, definition_digest(spare)), Published)
    key = _key(definition=spare.key)
    assert _register(rig.orch, _http(key), 0) == CapabilityRegistered(key, 1, LEASE, fresh=True)
    _retire(rig.orch, spare.key, LEASE)  # the lease ran out: nothing references the definition
    assert _register(rig.orch, _http(key), LEASE) == DefinitionNotLoadable(spare.key, Lifecycle.RETIRED)
    assert _renew(rig.orch, key, 1, LEASE) == DefinitionNotLoadable(spare.key, Lifecycle.RETIRED)
    queried = rig.orch.query_definition(spare.key)  # S-CAT-10: the artifact stays queryable
    assert isinstance(queried, CatalogEntry)
    assert (queried.artifact, queried.digest, queried.lifecycle) == (
        spare,
        definition_digest(spare),
        Lifecycle.RETIRED,
    )


def test_s_cat_07_a_live_capability_lease_blocks_retirement(rig: Rig) -> None:
    spare = DefinitionArtifact(DefinitionKey("acme", "spare", 1), (STEPS[0],))
    rig.orch.publish_definition(spare, definition_digest(spare))
    for action in (LifecycleAction.ACTIVATE, LifecycleAction.DEPRECATE):
        rig.orch.change_lifecycle(ChangeLifecycle(spare.key, action), 0)
    key = _key(definition=spare.key)
    _register(rig.orch, _http(key), 0)
    blocked = rig.orch.change_lifecycle(ChangeLifecycle(spare.key, LifecycleAction.RETIRE), LEASE - 1)
    lease = DefinitionReference(ReferenceKind.CAPABILITY_LEASE, spare.key, "p0/r1/0")
    assert blocked == RetirementBlocked(spare.key, frozenset({lease}))
    retired = rig.orch.change_lifecycle(ChangeLifecycle(spare.key, LifecycleAction.RETIRE), LEASE)
    assert retired == LifecycleChanged(spare.key, Lifecycle.DEPRECATED, Lifecycle.RETIRED)


# -- S-ROUTE-04: candidate activation ------------------------------------------------------------


def test_s_route_04_activation_refuses_a_route_written_around_registration(
    open_backend: Callable[[str], SagaBackend],
) -> None:
    orch = Orchestrator(open_backend("o"), frozenset(OWNERS))
    assert orch.publish_definition(ARTIFACT, DIGEST) == Published(KEY, DIGEST)
    key = _key()
    bad = CapabilityRoute(_http(key, "https://a.example/x"), 1, LEASE)
    tx = orch.backend.begin()
    tx.upsert_capability(route_to_row(bad))
    tx.commit()
    activate = ChangeLifecycle(KEY, LifecycleAction.ACTIVATE)
    assert orch.change_lifecycle(activate, 0) == ActivationBlocked(KEY, (key,))
    # Registering valid content over it (a new generation) clears the way.
    assert _register(orch, _http(key), 0) == CapabilityRegistered(key, 2, LEASE, fresh=True)
    assert orch.change_lifecycle(activate, 0) == LifecycleChanged(KEY, Lifecycle.CANDIDATE, Lifecycle.ACTIVE)


# -- S-ROUTE-10..12: selection and the snapshot --------------------------------------------------


def test_s_route_11_12_selection_never_collapses_direct_replicas(rig: Rig) -> None:
    query = RouteQuery(KEY, 0)
    assert rig.orch.select_capability_routes(query, 0) == NoRoute(query)
    _register(rig.orch, _http(_key(replica="r1"), "https://a.example"), 0)
    _register(rig.orch, _http(_key(replica="r2"), "https://b.example"), 0)
    routes = rig.orch.select_capability_routes(query, 10)
    assert isinstance(routes, RouteSet)
    assert [r.descriptor.key.replica for r in routes.routes] == ["r1", "r2"]
    single = rig.orch.select_capability_route(query, 10)
    assert isinstance(single, AmbiguousRoute) and len(single.targets) == 2
    assert rig.orch.select_capability_routes(query, LEASE) == NoRoute(query)  # both leases ran out


def test_s_route_11_12_message_transports_share_one_target(rig: Rig) -> None:
    query = RouteQuery(KEY, 1)
    for replica in ("r1", "r2"):
        key = _key(1, replica)
        _register(rig.orch, CapabilityDescriptor(key, Transport.KAFKA, "saga.charge", None, CREDENTIALS), 0)
    routes = rig.orch.select_capability_routes(query, 0)
    assert isinstance(routes, RouteSet) and len(routes.routes) == 2
    single = rig.orch.select_capability_route(query, 0)
    assert isinstance(single, SelectedRoute) and single.route.descriptor.key.replica == "r1"
    other = CapabilityDescriptor(_key(1, "r2"), Transport.KAFKA, "saga.other", None, CREDENTIALS)
    _register(rig.orch, other, 0)
    assert isinstance(rig.orch.select_capability_routes(query, 0), AmbiguousRoute)


def test_s_route_10_snapshot_pairs_loadable_definitions_with_live_routes(rig: Rig) -> None:
    before = rig.orch.catalog_snapshot(0)
    assert [e.key for e in before.definitions] == [KEY] and before.routes == ()
    registered = _register(rig.orch, _http(_key()), 0)
    assert isinstance(registered, CapabilityRegistered)
    after = rig.orch.catalog_snapshot(0)
    assert after.registry_revision == before.registry_revision + 1
    assert [(r.descriptor.key, r.generation) for r in after.routes] == [(_key(), 1)]
    assert rig.orch.catalog_snapshot(LEASE).routes == ()  # expired: unroutable, definition untouched
    assert rig.orch.catalog_snapshot(LEASE).definitions == after.definitions


# -- S-DEF-01, S-CAT-03, S-CAT-05: publications and the candidate -------------------------------


def test_s_def_01_s_cat_03_publications(rig: Rig) -> None:
    assert rig.orch.publish_definition(ARTIFACT, DIGEST) == AlreadyPublished(KEY, DIGEST, Lifecycle.ACTIVE)
    other = DefinitionArtifact(KEY, (STEPS[0],))
    assert rig.orch.publish_definition(other, definition_digest(other)) == DefinitionConflict(
        KEY, DIGEST, definition_digest(other)
    )
    empty = DefinitionArtifact(DefinitionKey("acme", "empty", 1), ())
    assert rig.orch.publish_definition(empty, definition_digest(empty)) == InvalidDefinition(
        empty.key, definition_problems(empty)
    )
    assert [r.key for r in read_only(rig.orch.backend, lambda tx: tx.list_definitions())] == [KEY]


# -- S-START-06, S-START-10, S-START-11, S-START-13, S-CAT-05: starts ------------------------------

RAW = PayloadContract("application/octet-stream", "upload.v1")


def test_s_start_10_at_most_one_payload(rig: Rig) -> None:
    both = StartSaga(KEY, "k1", json_payload=b"{}", raw_payload=SagaPayload(b"{}", JSON_CONTRACT))
    assert rig.orch.start_saga(both, 0) == PayloadRejected(PayloadProblem.BOTH_GIVEN)
    # Neither given: a start without first-step input (seed 两者互斥, N-15), stored without one.
    started = rig.orch.start_saga(StartSaga(KEY, "k1"), 0)
    assert isinstance(started, Started)
    assert rig.orch.instance(started.saga_id).first_payload is None


def test_s_start_11_schema_declared_raw_input_is_admitted_and_kept(rig: Rig) -> None:
    upload = DefinitionArtifact(
        DefinitionKey("beta", "upload", 1),
        (StepDefinition("store", "p0", "store", None, UncertainPolicy.RESOLVE, 100, 2, 2),),
        RAW,
    )
    rig.orch.publish_definition(upload, definition_digest(upload))
    data = b"\x00\xffraw"
    request = StartSaga(upload.key, "u1", raw_payload=SagaPayload(data, RAW))
    assert rig.orch.start_saga(request, 0) == DefinitionNotStartable(upload.key, Lifecycle.CANDIDATE)
    rig.orch.change_lifecycle(ChangeLifecycle(upload.key, LifecycleAction.ACTIVATE), 0)
    no_schema = StartSaga(upload.key, "u1", raw_payload=SagaPayload(data, PayloadContract(RAW.media_type)))
    assert rig.orch.start_saga(no_schema, 0) == PayloadRejected(PayloadProblem.SCHEMA_REQUIRED)
    assert isinstance(rig.orch.start_saga(request, 0), Started)
    (command,) = rig.orch.pending_commands()
    assert command.payload == SagaPayload(data, RAW)  # the caller's bytes, never rewritten


def test_s_start_13_quota_limits_admissions_per_tenant(open_backend: Callable[[str], SagaBackend]) -> None:
    rig = make_rig(open_backend)
    rig.orch.quota_limit = 1
    rig.start("k1")
    refused = rig.orch.start_saga(StartSaga(KEY, "k2", json_payload=b"{}"), 0)
    assert refused == QuotaExhausted(KEY.tenant, 1)
    assert isinstance(rig.orch.start_saga(StartSaga(KEY, "k1", json_payload=b'{"qty":1}'), 0), AlreadyExists)


def _joined(
    orch: Orchestrator, request: StartSaga, eligible: Callable[[int], bool], fate: CommitFate
) -> object:
    """The host's own unit: the joined start inside it, the COMMIT (and its fate) the host's."""

    def outer(tx: SagaTransaction) -> Keep[StartOutcome] | Discard[StartOutcome]:
        outcome = orch.start_saga_joined(tx, request, 0, eligible)
        return Keep(outcome) if isinstance(outcome, Started) else Discard(outcome)

    return run_unit(orch.backend, "host", outer, lambda _unit: fate)


def test_s_start_06_joined_start_leaves_the_last_gate_to_the_outer_transaction(rig: Rig) -> None:
    request = StartSaga(KEY, "k1", json_payload=b"{}")

    def last_gate_closed(checkpoint: int) -> bool:
        return checkpoint < 1

    assert rig.orch.start_saga(request, 0, last_gate_closed) == EligibilityRevoked(1)
    assert _joined(rig.orch, request, lambda c: c < 0, CommitFate.COMMITTED) == EligibilityRevoked(0)
    assert _joined(rig.orch, request, last_gate_closed, CommitFate.ROLLED_BACK) == RolledBack()
    assert read_only(rig.orch.backend, lambda tx: tx.list_instances()) == ()
    joined = _joined(rig.orch, request, last_gate_closed, CommitFate.COMMITTED)
    assert isinstance(joined, Started)
    assert rig.orch.pending_commands()[0].command_id == joined.first_command_id
    again = _joined(rig.orch, request, last_gate_closed, CommitFate.COMMITTED)
    assert again == AlreadyExists(joined.saga_id, joined.start_digest)


@pytest.mark.parametrize("fate", [CommitFate.UNKNOWN_APPLIED, CommitFate.UNKNOWN_NOT_APPLIED])
def test_s_start_06_a_lost_outer_commit_is_unknown_and_a_replay_tells(rig: Rig, fate: CommitFate) -> None:
    request = StartSaga(KEY, "k1", json_payload=b"{}")
    assert _joined(rig.orch, request, lambda _c: True, fate) == OutcomeUnknown()
    replay = rig.orch.start_saga(request, 0)
    applied = fate is CommitFate.UNKNOWN_APPLIED
    assert isinstance(replay, AlreadyExists if applied else Started)
