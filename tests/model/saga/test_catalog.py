"""Definition catalog: publish, lifecycle table, retirement references (S-DEF-01, S-CAT-*)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    LIFECYCLE_RANK,
    LIFECYCLE_TRANSITIONS,
    AlreadyExists,
    AlreadyPublished,
    CapabilityDescriptor,
    CapabilityKey,
    CapabilityRegistered,
    ChangeLifecycle,
    Decision,
    DefinitionConflict,
    DefinitionNotLoadable,
    DefinitionNotStartable,
    DefinitionReference,
    DigestMismatch,
    IllegalLifecycleTransition,
    InstanceNotReleasable,
    InstanceReleased,
    InvalidDefinition,
    Lifecycle,
    LifecycleAction,
    LifecycleChanged,
    LifecycleUnchanged,
    OrchestratorStore,
    PublishDefinition,
    Published,
    RecordReference,
    ReferenceKind,
    RegisterCapability,
    RenewCapability,
    RetirementBlocked,
    SagaStatus,
    StartConflict,
    Transport,
    UnknownDefinition,
    change_lifecycle,
    definition_digest,
    definition_references,
    load_definition,
    mark_command_published,
    next_lifecycle,
    publish_definition,
    query_definition,
    record_reference,
    register_capability,
    release_instance,
    release_reference,
    renew_capability,
)
from tests.model.saga.builders import (
    OWNERS,
    Driver,
    always,
    artifact,
    participants,
    start,
    started,
    step,
    three_steps,
)

ART = three_steps()
KEY = ART.key
DIGEST = definition_digest(ART)
CRED = "a" * 64


def move(
    store: OrchestratorStore, action: LifecycleAction, now_ms: int = 0
) -> tuple[OrchestratorStore, object]:
    return change_lifecycle(store, ChangeLifecycle(KEY, action), now_ms)


def lifecycle_of(store: OrchestratorStore) -> Lifecycle:
    return store.catalog.entries[KEY].lifecycle


def fresh() -> OrchestratorStore:
    empty = OrchestratorStore(trusted_producers=frozenset(OWNERS))
    store, outcome = publish_definition(empty, PublishDefinition(ART, DIGEST))
    assert isinstance(outcome, Published)
    return store


def finish_all(store: OrchestratorStore) -> OrchestratorStore:
    driver = Driver(store, participants(store))
    driver.run(always(Decision.SUCCEED))
    for command_id in list(driver.store.outbox):
        driver.store, _ = mark_command_published(driver.store, command_id)
    return driver.store


# -- S-DEF-01 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        ([], "at least one step"),
        ([step("a", "svc-a"), step("a", "svc-b")], "unique"),
        ([step("a", "svc-a", timeout_ms=0)], "timeout_ms"),
        ([step("a", "svc-a", max_attempts=0)], "max_attempts"),
        ([step("a", "svc-a", resolve_budget=0)], "resolve_budget"),
        ([step("a", "svc-a", compensation=None), step("b", "svc-b")], "non-compensable"),
    ],
)
def test_s_def_01_invalid_definitions_are_refused(steps: list, needle: str) -> None:  # type: ignore[type-arg]
    art = artifact(steps)
    store, outcome = publish_definition(OrchestratorStore(), PublishDefinition(art, definition_digest(art)))
    assert isinstance(outcome, InvalidDefinition)
    assert any(needle in p for p in outcome.problems)
    assert store == OrchestratorStore()


# -- S-CAT-01..03 ----------------------------------------------------------------------


def test_s_cat_01_published_entry_keeps_document_and_digest() -> None:
    entry = fresh().catalog.entries[KEY]
    assert entry.digest == DIGEST and entry.lifecycle is Lifecycle.CANDIDATE
    assert entry.artifact == ART and entry.document.startswith(b"L6:")


def test_s_cat_02_claimed_digest_must_match() -> None:
    store, outcome = publish_definition(OrchestratorStore(), PublishDefinition(ART, "0" * 64))
    assert outcome == DigestMismatch(KEY, "0" * 64, DIGEST)
    assert store == OrchestratorStore()


def test_s_cat_03_same_digest_is_idempotent_in_every_lifecycle() -> None:
    store = fresh()
    for action in (None, LifecycleAction.ACTIVATE, LifecycleAction.DEPRECATE, LifecycleAction.RETIRE):
        if action is not None:
            store, _ = move(store, action)
        again, outcome = publish_definition(store, PublishDefinition(ART, DIGEST))
        assert outcome == AlreadyPublished(KEY, DIGEST, lifecycle_of(store))
        assert again is store
    assert lifecycle_of(store) is Lifecycle.RETIRED


def test_s_cat_03_different_digest_under_same_key_conflicts() -> None:
    store = fresh()
    other = artifact([step("x", "svc-a")], workflow=KEY.workflow, version=KEY.version)
    again, outcome = publish_definition(store, PublishDefinition(other, definition_digest(other)))
    assert outcome == DefinitionConflict(KEY, DIGEST, definition_digest(other))
    assert again is store


# -- S-CAT-04 --------------------------------------------------------------------------


def test_s_cat_04_lifecycle_runs_forward_one_step_at_a_time() -> None:
    store = fresh()
    for action, after in [
        (LifecycleAction.ACTIVATE, Lifecycle.ACTIVE),
        (LifecycleAction.DEPRECATE, Lifecycle.DEPRECATED),
        (LifecycleAction.RETIRE, Lifecycle.RETIRED),
    ]:
        before = lifecycle_of(store)
        store, outcome = move(store, action)
        assert outcome == LifecycleChanged(KEY, before, after)
        store, repeated = move(store, action)
        assert repeated == LifecycleUnchanged(KEY, after)


@pytest.mark.parametrize(
    ("setup", "action"),
    [
        ([], LifecycleAction.DEPRECATE),
        ([], LifecycleAction.RETIRE),
        ([LifecycleAction.ACTIVATE], LifecycleAction.RETIRE),
        ([LifecycleAction.ACTIVATE, LifecycleAction.DEPRECATE], LifecycleAction.ACTIVATE),
    ],
)
def test_s_cat_04_skipping_or_going_back_is_illegal(
    setup: list[LifecycleAction], action: LifecycleAction
) -> None:
    store = fresh()
    for a in setup:
        store, _ = move(store, a)
    again, outcome = move(store, action)
    assert outcome == IllegalLifecycleTransition(KEY, lifecycle_of(store), action)
    assert again is store


def test_s_cat_04_unknown_definition() -> None:
    empty = OrchestratorStore()
    store, outcome = move(empty, LifecycleAction.ACTIVATE)
    assert outcome == UnknownDefinition(KEY) and store is empty


@given(st.lists(st.sampled_from(list(LifecycleAction)), max_size=12))
def test_s_cat_04_rank_never_decreases(actions: list[LifecycleAction]) -> None:
    store = fresh()
    for action in actions:
        before = lifecycle_of(store)
        store, outcome = move(store, action)
        after = lifecycle_of(store)
        assert LIFECYCLE_RANK[after] >= LIFECYCLE_RANK[before]
        if isinstance(outcome, LifecycleChanged):
            assert LIFECYCLE_TRANSITIONS[(before, action)] is after
            assert next_lifecycle(before, action) is after
        else:
            assert after is before


# -- S-CAT-05, S-CAT-06 ----------------------------------------------------------------


def test_s_cat_05_deprecated_blocks_new_starts_only() -> None:
    store = fresh()
    store, _ = move(store, LifecycleAction.ACTIVATE)
    store, saga_id = started(store, KEY, "order-1")
    store, _ = move(store, LifecycleAction.DEPRECATE)
    blocked, outcome = start(store, KEY, "order-2")
    assert outcome == DefinitionNotStartable(KEY, Lifecycle.DEPRECATED)
    assert blocked is store
    _, replay = start(store, KEY, "order-1")
    assert isinstance(replay, AlreadyExists) and replay.saga_id == saga_id
    _, conflicting = start(store, KEY, "order-1", payload=b'{"sku": 2}')
    assert isinstance(conflicting, StartConflict)


def test_s_cat_05_candidate_admits_no_start() -> None:
    candidate = fresh()
    store, outcome = start(candidate, KEY)
    assert outcome == DefinitionNotStartable(KEY, Lifecycle.CANDIDATE) and store is candidate


def test_s_cat_06_running_instances_keep_their_frozen_digest_after_deprecation() -> None:
    store = fresh()
    store, _ = move(store, LifecycleAction.ACTIVATE)
    store, saga_id = started(store, KEY)
    store, _ = move(store, LifecycleAction.DEPRECATE)
    newer = three_steps(version=2)
    store, _ = publish_definition(store, PublishDefinition(newer, definition_digest(newer)))
    driver = Driver(store, participants(store))
    driver.run(always(Decision.SUCCEED))
    instance = driver.store.instances[saga_id]
    assert instance.status is SagaStatus.COMPLETED
    assert instance.definition == KEY and instance.definition_digest == DIGEST
    assert {e.command.definition_digest for e in driver.store.outbox.values()} == {DIGEST}
    assert isinstance(load_definition(driver.store, KEY), type(driver.store.catalog.entries[KEY]))


# -- S-CAT-07, S-CAT-11 ----------------------------------------------------------------


def deprecated_with_instance() -> tuple[OrchestratorStore, str]:
    store = fresh()
    store, _ = move(store, LifecycleAction.ACTIVATE)
    store, saga_id = started(store, KEY)
    store, _ = move(store, LifecycleAction.DEPRECATE)
    return store, saga_id


def test_s_cat_07_running_instance_and_pending_outbox_block_retirement() -> None:
    store, saga_id = deprecated_with_instance()
    again, outcome = move(store, LifecycleAction.RETIRE)
    assert isinstance(outcome, RetirementBlocked)
    assert DefinitionReference(ReferenceKind.INSTANCE, KEY, saga_id) in outcome.references
    kinds = {r.kind for r in outcome.references}
    assert kinds == {ReferenceKind.INSTANCE, ReferenceKind.OUTBOX}
    assert again is store


def test_s_cat_07_terminal_instance_and_published_outbox_block_until_released() -> None:
    """A published command is still a retained message (N-11): it blocks with its instance and
    is released with it, under the one retention policy."""
    store, saga_id = deprecated_with_instance()
    store = finish_all(store)
    assert store.instances[saga_id].status is SagaStatus.COMPLETED
    assert store.outbox and all(e.published for e in store.outbox.values())
    _, outcome = move(store, LifecycleAction.RETIRE)
    assert isinstance(outcome, RetirementBlocked)
    assert {r.kind for r in outcome.references} == {ReferenceKind.INSTANCE, ReferenceKind.OUTBOX}
    store, released = release_instance(store, saga_id)
    assert released == InstanceReleased(saga_id)
    assert not any(e.command.saga_id == saga_id for e in store.outbox.values())
    assert any(e.saga_id == saga_id for e in store.journal)  # the journal stays (S-CAT-11)
    store, retired = move(store, LifecycleAction.RETIRE)
    assert isinstance(retired, LifecycleChanged) and retired.after is Lifecycle.RETIRED


def test_s_cat_07_running_instance_cannot_be_released() -> None:
    store, saga_id = deprecated_with_instance()
    again, outcome = release_instance(store, saga_id)
    assert isinstance(outcome, InstanceNotReleasable) and outcome.status is SagaStatus.RUNNING
    assert again is store


@pytest.mark.parametrize("kind", [ReferenceKind.MIGRATION, ReferenceKind.AUDIT])
def test_s_cat_07_migration_and_audit_references_block_until_released(kind: ReferenceKind) -> None:
    store = fresh()
    store, _ = move(store, LifecycleAction.ACTIVATE)
    store, _ = move(store, LifecycleAction.DEPRECATE)
    ref = DefinitionReference(kind, KEY, "ref-1")
    store, _ = record_reference(store, RecordReference(ref))
    _, outcome = move(store, LifecycleAction.RETIRE)
    assert outcome == RetirementBlocked(KEY, frozenset({ref}))
    store, _ = release_reference(store, ref)
    _, retired = move(store, LifecycleAction.RETIRE)
    assert isinstance(retired, LifecycleChanged)


def test_s_cat_07_only_external_references_are_recorded() -> None:
    with pytest.raises(ValueError):
        RecordReference(DefinitionReference(ReferenceKind.INSTANCE, KEY, "x"))


def capability(
    store: OrchestratorStore, lease_ms: int = 1_000, now_ms: int = 0
) -> tuple[OrchestratorStore, object]:
    descriptor = CapabilityDescriptor(
        CapabilityKey(KEY, 0, "svc-a", "r1"), Transport.HTTP, "https://a.example", "/saga", CRED
    )
    return register_capability(store, RegisterCapability(descriptor, "svc-a", lease_ms, now_ms))


def test_s_cat_07_live_capability_lease_blocks_until_it_expires() -> None:
    store = fresh()
    store, _ = capability(store, lease_ms=1_000, now_ms=0)
    store, _ = move(store, LifecycleAction.ACTIVATE)
    store, _ = move(store, LifecycleAction.DEPRECATE)
    _, outcome = move(store, LifecycleAction.RETIRE, now_ms=999)
    assert isinstance(outcome, RetirementBlocked)
    assert {r.kind for r in outcome.references} == {ReferenceKind.CAPABILITY_LEASE}
    assert definition_references(store, KEY, 1_000) == frozenset()
    _, retired = move(store, LifecycleAction.RETIRE, now_ms=1_000)
    assert isinstance(retired, LifecycleChanged)


def test_s_cat_11_retiring_deletes_no_fact() -> None:
    store, saga_id = deprecated_with_instance()
    store = finish_all(store)
    store, _ = release_instance(store, saga_id)
    before = store
    store, _ = move(store, LifecycleAction.RETIRE)
    assert attrs.evolve(store, catalog=before.catalog, registry_revision=before.registry_revision) == before
    assert saga_id in store.receipts and store.journal == before.journal


# -- S-CAT-08..10 ----------------------------------------------------------------------


def retired_store() -> OrchestratorStore:
    store = fresh()
    store, _ = capability(store, lease_ms=10, now_ms=0)
    for action in (LifecycleAction.ACTIVATE, LifecycleAction.DEPRECATE):
        store, _ = move(store, action)
    store, outcome = move(store, LifecycleAction.RETIRE, now_ms=100)
    assert isinstance(outcome, LifecycleChanged)
    return store


def test_s_cat_08_retired_and_candidate_are_not_loaded() -> None:
    assert load_definition(fresh(), KEY) == DefinitionNotLoadable(KEY, Lifecycle.CANDIDATE)
    assert load_definition(retired_store(), KEY) == DefinitionNotLoadable(KEY, Lifecycle.RETIRED)
    assert load_definition(OrchestratorStore(), KEY) == UnknownDefinition(KEY)


def test_s_cat_08_nothing_starts_on_a_retired_definition() -> None:
    store = retired_store()
    again, outcome = start(store, KEY)
    assert outcome == DefinitionNotLoadable(KEY, Lifecycle.RETIRED)
    assert again is store


def test_s_cat_09_retired_capabilities_cannot_register_or_renew() -> None:
    store = retired_store()
    again, outcome = capability(store, now_ms=100)
    assert outcome == DefinitionNotLoadable(KEY, Lifecycle.RETIRED)
    assert again is store
    cap = CapabilityKey(KEY, 0, "svc-a", "r1")
    again, renewed = renew_capability(store, RenewCapability(cap, 1, "svc-a", 1_000, 5))
    assert renewed == DefinitionNotLoadable(KEY, Lifecycle.RETIRED)
    assert again is store


def test_s_cat_09_capabilities_register_on_candidates() -> None:
    _, outcome = capability(fresh())
    assert isinstance(outcome, CapabilityRegistered)


def test_s_cat_10_retired_artifact_stays_queryable() -> None:
    entry = query_definition(retired_store(), KEY)
    assert not isinstance(entry, UnknownDefinition)
    assert entry.lifecycle is Lifecycle.RETIRED
    assert entry.artifact == ART and entry.digest == DIGEST
    assert query_definition(OrchestratorStore(), KEY) == UnknownDefinition(KEY)
