"""The deterministic scheduler: the drawn choices alone decide the interleaving."""

from __future__ import annotations

import asyncio

import pytest

from conformance._scheduler import Gate, Scheduler, SchedulerHang


class Died(BaseException):
    """A simulated crash, a BaseException like the harness's."""


def worker(name: str, calls: int, log: list[str]):  # type: ignore[no-untyped-def]
    async def body(gate: Gate) -> str:
        for i in range(calls):
            await gate()
            log.append(f"{name}{i}")
        return name

    return body


async def run(choices: list[int], calls: tuple[int, ...] = (2, 2)) -> tuple[list[str], list[int]]:
    log: list[str] = []
    scheduler = Scheduler(choices)
    await scheduler.run([worker(chr(ord("a") + w), n, log) for w, n in enumerate(calls)])
    return log, scheduler.turns


async def test_the_same_choices_give_the_same_interleaving() -> None:
    first = await run([1, 0, 1, 0, 1])
    second = await run([1, 0, 1, 0, 1])
    assert first == second
    assert first[0] == ["b0", "a0", "b1", "a1"]


async def test_without_choices_worker_zero_runs_to_the_end_first() -> None:
    log, turns = await run([])
    assert log == ["a0", "a1", "b0", "b1"]
    assert turns == [0, 0, 0, 1, 1, 1]


async def test_choices_wrap_around_the_parked_workers() -> None:
    log, _ = await run([5, 5, 5, 5, 5, 5], calls=(1, 1, 1))
    assert sorted(log) == ["a0", "b0", "c0"]
    assert log[0] == "c0"  # 5 % 3 == 2


async def test_a_crashed_worker_does_not_stop_the_others() -> None:
    log: list[str] = []

    async def dies(gate: Gate) -> str:
        await gate()
        raise Died()

    outcomes = await Scheduler([0, 0]).run([dies, worker("b", 2, log)])
    assert isinstance(outcomes[0].error, Died)
    assert outcomes[1].value == "b"
    assert log == ["b0", "b1"]


async def test_a_worker_waiting_on_something_else_is_reported_as_a_hang() -> None:
    never = asyncio.Event()

    async def stuck(gate: Gate) -> None:
        await gate()
        await never.wait()

    with pytest.raises(SchedulerHang):
        await Scheduler([], hang_timeout=0.05).run([stuck])
