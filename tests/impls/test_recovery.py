"""CommitRecovery on every backend: clients that never retry still get every reserved key committed.

The sweeper runs the committer's own resume path over the store's recovery candidates (C-POST-02,
C-POST-09); these tests kill commits at fault points, never retry them, and let recovery finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from impls.commit import CommitRecovery, FaultHook, no_faults
from model.commit import (
    CommitStage,
    FaultPoint,
    LoadedCommitted,
    fault_points_for,
)
from tests.impls._commit_rig import (
    BACKENDS,
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

MIN_AGE_MS = 5_000


@pytest.fixture
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    async with open_rig(request.param) as opened:
        yield opened


async def abandon(rig: Rig, cmid: str, point: FaultPoint) -> None:
    """A client sends once; its commit dies at ``point``; it never comes back."""
    with pytest.raises(Crash):
        await rig.committer(fault_hook=CrashAt(point)).send(send(cmid))


def recovery(
    rig: Rig, *, batch: int = 100, fault_hook: FaultHook = no_faults, max_attempts: int = 8
) -> CommitRecovery:
    committer = rig.committer(fault_hook=fault_hook, max_attempts=max_attempts)
    return CommitRecovery(committer, rig.clock, min_age_ms=MIN_AGE_MS, batch=batch)


async def test_a_client_that_never_retries_is_committed_by_recovery(rig: Rig) -> None:
    points = fault_points_for(rig.capabilities)
    reserved_at: dict[str, object] = {}
    for point in points:
        cmid = f"abandoned-{point.value}"
        await abandon(rig, cmid, point)
        loaded = await rig.load(send(cmid))
        reserved_at[cmid] = (
            None
            if loaded is None
            else (
                loaded.message.coordinates
                if isinstance(loaded, LoadedCommitted)
                else loaded.intent.coordinates
            )
        )
    rig.membership.set_members(TENANT, "c1", frozenset())  # recovery never asks who is a member now

    assert await recovery(rig).run_once() == 0  # too young: their own committers may still finish
    rig.clock.advance(MIN_AGE_MS + 1)
    in_flight = sum(1 for p in points if STAGE_AT[p] not in (None, CommitStage.COMMITTED))
    assert await recovery(rig).run_once() == in_flight

    for point in points:
        cmid = f"abandoned-{point.value}"
        if STAGE_AT[point] is None:
            assert await rig.load(send(cmid)) is None  # died before reserve: nothing to recover
            continue
        message = await rig.committed(send(cmid))
        assert message.coordinates == reserved_at[cmid]
    assert await rig.store.scan_recoverable_commits(rig.clock.now_ms() + 1, 1000) == []
    assert len(set(rig.outbox.published)) == sum(1 for p in points if STAGE_AT[p] is not None)


async def test_recovery_sweeps_many_keys_in_batches(rig: Rig) -> None:
    points = [FaultPoint.M_COMMIT_02, FaultPoint.M_COMMIT_03, FaultPoint.M_COMMIT_04]
    for n in range(23):
        await abandon(rig, f"m{n:02d}", points[n % len(points)])
        rig.clock.advance(1)
    rig.clock.advance(MIN_AGE_MS)
    rig.store.calls.clear()

    assert await recovery(rig, batch=5).run_once() == 23

    assert rig.store.calls.count("scan_recoverable_commits") == 5  # 5+5+5+5+3
    for n in range(23):
        assert (await rig.committed(send(f"m{n:02d}"))).coordinates.message_seq == n + 1
    assert await rig.store.scan_recoverable_commits(rig.clock.now_ms(), 1000) == []


async def test_recovery_honours_older_than(rig: Rig) -> None:
    for cmid in ("old-1", "old-2", "old-3"):
        await abandon(rig, cmid, FaultPoint.M_COMMIT_03)
    rig.clock.advance(10_000)
    for cmid in ("new-1", "new-2"):
        await abandon(rig, cmid, FaultPoint.M_COMMIT_02)
    rig.clock.advance(MIN_AGE_MS - 1)  # the new ones are just too young

    assert await recovery(rig).run_once() == 3
    assert [await rig.stage(send(c)) for c in ("old-1", "old-2", "old-3", "new-1", "new-2")] == [
        CommitStage.COMMITTED,
        CommitStage.COMMITTED,
        CommitStage.COMMITTED,
        CommitStage.RESERVED,
        CommitStage.RESERVED,
    ]
    assert await rig.committer().recover_due(T0 + 10_000, 10) == 0  # accepted_at must be older
    assert await rig.committer().recover_due(T0 + 10_001, 10) == 2


async def test_a_key_that_cannot_finish_is_skipped_and_recovered_later(rig: Rig) -> None:
    for cmid in ("a", "b", "c"):
        await abandon(rig, cmid, FaultPoint.M_COMMIT_02)
    rig.store.stuck.add(send("b").commit_key)
    rig.clock.advance(MIN_AGE_MS + 1)

    assert await recovery(rig, max_attempts=2).run_once() == 2
    assert await rig.stage(send("b")) is CommitStage.RESERVED
    assert [i.key for i in await rig.store.scan_recoverable_commits(rig.clock.now_ms(), 10)] == [
        send("b").commit_key
    ]

    rig.store.stuck.clear()
    assert await recovery(rig).run_once() == 1
    assert (await rig.committed(send("b"))).coordinates.message_seq == 2


async def test_a_recovery_that_dies_is_finished_by_the_next_one(rig: Rig) -> None:
    await abandon(rig, "m1", FaultPoint.M_COMMIT_02)
    reserved = (await rig.in_flight(send("m1"))).intent.coordinates
    rig.clock.advance(MIN_AGE_MS + 1)

    with pytest.raises(Crash):
        await recovery(rig, fault_hook=CrashAt(FaultPoint.M_COMMIT_04)).run_once()
    assert await rig.stage(send("m1")) is CommitStage.RECORDED
    assert await recovery(rig).run_once() == 1

    message = await rig.committed(send("m1"))
    assert message.coordinates == reserved
    assert set(rig.outbox.published) == {message.publication}


async def test_run_forever_sweeps_until_stopped(rig: Rig) -> None:
    await abandon(rig, "m1", FaultPoint.M_COMMIT_03)
    rig.clock.advance(MIN_AGE_MS + 1)
    stop = asyncio.Event()
    rig.store.fail_before["scan_recoverable_commits"] = 1  # the first sweep fails; the loop goes on

    sweeper = asyncio.create_task(recovery(rig).run_forever(stop, interval_s=0.01))
    for _ in range(500):
        if await rig.stage(send("m1")) is CommitStage.COMMITTED:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(sweeper, timeout=5)

    assert await rig.stage(send("m1")) is CommitStage.COMMITTED
    assert rig.store.calls.count("scan_recoverable_commits") >= 2
