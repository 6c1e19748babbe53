"""Starting sagas: idempotency, payloads, eligibility checkpoints, commit fates (S-START-*)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    ALWAYS_ELIGIBLE,
    JSON_CONTRACT,
    AlreadyExists,
    CommitFate,
    Decision,
    DefinitionKey,
    Eligibility,
    EligibilityRevoked,
    OrchestratorStore,
    OutcomeUnknown,
    PayloadContract,
    PayloadProblem,
    PayloadRejected,
    Phase,
    QuotaExhausted,
    QuotaMode,
    RolledBack,
    SagaPayload,
    SagaStatus,
    StartAttempt,
    StartConflict,
    Started,
    StartSaga,
    checkpoints,
    definition_digest,
    journal_of,
    mark_command_published,
    pending_commands,
    saga_id_for,
    start_digest_for,
    start_saga,
    timer_id_for,
)
from tests.model.saga.builders import (
    Driver,
    always,
    artifact,
    commit_fates,
    participants,
    start,
    started,
    step,
    store_with,
    three_steps,
)

ART = three_steps()
KEY = ART.key
BLOB = PayloadContract("application/octet-stream", "blob-v1")
RAW_ART = artifact([step("a", "svc-a"), step("b", "svc-b")], workflow="raw", first_input=BLOB)


def base() -> OrchestratorStore:
    return store_with(ART, RAW_ART)


def attempt(business_key: str = "order-1", payload: bytes = b'{"sku": 1}', **kw: object) -> StartAttempt:
    return StartAttempt(StartSaga(KEY, business_key, json_payload=payload), now_ms=0, **kw)  # type: ignore[arg-type]


# -- S-START-01..03 --------------------------------------------------------------------


def test_s_start_01_business_key_names_the_saga() -> None:
    store, first = started(base(), KEY, "order-1")
    store, second = started(store, KEY, "order-2")
    assert first == saga_id_for(KEY.tenant, KEY.workflow, "order-1")
    assert first != second and set(store.instances) == {first, second}


def test_s_start_02_replay_with_same_digest_is_already_exists_running_or_terminal() -> None:
    store, saga_id = started(base(), KEY)
    again, replay = start(store, KEY)
    assert isinstance(replay, AlreadyExists) and replay.saga_id == saga_id
    assert again is store
    driver = Driver(store, participants(store))
    driver.run(always(Decision.SUCCEED))
    assert driver.store.instances[saga_id].status is SagaStatus.COMPLETED
    again, replay = start(driver.store, KEY)
    assert isinstance(replay, AlreadyExists) and again is driver.store


def test_s_start_02_replay_with_different_digest_conflicts() -> None:
    store, saga_id = started(base(), KEY)
    again, outcome = start(store, KEY, payload=b'{"sku": 2}')
    assert isinstance(outcome, StartConflict)
    assert outcome.saga_id == saga_id and outcome.existing_digest != outcome.offered_digest
    assert again is store


def test_s_start_03_a_start_writes_all_six_facts_together() -> None:
    before = base()
    store, outcome = start(before, KEY, now_ms=50)
    assert isinstance(outcome, Started)
    instance = store.instances[outcome.saga_id]
    assert instance.status is SagaStatus.RUNNING and instance.revision == 1
    assert store.receipts[outcome.saga_id].start_digest == outcome.start_digest
    (entry,) = journal_of(store, outcome.saga_id)
    assert entry.before is None and entry.after is SagaStatus.RUNNING
    assert store.quota_used == {KEY.tenant: 1}
    (command,) = pending_commands(store)
    assert command.command_id == outcome.first_command_id
    timer = store.timers.timers[timer_id_for(command.command_id)]
    assert timer.due_ms == 50 + ART.steps[0].timeout_ms


start_attempts = st.builds(
    StartAttempt,
    request=st.builds(
        StartSaga,
        definition=st.sampled_from([KEY, RAW_ART.key, DefinitionKey("t1", "missing", 1)]),
        business_key=st.sampled_from(["order-1", "order-2"]),
        json_payload=st.sampled_from([None, b'{"sku": 1}', b"{bad", b"NaN"]),
        raw_payload=st.sampled_from(
            [None, SagaPayload(b"\x00\x01", BLOB), SagaPayload(b"\x00", PayloadContract("x/y"))]
        ),
    ),
    now_ms=st.integers(0, 10),
    resumptions=st.integers(0, 3),
    eligibility=st.builds(Eligibility, st.none() | st.integers(0, 5), st.booleans()),
    joined_outer=st.booleans(),
    commit=commit_fates,
)


@given(st.lists(start_attempts, min_size=1, max_size=6), st.sampled_from([None, 1, 2]))
def test_s_start_03_rejected_admissions_leave_nothing(
    attempts: list[StartAttempt], quota: int | None
) -> None:
    store = OrchestratorStore(
        catalog=base().catalog, quota_limit=quota, trusted_producers=frozenset({"svc-a"})
    )
    for a in attempts:
        after, outcome = start_saga(store, a)
        applied = isinstance(outcome, Started) or (
            isinstance(outcome, OutcomeUnknown) and a.commit is CommitFate.UNKNOWN_APPLIED
        )
        if applied:
            assert len(after.instances) == len(store.instances) + 1
            assert len(after.journal) == len(store.journal) + 1
            assert len(after.outbox) == len(store.outbox) + 1
            assert len(after.timers.timers) == len(store.timers.timers) + 1
            assert sum(after.quota_used.values()) == sum(store.quota_used.values()) + 1
        else:
            assert after is store, outcome
        store = after


# -- S-START-04..08: eligibility and commit ---------------------------------------------


@pytest.mark.parametrize("resumptions", [0, 1, 3])
def test_s_start_04_each_checkpoint_can_revoke_and_rolls_back(resumptions: int) -> None:
    store = base()
    points = checkpoints(attempt(resumptions=resumptions))
    assert points == tuple(range(resumptions + 2))
    for point in points:
        a = attempt(resumptions=resumptions, eligibility=Eligibility(revoked_at=point))
        after, outcome = start_saga(store, a)
        assert outcome == EligibilityRevoked(point)
        assert after is store
    _, beyond = start_saga(store, attempt(resumptions=resumptions, eligibility=Eligibility(len(points))))
    assert isinstance(beyond, Started)


@pytest.mark.parametrize(
    ("fate", "reported", "applied"),
    [
        (CommitFate.COMMITTED, Started, True),
        (CommitFate.ROLLED_BACK, RolledBack, False),
        (CommitFate.UNKNOWN_APPLIED, OutcomeUnknown, True),
        (CommitFate.UNKNOWN_NOT_APPLIED, OutcomeUnknown, False),
    ],
)
@pytest.mark.parametrize("lapses", [False, True])
def test_s_start_05_after_commit_sent_success_or_unknown_never_rollback(
    fate: CommitFate, reported: type, applied: bool, lapses: bool
) -> None:
    store = base()
    after, outcome = start_saga(store, attempt(commit=fate, eligibility=Eligibility(None, lapses)))
    assert type(outcome) is reported
    assert bool(after.instances) is applied
    # the next replay reveals the truth an unknown outcome hid
    _, replay = start_saga(after, attempt())
    assert isinstance(replay, AlreadyExists if applied else Started)


def test_s_start_06_joined_start_leaves_the_last_gate_to_the_outer_transaction() -> None:
    store = base()
    assert checkpoints(attempt(resumptions=2, joined_outer=True)) == (0, 1, 2)
    last_gate = Eligibility(revoked_at=3)
    _, standalone = start_saga(store, attempt(resumptions=2, eligibility=last_gate))
    assert standalone == EligibilityRevoked(3)
    _, joined = start_saga(store, attempt(resumptions=2, eligibility=last_gate, joined_outer=True))
    assert isinstance(joined, Started)
    _, outer_lost = start_saga(store, attempt(joined_outer=True, commit=CommitFate.UNKNOWN_APPLIED))
    assert isinstance(outer_lost, OutcomeUnknown)


@given(st.integers(0, 100))
def test_s_start_07_unconstrained_start_always_holds(point: int) -> None:
    assert ALWAYS_ELIGIBLE.holds_at(point)
    assert not Eligibility(revoked_at=point).holds_at(point)


@pytest.mark.parametrize("point", [0, 1, 2])
def test_s_start_08_replays_pass_every_checkpoint_too(point: int) -> None:
    store, _ = started(base(), KEY)
    after, outcome = start_saga(store, attempt(resumptions=1, eligibility=Eligibility(point)))
    assert outcome == EligibilityRevoked(point)
    assert after is store


# -- S-START-09..13: payloads and quota --------------------------------------------------


def test_s_start_09_start_digest_covers_every_input() -> None:
    payload = SagaPayload(b"{}", JSON_CONTRACT)
    digest = definition_digest(ART)
    reference = start_digest_for(KEY, digest, "k", payload)
    assert reference == start_digest_for(KEY, digest, "k", SagaPayload(b"{}", JSON_CONTRACT))
    variants = [
        start_digest_for(DefinitionKey("t1", "checkout", 2), digest, "k", payload),
        start_digest_for(KEY, "0" * 64, "k", payload),
        start_digest_for(KEY, digest, "k2", payload),
        start_digest_for(KEY, digest, "k", SagaPayload(b"{ }", JSON_CONTRACT)),
        start_digest_for(KEY, digest, "k", SagaPayload(b"{}", PayloadContract("application/json", "s"))),
    ]
    assert reference not in variants and len(set(variants)) == len(variants)


def test_s_start_10_at_most_one_payload() -> None:
    store = base()
    request = StartSaga(KEY, "order-1", json_payload=b"{}", raw_payload=SagaPayload(b"{}", JSON_CONTRACT))
    after, outcome = start_saga(store, StartAttempt(request, now_ms=0))
    assert outcome == PayloadRejected(PayloadProblem.BOTH_GIVEN)
    assert after is store


def test_s_start_10_a_start_without_input_is_admitted_and_its_command_carries_none() -> None:
    """Seed: 两者互斥 — exclusive, neither required (docs/nasaga-findings.md N-15)."""
    store, outcome = start_saga(base(), StartAttempt(StartSaga(KEY, "order-1"), now_ms=0))
    assert isinstance(outcome, Started)
    assert store.instances[outcome.saga_id].first_payload is None
    (command,) = pending_commands(store)
    assert command.payload is None
    # The absence is part of the digest: a replay without input is the same start, one with
    # an (empty) input another.
    _, replay = start_saga(store, StartAttempt(StartSaga(KEY, "order-1"), now_ms=1))
    assert replay == AlreadyExists(outcome.saga_id, outcome.start_digest)
    _, other = start(store, KEY, payload=b"{}")
    assert isinstance(other, StartConflict)
    digest = store.instances[outcome.saga_id].definition_digest
    assert start_digest_for(KEY, digest, "order-1", None) != start_digest_for(
        KEY, digest, "order-1", SagaPayload(b"", JSON_CONTRACT)
    )


def test_s_start_11_json_is_validated_and_kept_byte_for_byte() -> None:
    spaced = b'{ "sku" :  1 ,\n "note": "\\u00e9" }'
    store, outcome = start(base(), KEY, payload=spaced)
    assert isinstance(outcome, Started)
    assert store.instances[outcome.saga_id].first_payload.data is spaced
    (command,) = pending_commands(store)
    assert command.payload is not None and command.payload.data == spaced
    for bad in (b"{", b"NaN", b'{"x": Infinity}', b"\xff", b"{} {}"):
        before = base()
        after, refused = start(before, KEY, payload=bad)
        assert refused == PayloadRejected(PayloadProblem.INVALID_JSON), bad
        assert after is before


def test_s_start_11_non_json_needs_a_schema_and_the_declared_contract() -> None:
    store = base()
    key = RAW_ART.key

    def raw(payload: SagaPayload) -> object:
        return start_saga(store, StartAttempt(StartSaga(key, "r-1", raw_payload=payload), now_ms=0))[1]

    assert raw(SagaPayload(b"\x00", PayloadContract("application/octet-stream"))) == PayloadRejected(
        PayloadProblem.SCHEMA_REQUIRED
    )
    assert raw(SagaPayload(b"\x00", PayloadContract("application/octet-stream", "other"))) == (
        PayloadRejected(PayloadProblem.CONTRACT_MISMATCH)
    )
    assert isinstance(raw(SagaPayload(b"\x00\xff", BLOB)), Started)
    _, json_on_raw = start(store, key)
    assert json_on_raw == PayloadRejected(PayloadProblem.CONTRACT_MISMATCH)


def test_s_start_12_only_first_step_execute_commands_carry_the_payload() -> None:
    store, saga_id = started(base(), KEY)
    driver = Driver(store, participants(store))
    # first attempt lost, second attempt succeeds, step 1 rejects: compensation of step 0
    (first,) = pending_commands(driver.store)
    driver.store, _ = mark_command_published(driver.store, first.command_id)
    driver.now_ms = 10_000
    driver.fire_due()
    driver.run(lambda c: Decision.REJECT if c.step_index == 1 else Decision.SUCCEED)
    commands = [e.command for e in driver.store.outbox.values()]
    assert driver.store.instances[saga_id].status is SagaStatus.COMPENSATED
    firsts = [c for c in commands if c.phase is Phase.EXECUTE and c.step_index == 0]
    assert [c.attempt for c in firsts] == [1, 2]
    assert all(c.payload == first.payload and c.payload is not None for c in firsts)
    others = [c for c in commands if c not in firsts]
    assert {c.phase for c in others} == {Phase.EXECUTE, Phase.COMPENSATE}
    assert all(c.payload is None for c in others)


@pytest.mark.parametrize("mode", list(QuotaMode))
def test_s_start_13_a_terminal_instance_returns_its_unit_only_in_flight(mode: QuotaMode) -> None:
    """N-10: in ``IN_FLIGHT`` mode the transition that completes an instance returns its unit,
    so the next key starts; in ``ADMITTED`` mode it stays refused. Replays take no unit."""
    store = attrs.evolve(store_with(ART, quota_limit=1), quota_mode=mode)
    store, _ = started(store, KEY, "order-1")
    driver = Driver(store, participants(store))
    driver.run(always(Decision.SUCCEED))
    store = driver.store
    assert store.instances[saga_id_for(KEY.tenant, KEY.workflow, "order-1")].status is SagaStatus.COMPLETED
    assert store.quota_used[KEY.tenant] == (0 if mode is QuotaMode.IN_FLIGHT else 1)
    _, replay = start(store, KEY, "order-1")
    assert isinstance(replay, AlreadyExists)
    after, outcome = start(store, KEY, "order-2")
    if mode is QuotaMode.IN_FLIGHT:
        assert isinstance(outcome, Started) and after.quota_used[KEY.tenant] == 1
    else:
        assert outcome == QuotaExhausted(KEY.tenant, 1) and after is store


def test_s_start_13_quota_limits_admissions_per_tenant() -> None:
    store = store_with(ART, quota_limit=1)
    store, _ = started(store, KEY, "order-1")
    after, outcome = start(store, KEY, "order-2")
    assert outcome == QuotaExhausted(KEY.tenant, 1)
    assert after is store
    _, replay = start(store, KEY, "order-1")
    assert isinstance(replay, AlreadyExists)
