"""MessageCommitter on every backend: branches, crashes at each fault point, lost responses, races.

Each test runs on memory, fakeredis, Redis and Cassandra in a fresh namespace. Faults come from the
seams in ``_commit_rig`` (a hook that kills the commit at a fault point; store and outbox wrappers
that lose a response or raise), never from a stand-in backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from impls.commit import SenderQuota
from model.commit import (
    FAULT_POINT_AFTER_COMMIT,
    AuthenticatedSend,
    CommitError,
    CommitErrorKind,
    CommitStage,
    CommittedMessage,
    FaultPoint,
    HistoryDirection,
    HistoryQuery,
    LoadedCommitted,
    MessageCoordinates,
    fault_points_for,
)
from tests.impls._commit_rig import (
    BACKENDS,
    CONVERSATION,
    STAGE_AT,
    T0,
    TENANT,
    Crash,
    CrashAt,
    Rig,
    open_rig,
    send,
)

pytestmark = pytest.mark.parametrize("rig", BACKENDS, indirect=True)

ALL_POINTS = list(FaultPoint)
RESERVED_POINTS = [p for p in FaultPoint if STAGE_AT[p] is not None]  # a key exists to resume


@pytest.fixture
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    async with open_rig(request.param) as opened:
        yield opened


def points_on_path(rig: Rig) -> tuple[FaultPoint, ...]:
    return fault_points_for(rig.capabilities)


def skip_unless_on_path(rig: Rig, point: FaultPoint) -> None:
    if point not in points_on_path(rig):
        pytest.skip(f"{point.value} is not on the {rig.backend} commit path")


async def raises_commit_error(kind: CommitErrorKind, call: object) -> CommitError:
    assert asyncio.iscoroutine(call)
    with pytest.raises(CommitError) as caught:
        await call
    assert caught.value.kind is kind, caught.value
    return caught.value


async def assert_next_fresh_gets(rig: Rig, message_seq: int, conversation_seq: int) -> None:
    """No sequence number was consumed by anything before: the next new message is exactly next."""
    fresh = await rig.committer().send(send(f"fresh-{message_seq}"))
    assert (fresh.coordinates.message_seq, fresh.coordinates.conversation_seq) == (
        message_seq,
        conversation_seq,
    )


# --- the branches ------------------------------------------------------------------------------


async def test_send_commits_and_acks_from_the_store(rig: Rig) -> None:
    hook = CrashAt(None)
    message = await rig.committer(fault_hook=hook).send(send("m1"))

    assert message.key == send("m1").commit_key
    assert message.conversation == CONVERSATION
    assert message.coordinates == MessageCoordinates(1, 1, T0)
    assert rig.outbox.published == [message.publication]
    assert await rig.committed(send("m1")) == message
    assert tuple(hook.passed) == points_on_path(rig)
    page = await rig.store.history_page(
        HistoryQuery(TENANT, CONVERSATION, "bob", HistoryDirection.BEFORE, None, 10, 1 << 16, T0)
    )
    assert [(e.coordinates, e.body) for e in page.entries] == [(message.coordinates, b"hello")]


async def test_atomic_stores_commit_in_one_marking_call(rig: Rig) -> None:
    await rig.committer().send(send("m1"))
    if rig.capabilities.atomic_publish_and_commit:
        assert "mark_published_and_committed" in rig.store.calls
        assert "mark_outbox_published" not in rig.store.calls
    else:
        assert rig.store.calls[-2:] == ["mark_outbox_published", "mark_committed"]
    assert "load_commit" not in rig.store.calls  # a fault-free commit never needs a re-read


async def test_repeat_replays_the_same_ack_and_consumes_nothing(rig: Rig) -> None:
    committer = rig.committer()
    first = await committer.send(send("m1"))
    rig.clock.advance(5_000)  # a later retry proposes a later accepted_at; the stored one wins
    hook = CrashAt(None)
    again = await rig.committer(fault_hook=hook).send(send("m1"))

    assert again == first
    # A replay goes through reserve (a member with no quota skips the pre-read), so it passes the
    # pre-reserve point and nothing after it: no step is taken again.
    assert hook.passed == [FaultPoint.M_COMMIT_01]
    assert rig.outbox.published == [first.publication]
    assert await committer.resume_existing(send("m1")) == first
    assert await committer.resume(first.key, CONVERSATION) == first
    await assert_next_fresh_gets(rig, 2, 2)


@pytest.mark.parametrize(
    "conflicting",
    [
        send("m1", body=b"other body"),
        send("m1", device="d2"),
        send("m1", conversation="c2"),
    ],
    ids=["content", "device", "conversation"],
)
async def test_same_key_different_request_is_a_conflict(rig: Rig, conflicting: AuthenticatedSend) -> None:
    rig.membership.set_members(TENANT, "c2", frozenset({"alice"}))
    first = await rig.committer().send(send("m1"))

    await raises_commit_error(CommitErrorKind.CONFLICT, rig.committer().send(conflicting))
    await raises_commit_error(CommitErrorKind.CONFLICT, rig.committer().resume_existing(conflicting))
    assert await rig.committed(send("m1")) == first
    await assert_next_fresh_gets(rig, 2, 2)


async def test_invalid_client_message_id_is_refused_before_anything(rig: Rig) -> None:
    bad = send("not a valid id!")
    await raises_commit_error(CommitErrorKind.INVALID_CLIENT_MESSAGE_ID, rig.committer().send(bad))
    await raises_commit_error(
        CommitErrorKind.INVALID_CLIENT_MESSAGE_ID, rig.committer().resume(bad.commit_key, CONVERSATION)
    )
    assert rig.store.calls == []
    await assert_next_fresh_gets(rig, 1, 1)


async def test_invalid_content_and_mismatched_inputs_are_invalid_requests(rig: Rig) -> None:
    committer = rig.committer()
    too_big = send("m1", body=b"x" * (64 * 1024 + 1))
    await raises_commit_error(CommitErrorKind.INVALID_REQUEST, committer.send(too_big))

    delivery, candidate = await committer.prepare(send("m2"))
    await raises_commit_error(
        CommitErrorKind.INVALID_REQUEST, committer.commit(send("m2", body=b"swapped"), delivery, candidate)
    )
    assert rig.store.calls == []


async def test_non_member_is_refused_and_nothing_is_reserved(rig: Rig) -> None:
    await raises_commit_error(
        CommitErrorKind.NOT_A_MEMBER, rig.committer().send(send("m1", sender="mallory"))
    )
    assert await rig.load(send("m1", sender="mallory")) is None
    await assert_next_fresh_gets(rig, 1, 1)


async def test_quota_refuses_new_keys_but_never_a_retry(rig: Rig) -> None:
    quota = SenderQuota(1, rig.clock)
    crash = CrashAt(FaultPoint.M_COMMIT_02)
    with pytest.raises(Crash):
        await rig.committer(quota=quota, fault_hook=crash).send(send("m1"))

    await raises_commit_error(CommitErrorKind.QUOTA_EXCEEDED, rig.committer(quota=quota).send(send("m2")))
    assert await rig.load(send("m2")) is None
    retried = await rig.committer(quota=quota).send(send("m1"))  # admitted when it was reserved
    assert retried.coordinates.message_seq == 1
    await raises_commit_error(CommitErrorKind.QUOTA_EXCEEDED, rig.committer(quota=quota).send(send("m3")))
    rig.clock.advance(60_000)  # next quota window
    assert (await rig.committer(quota=quota).send(send("m3"))).coordinates.message_seq == 2


async def test_membership_change_after_reserve_does_not_block_the_ack(rig: Rig) -> None:
    with pytest.raises(Crash):
        await rig.committer(fault_hook=CrashAt(FaultPoint.M_COMMIT_02)).send(send("m1"))
    frozen = (await rig.in_flight(send("m1"))).intent.delivery
    rig.membership.set_members(TENANT, CONVERSATION, frozenset({"bob"}))  # alice left

    message = await rig.committer().send(send("m1"))

    assert message.coordinates.message_seq == 1
    assert frozen.recipients == tuple(sorted({"alice", "bob", "carol"}))
    await raises_commit_error(CommitErrorKind.NOT_A_MEMBER, rig.committer().send(send("m2")))


# --- crashes at every fault point ----------------------------------------------------------------


async def crash_first_commit(rig: Rig, point: FaultPoint) -> AuthenticatedSend:
    """Kill a first send at ``point``; check what is durable there, and that nothing was ACKed."""
    request = send("m1")
    hook = CrashAt(point)
    with pytest.raises(Crash):
        await rig.committer(fault_hook=hook).send(request)
    assert hook.passed[-1] is point
    assert await rig.stage(request) is STAGE_AT[point]
    loaded = await rig.load(request)
    if isinstance(loaded, LoadedCommitted):
        assert loaded.message.coordinates == MessageCoordinates(1, 1, T0)
    elif loaded is not None:
        assert loaded.intent.coordinates == MessageCoordinates(1, 1, T0)  # the first reserve's
    return request


def assert_finished_as_first_reserved(rig: Rig, message: CommittedMessage) -> None:
    assert message.coordinates == MessageCoordinates(1, 1, T0)
    # The outbox is idempotent per key: whatever was acknowledged before the crash is the publication.
    assert set(rig.outbox.published) == {message.publication}


@pytest.mark.parametrize("point", ALL_POINTS, ids=[p.value for p in ALL_POINTS])
async def test_crash_then_resume_finishes_with_the_first_coordinates(rig: Rig, point: FaultPoint) -> None:
    skip_unless_on_path(rig, point)
    request = await crash_first_commit(rig, point)
    rig.clock.advance(1_000)
    survivor = rig.committer()

    if point is FaultPoint.M_COMMIT_01:
        await raises_commit_error(
            CommitErrorKind.NOT_FOUND, survivor.resume(request.commit_key, CONVERSATION)
        )
        assert await survivor.resume_existing(request) is None
        message = await survivor.send(request)  # the client's retry is the first reserve
        assert message.coordinates == MessageCoordinates(1, 1, T0 + 1_000)
    else:
        message = await survivor.resume(request.commit_key, CONVERSATION)
        assert_finished_as_first_reserved(rig, message)
        assert await survivor.send(request) == message  # the client's retry replays it

    assert await rig.committed(request) == message
    await assert_next_fresh_gets(rig, 2, 2)


@pytest.mark.parametrize("point", ALL_POINTS, ids=[p.value for p in ALL_POINTS])
async def test_crash_then_recover_due_finishes_with_the_first_coordinates(
    rig: Rig, point: FaultPoint
) -> None:
    skip_unless_on_path(rig, point)
    request = await crash_first_commit(rig, point)
    rig.clock.advance(1_000)
    survivor = rig.committer()

    recovered = await survivor.recover_due(rig.clock.now_ms(), 10)

    if point is FaultPoint.M_COMMIT_01:
        assert recovered == 0
        assert await rig.load(request) is None
    elif point is FAULT_POINT_AFTER_COMMIT:
        assert recovered == 0  # already committed: not a recovery candidate
    else:
        assert recovered == 1
    if point is not FaultPoint.M_COMMIT_01:
        message = await rig.committed(request)
        assert_finished_as_first_reserved(rig, message)
        assert await survivor.send(request) == message
    assert await rig.store.scan_recoverable_commits(rig.clock.now_ms() + 1, 10) == []
    next_seq = 1 if point is FaultPoint.M_COMMIT_01 else 2
    await assert_next_fresh_gets(rig, next_seq, next_seq)


@pytest.mark.parametrize("point", RESERVED_POINTS, ids=[p.value for p in RESERVED_POINTS])
async def test_two_committers_resuming_one_key_agree(rig: Rig, point: FaultPoint) -> None:
    skip_unless_on_path(rig, point)
    request = await crash_first_commit(rig, point)

    async def yield_at_every_point(p: FaultPoint, key: object) -> None:
        await asyncio.sleep(0)  # interleave the two committers step by step

    committers = [rig.committer(fault_hook=yield_at_every_point) for _ in range(2)]
    outcomes = await asyncio.gather(
        *(c.resume(request.commit_key, CONVERSATION) for c in committers), return_exceptions=True
    )

    acks = [o for o in outcomes if isinstance(o, CommittedMessage)]
    others = [o for o in outcomes if not isinstance(o, CommittedMessage)]
    assert acks, outcomes
    assert all(isinstance(o, CommitError) and o.kind is CommitErrorKind.RECOVERABLE for o in others), others
    assert all(a == acks[0] for a in acks)
    assert await rig.committed(request) == acks[0]
    assert_finished_as_first_reserved(rig, acks[0])
    await assert_next_fresh_gets(rig, 2, 2)


async def test_two_fresh_sends_of_one_request_race_to_one_commit(rig: Rig) -> None:
    async def yield_at_every_point(p: FaultPoint, key: object) -> None:
        await asyncio.sleep(0)

    request = send("m1")
    outcomes = await asyncio.gather(
        *(rig.committer(fault_hook=yield_at_every_point).send(request) for _ in range(3)),
        return_exceptions=True,
    )
    acks = [o for o in outcomes if isinstance(o, CommittedMessage)]
    assert acks and all(a == acks[0] for a in acks), outcomes
    assert all(
        isinstance(o, CommitError) and o.kind is CommitErrorKind.RECOVERABLE
        for o in outcomes
        if not isinstance(o, CommittedMessage)
    ), outcomes
    assert acks[0].coordinates.message_seq == 1
    await assert_next_fresh_gets(rig, 2, 2)


async def test_a_non_idempotent_outbox_still_ends_with_the_first_durable_publication(rig: Rig) -> None:
    """A committer holding a stale publication at M-COMMIT-04 loses to the one the store took."""
    request = await crash_first_commit(rig, FaultPoint.M_COMMIT_03)
    rig.outbox.duplicating = True
    at_04 = asyncio.Event()
    release = asyncio.Event()

    async def pause_at_04(point: FaultPoint, key: object) -> None:
        if point is FaultPoint.M_COMMIT_04:
            at_04.set()
            await release.wait()

    slow = asyncio.create_task(rig.committer(fault_hook=pause_at_04).resume(request.commit_key, CONVERSATION))
    await at_04.wait()  # the slow committer holds the first publication, unmarked
    fast = await rig.committer().resume(request.commit_key, CONVERSATION)
    release.set()
    late = await slow

    assert len(set(rig.outbox.published)) == 2  # two different publications were acknowledged
    assert fast.publication == rig.outbox.published[1]  # the first one the store made durable
    assert late == fast
    assert await rig.committed(request) == fast
    assert "load_commit" in rig.store.calls  # the refused publication was settled by a re-read


async def test_a_non_idempotent_outbox_after_a_lost_marking_response(rig: Rig) -> None:
    rig.outbox.duplicating = True
    marking = (
        "mark_published_and_committed"
        if rig.capabilities.atomic_publish_and_commit
        else "mark_outbox_published"
    )
    rig.store.lose_response[marking] = 1
    message = await rig.committer().send(send("m1"))
    assert rig.outbox.published == [message.publication]  # the re-read found it: no second publish
    assert await rig.committed(send("m1")) == message


# --- lost responses and failures at every store call ---------------------------------------------

STORE_WRITES = [
    "load_commit_for_request",
    "reserve",
    "put_record",
    "mark_outbox_published",
    "mark_published_and_committed",
    "mark_committed",
]


def skip_unless_called(rig: Rig, method: str) -> None:
    atomic = rig.capabilities.atomic_publish_and_commit
    if (method == "mark_published_and_committed" and not atomic) or (
        method in ("mark_outbox_published", "mark_committed") and atomic
    ):
        pytest.skip(f"{rig.backend} does not call {method} on its path")


@pytest.mark.parametrize("method", STORE_WRITES)
@pytest.mark.parametrize("fault", ["lose_response", "fail_before"])
async def test_a_store_fault_at_each_call_converges(rig: Rig, method: str, fault: str) -> None:
    skip_unless_called(rig, method)
    getattr(rig.store, fault)[method] = 2  # twice in a row, still within max_attempts

    message = await rig.committer().send(send("m1"))

    assert message.coordinates == MessageCoordinates(1, 1, T0)
    assert await rig.committed(send("m1")) == message
    assert set(rig.outbox.published) == {message.publication}
    await assert_next_fresh_gets(rig, 2, 2)


async def test_a_lost_re_read_is_retried(rig: Rig) -> None:
    rig.store.lose_response["put_record"] = 1
    rig.store.fail_before["load_commit"] = 2
    message = await rig.committer().send(send("m1"))
    assert message.coordinates.message_seq == 1
    assert rig.store.calls.count("load_commit") == 3


async def test_a_lost_outbox_ack_republishes_to_the_same_publication(rig: Rig) -> None:
    rig.outbox.lose_response = 1
    message = await rig.committer().send(send("m1"))
    assert len(rig.outbox.published) == 2
    assert set(rig.outbox.published) == {message.publication}


async def test_a_store_that_keeps_failing_ends_recoverable_never_acked(rig: Rig) -> None:
    with pytest.raises(Crash):
        await rig.committer(fault_hook=CrashAt(FaultPoint.M_COMMIT_03)).send(send("m1"))
    rig.store.calls.clear()
    rig.store.fail_before["reserve"] = 100
    rig.store.fail_before["load_commit_for_request"] = 100
    error = await raises_commit_error(
        CommitErrorKind.RECOVERABLE, rig.committer(max_attempts=3).send(send("m1"))
    )
    assert error.key == send("m1").commit_key
    # reserve fails, then the read-back fails twice: three attempts spent, then RECOVERABLE
    assert rig.store.calls.count("reserve") + rig.store.calls.count("load_commit_for_request") == 3
    assert await rig.stage(send("m1")) is CommitStage.RECORDED

    rig.store.fail_before.clear()
    assert (await rig.committer().send(send("m1"))).coordinates.message_seq == 1


async def test_a_step_that_keeps_failing_ends_recoverable_and_resumes_later(rig: Rig) -> None:
    request = await crash_first_commit(rig, FaultPoint.M_COMMIT_02)
    rig.store.fail_before["put_record"] = 100
    error = await raises_commit_error(
        CommitErrorKind.RECOVERABLE, rig.committer(max_attempts=3).resume(request.commit_key, CONVERSATION)
    )
    assert error.key == request.commit_key
    assert await rig.stage(request) is CommitStage.RESERVED
    assert rig.outbox.published == []

    rig.store.fail_before.clear()
    message = await rig.committer().resume(request.commit_key, CONVERSATION)
    assert_finished_as_first_reserved(rig, message)


# --- only CommitError leaves ------------------------------------------------------------------------


@pytest.mark.parametrize("method", [*STORE_WRITES, "load_commit"])
async def test_an_unexpected_store_exception_becomes_a_commit_error(rig: Rig, method: str) -> None:
    if method != "load_commit":
        skip_unless_called(rig, method)
    rig.store.unexpected.add(method)
    if method == "load_commit":
        rig.store.lose_response["put_record"] = 1  # the only way a fresh send re-reads
    # A fresh send by a member goes straight to reserve; resume_existing always reads the request.
    call = (
        rig.committer().resume_existing(send("m1"))
        if method == "load_commit_for_request"
        else rig.committer().send(send("m1"))
    )
    error = await raises_commit_error(CommitErrorKind.RECOVERABLE, call)
    assert error.key == send("m1").commit_key
    assert "store bug" not in str(error)

    rig.store.unexpected.clear()
    assert (await rig.committer().send(send("m1"))).coordinates.message_seq == 1


async def test_an_unexpected_outbox_exception_becomes_a_commit_error(rig: Rig) -> None:
    rig.outbox.unexpected = True
    await raises_commit_error(CommitErrorKind.RECOVERABLE, rig.committer().send(send("m1")))
    assert await rig.stage(send("m1")) is CommitStage.RECORDED


async def test_crashes_and_cancellation_pass_through_untouched(rig: Rig) -> None:
    async def cancelled(point: FaultPoint, key: object) -> None:
        if point is FaultPoint.M_COMMIT_03:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await rig.committer(fault_hook=cancelled).send(send("m1"))
    assert await rig.stage(send("m1")) is CommitStage.RECORDED


async def test_recover_due_scan_failures_and_bad_arguments(rig: Rig) -> None:
    committer = rig.committer()
    await raises_commit_error(CommitErrorKind.INVALID_REQUEST, committer.recover_due(T0, 0))
    rig.store.fail_before["scan_recoverable_commits"] = 1
    await raises_commit_error(CommitErrorKind.UNAVAILABLE, committer.recover_due(T0, 10))
    rig.store.unexpected.add("scan_recoverable_commits")
    await raises_commit_error(CommitErrorKind.UNAVAILABLE, committer.recover_due(T0, 10))


# --- readiness ------------------------------------------------------------------------------------


async def test_readiness_checks_store_and_outbox_for_real(rig: Rig) -> None:
    committer = rig.committer()
    await committer.readiness()
    assert rig.store.calls == ["readiness"]

    rig.store.fail_before["readiness"] = 1
    await raises_commit_error(CommitErrorKind.UNAVAILABLE, committer.readiness())
    rig.store.unexpected.add("readiness")
    await raises_commit_error(CommitErrorKind.UNAVAILABLE, committer.readiness())


async def test_readiness_fails_when_the_outbox_does_not_answer(rig: Rig) -> None:
    rig.outbox.unready = True
    error = await raises_commit_error(CommitErrorKind.UNAVAILABLE, rig.committer().readiness())
    assert "outbox" in error.detail
