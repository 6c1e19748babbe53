"""Capability routes: descriptors, generations, transport contract, selection (S-ROUTE-*)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    ActivationBlocked,
    AmbiguousRoute,
    CapabilityDescriptor,
    CapabilityKey,
    CapabilityRefused,
    CapabilityRegistered,
    CapabilityRenewed,
    CapabilityRoute,
    ChangeLifecycle,
    LeaseExpired,
    LifecycleAction,
    NoRoute,
    OrchestratorStore,
    PublisherTarget,
    RefusalReason,
    RegisterCapability,
    RenewCapability,
    RouteInvalid,
    RouteQuery,
    RouteSet,
    RouteTable,
    SelectedRoute,
    StaleGeneration,
    Transport,
    TransportViolation,
    UnknownStep,
    catalog_snapshot,
    change_lifecycle,
    is_bare_origin,
    is_canonical_base_path,
    is_kafka_topic,
    is_redis_stream_key,
    next_generation,
    publisher_target,
    register_capability,
    renew_capability,
    select_capability_route,
    select_capability_routes,
    validate_transport,
)
from tests.model.saga.builders import store_with, three_steps

ART = three_steps()
KEY = ART.key
CRED = "c" * 64
QUERY = RouteQuery(KEY, 0)


def cap(replica: str = "r1", step_index: int = 0, owner: str = "svc-a") -> CapabilityKey:
    return CapabilityKey(KEY, step_index, owner, replica)


def http(
    replica: str = "r1", origin: str = "https://a.example", path: str | None = "/saga"
) -> CapabilityDescriptor:
    return CapabilityDescriptor(cap(replica), Transport.HTTP, origin, path, CRED)


def kafka(replica: str = "r1", topic: str = "saga.commands") -> CapabilityDescriptor:
    return CapabilityDescriptor(cap(replica), Transport.KAFKA, topic, None, CRED)


def register(
    store: OrchestratorStore,
    descriptor: CapabilityDescriptor,
    now: int = 0,
    lease: int = 1_000,
    claimed_generation: int | None = None,
) -> tuple[OrchestratorStore, object]:
    request = RegisterCapability(descriptor, descriptor.key.owner, lease, now, claimed_generation)
    return register_capability(store, request)


def base() -> OrchestratorStore:
    return store_with(ART)


# -- S-ROUTE-01..03 ---------------------------------------------------------------------


def test_s_route_01_only_the_steps_owner_registers() -> None:
    store = base()
    request = RegisterCapability(http(), "svc-b", 1_000, 0)
    after, refused = register_capability(store, request)
    assert refused == CapabilityRefused(cap(), RefusalReason.OWNER_MISMATCH)
    assert after is store
    wrong_owner = attrs.evolve(http(), key=cap(owner="svc-b"))
    _, outcome = register(store, wrong_owner)
    assert outcome == CapabilityRefused(cap(owner="svc-b"), RefusalReason.OWNER_MISMATCH)
    _, outcome = register(store, attrs.evolve(http(), key=cap(step_index=7)))
    assert outcome == UnknownStep(KEY, 7)


def test_s_route_01_credentials_digest_must_be_a_sha256() -> None:
    _, outcome = register(base(), attrs.evolve(http(), credentials_digest="secret"))
    assert outcome == RouteInvalid(TransportViolation.CREDENTIALS_DIGEST_INVALID)


def test_s_route_02_generations_are_allocated_by_the_catalog() -> None:
    store, first = register(base(), http())
    assert first == CapabilityRegistered(cap(), 1, 1_000, fresh=True)
    store, second = register(store, http(origin="https://b.example"), now=5)
    assert isinstance(second, CapabilityRegistered) and second.generation == 2 and second.fresh
    store, other = register(store, http(replica="r2"))
    assert isinstance(other, CapabilityRegistered) and other.generation == 1  # per capability key


def test_s_route_03_claims_and_clocks_carry_no_authority_and_re_reports_keep_the_generation() -> None:
    store, first = register(base(), http(), now=500, claimed_generation=99)
    assert isinstance(first, CapabilityRegistered) and first.generation == 1
    # the same report again (its first answer was lost): same generation, lease not shortened
    store, again = register(store, http(), now=0, claimed_generation=7)
    assert again == CapabilityRegistered(cap(), 1, 1_500, fresh=False)


@given(
    st.lists(
        st.tuples(st.sampled_from(["https://a.example", "https://b.example"]), st.integers(0, 5_000)),
        min_size=1,
        max_size=12,
    )
)
def test_s_route_02_generations_only_increase(reports: list[tuple[str, int]]) -> None:
    store = base()
    last = 0
    previous_origin = None
    for origin, now in reports:
        store, outcome = register(store, http(origin=origin), now=now)
        assert isinstance(outcome, CapabilityRegistered)
        assert outcome.generation >= last
        assert (outcome.generation > last) == (origin != previous_origin)
        assert store.routes.routes[cap()].generation == outcome.generation
        last, previous_origin = outcome.generation, origin


@given(st.none() | st.integers(1, 1_000), st.booleans())
def test_s_route_02_next_generation_is_monotone(previous: int | None, same: bool) -> None:
    generation = next_generation(previous, same)
    assert generation >= 1
    if previous is not None:
        assert generation == (previous if same else previous + 1)


# -- S-ROUTE-04..08: the transport contract ---------------------------------------------


@pytest.mark.parametrize(
    ("transport", "address", "path", "violation"),
    [
        (Transport.HTTP, "https://a.example", "/saga", None),
        (Transport.HTTP, "http://10.0.0.1:8080", "/", None),
        (Transport.HTTP, "https://a.example/", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://a.example/x", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://u@a.example", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://A.example", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://a.example:0", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://a.example:70000", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://a.example?q=1", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "ftp://a.example", "/saga", TransportViolation.HTTP_ORIGIN_NOT_BARE),
        (Transport.HTTP, "https://a.example", None, TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "saga", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "/saga/", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "/a//b", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "/a/../b", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "/a?x", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.HTTP, "https://a.example", "/a%20b", TransportViolation.HTTP_BASE_PATH_NOT_CANONICAL),
        (Transport.GRPC, "https://a.example:443", None, None),
        (Transport.GRPC, "http://a.example", None, TransportViolation.GRPC_ORIGIN_NOT_BARE_HTTPS),
        (Transport.GRPC, "https://a.example/svc", None, TransportViolation.GRPC_ORIGIN_NOT_BARE_HTTPS),
        (Transport.GRPC, "https://a.example", "/saga", TransportViolation.PATH_ON_NON_HTTP),
        (Transport.KAFKA, "saga.commands-1_x", None, None),
        (Transport.KAFKA, "..", None, TransportViolation.KAFKA_TOPIC_INVALID),
        (Transport.KAFKA, "a b", None, TransportViolation.KAFKA_TOPIC_INVALID),
        (Transport.KAFKA, "x" * 250, None, TransportViolation.KAFKA_TOPIC_INVALID),
        (Transport.KAFKA, "t", "/saga", TransportViolation.PATH_ON_NON_HTTP),
        (Transport.REDIS_STREAMS, "saga:{t1}:commands", None, None),
        (Transport.REDIS_STREAMS, "", None, TransportViolation.REDIS_STREAM_KEY_INVALID),
        (Transport.REDIS_STREAMS, "a\nb", None, TransportViolation.REDIS_STREAM_KEY_INVALID),
        (Transport.REDIS_STREAMS, "k", "/", TransportViolation.PATH_ON_NON_HTTP),
    ],
)
def test_s_route_05_to_08_transport_contract(
    transport: Transport, address: str, path: str | None, violation: TransportViolation | None
) -> None:
    assert validate_transport(transport, address, path) is violation


@given(st.text(max_size=30))
def test_s_route_05_bare_origins_have_nothing_after_the_authority(text: str) -> None:
    if is_bare_origin(text, ("http", "https")):
        rest = text.split("://", 1)[1]
        assert not set(rest) & set("/?#@ ") and rest == rest.lower()


@given(st.text(alphabet="/ab.%", max_size=12))
def test_s_route_05_canonical_paths_have_no_empty_or_dot_segments(path: str) -> None:
    if is_canonical_base_path(path) and path != "/":
        segments = path[1:].split("/")
        assert all(s not in ("", ".", "..") for s in segments) and "%" not in path


@given(st.text(max_size=260))
def test_s_route_07_topic_and_stream_names_stay_inside_their_alphabets(name: str) -> None:
    if is_kafka_topic(name):
        assert 0 < len(name) <= 249 and name.isascii() and " " not in name
    if is_redis_stream_key(name):
        assert 0 < len(name) <= 256 and name.isprintable() and " " not in name


def test_s_route_04_registration_and_publisher_share_the_contract() -> None:
    bad = http(origin="https://a.example/x")
    store = base()
    after, outcome = register(store, bad)
    assert outcome == RouteInvalid(TransportViolation.HTTP_ORIGIN_NOT_BARE) and after is store
    assert publisher_target(bad) == outcome
    assert publisher_target(http()) == PublisherTarget(Transport.HTTP, "https://a.example/saga")
    assert publisher_target(kafka()) == PublisherTarget(Transport.KAFKA, "saga.commands")


def test_s_route_04_candidate_activation_refuses_routes_that_break_the_contract() -> None:
    store = store_with(ART, activate=False)
    store, _ = register(store, http())
    bad_route = CapabilityRoute(http(replica="r9", origin="https://x.example/oops"), 1, 1_000)
    routes = RouteTable({**store.routes.routes, bad_route.descriptor.key: bad_route})
    smuggled = attrs.evolve(store, routes=routes)
    after, outcome = change_lifecycle(smuggled, ChangeLifecycle(KEY, LifecycleAction.ACTIVATE), 0)
    assert outcome == ActivationBlocked(KEY, (bad_route.descriptor.key,))
    assert after is smuggled
    _, fine = change_lifecycle(store, ChangeLifecycle(KEY, LifecycleAction.ACTIVATE), 0)
    assert not isinstance(fine, ActivationBlocked)


# -- S-ROUTE-09..12 ---------------------------------------------------------------------


def test_s_route_09_expiry_makes_the_replica_unroutable_and_leaves_the_definition() -> None:
    store, _ = register(base(), http(), lease=100)
    assert isinstance(select_capability_routes(store, QUERY, 99), RouteSet)
    assert select_capability_routes(store, QUERY, 100) == NoRoute(QUERY)
    after, outcome = renew_capability(store, RenewCapability(cap(), 1, "svc-a", 100, 100))
    assert outcome == LeaseExpired(cap(), 100) and after is store
    assert store.catalog == base().catalog


def test_s_route_09_renewal_needs_the_current_generation() -> None:
    store, _ = register(base(), http())
    store, _ = register(store, http(origin="https://b.example"))
    after, stale = renew_capability(store, RenewCapability(cap(), 1, "svc-a", 500, 10))
    assert stale == StaleGeneration(cap(), 1, 2) and after is store
    _, renewed = renew_capability(store, RenewCapability(cap(), 2, "svc-a", 5_000, 10))
    assert renewed == CapabilityRenewed(cap(), 2, 5_010)


def test_s_route_10_snapshot_pairs_loadable_definitions_with_live_routes() -> None:
    store, _ = register(base(), http(), lease=100)
    store, _ = register(store, http(replica="r2"), lease=1_000)
    snapshot = catalog_snapshot(store, 500)
    assert snapshot.registry_revision == store.registry_revision
    assert [e.key for e in snapshot.definitions] == [KEY]
    assert [r.descriptor.key.replica for r in snapshot.routes] == ["r2"]
    unloadable = store_with(ART, activate=False)
    assert catalog_snapshot(unloadable, 0).definitions == ()


def test_s_route_11_http_and_grpc_return_every_replica() -> None:
    store, _ = register(base(), http("r2", origin="https://b.example"))
    store, _ = register(store, http("r1"))
    selected = select_capability_routes(store, QUERY, 0)
    assert isinstance(selected, RouteSet)
    assert [r.descriptor.key.replica for r in selected.routes] == ["r1", "r2"]


def test_s_route_11_kafka_replicas_must_share_one_topic() -> None:
    store, _ = register(base(), kafka("r1"))
    store, _ = register(store, kafka("r2"))
    assert isinstance(select_capability_routes(store, QUERY, 0), RouteSet)
    store, _ = register(store, kafka("r3", topic="other"))
    selected = select_capability_routes(store, QUERY, 0)
    assert isinstance(selected, AmbiguousRoute) and len(selected.targets) == 2


def test_s_route_11_mixed_transports_are_ambiguous() -> None:
    store, _ = register(base(), kafka("r1"))
    store, _ = register(store, http("r2"))
    assert isinstance(select_capability_routes(store, QUERY, 0), AmbiguousRoute)


def test_s_route_12_single_route_selection_never_collapses_replicas() -> None:
    store, _ = register(base(), http("r1"))
    only = select_capability_route(store, QUERY, 0)
    assert isinstance(only, SelectedRoute) and only.route.descriptor.key.replica == "r1"
    store, _ = register(store, http("r2", origin="https://b.example"))
    both = select_capability_route(store, QUERY, 0)
    assert isinstance(both, AmbiguousRoute) and len(both.targets) == 2
    assert select_capability_route(base(), QUERY, 0) == NoRoute(QUERY)


def test_s_route_12_replicas_sharing_one_target_are_one_destination() -> None:
    store, _ = register(base(), kafka("r1"))
    store, _ = register(store, kafka("r2"))
    assert isinstance(select_capability_route(store, QUERY, 0), SelectedRoute)
