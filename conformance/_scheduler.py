"""A deterministic scheduler: concurrent workers that take turns at backend-call boundaries.

Theory of operation
-------------------
Each worker is an asyncio task that must pass its *gate* before every call into the system under
test (a store call, an outbox publish, a saga transaction). Exactly one worker runs at a time: the
scheduler releases one parked worker, waits until it parks at its next gate or finishes, then picks
the next. Which parked worker goes next is ``choices[i] % len(parked)``, the i-th drawn integer;
when the choices run out, the lowest-numbered parked worker goes (so a shrunk schedule tends to
"run worker 0 to the end, then worker 1").

Because every switch happens at a gate and nothing else runs in between, the interleaving is a pure
function of the drawn choices: Hypothesis shrinks it like any other value and a failure file replays
it exactly. This is trio's ``Sequencer`` idea with the order drawn instead of written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import attrs

T = TypeVar("T")


class SchedulerHang(Exception):
    """A worker neither reached its next gate nor finished in time (it waits on something else)."""


@attrs.frozen
class WorkerOutcome(Generic[T]):
    """How one worker ended: a value, or the exception (or BaseException) it died with."""

    worker: int
    value: T | None = None
    error: BaseException | None = None


class Gate:
    """What a worker awaits before each call into the system under test."""

    def __init__(self, scheduler: Scheduler, worker: int) -> None:
        self._scheduler = scheduler
        self.worker = worker

    async def __call__(self) -> None:
        await self._scheduler._park(self.worker)


class Scheduler:
    """Runs workers one at a time, switching only at gates, in the order the choices say."""

    def __init__(self, choices: Sequence[int], *, hang_timeout: float = 30.0) -> None:
        self._choices = list(choices)
        self._next_choice = 0
        self._hang_timeout = hang_timeout
        self._parked: dict[int, asyncio.Event] = {}
        self._released: dict[int, asyncio.Event] = {}
        self.turns: list[int] = []  # the worker released at each turn: the trace of the interleaving

    async def _park(self, worker: int) -> None:
        released = self._released[worker]
        self._parked[worker].set()
        await released.wait()
        released.clear()

    def _pick(self, parked: list[int]) -> int:
        if self._next_choice < len(self._choices):
            choice = self._choices[self._next_choice]
            self._next_choice += 1
            return parked[choice % len(parked)]
        return parked[0]

    async def run(self, bodies: Sequence[Callable[[Gate], Awaitable[T]]]) -> list[WorkerOutcome[T]]:
        """Run each body as worker 0, 1, ...; returns every worker's outcome, in worker order.

        A worker dies with any ``BaseException`` (a simulated crash included) without stopping the
        others. Raises ``SchedulerHang`` if a released worker does not park or finish in time.
        """
        outcomes: dict[int, WorkerOutcome[T]] = {}
        tasks: dict[int, asyncio.Task[None]] = {}

        async def worker_main(worker: int, body: Callable[[Gate], Awaitable[T]]) -> None:
            gate = Gate(self, worker)
            try:
                await gate()  # nothing of a worker runs before its first turn
                outcomes[worker] = WorkerOutcome(worker, value=await body(gate))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # a crash is a BaseException by design
                outcomes[worker] = WorkerOutcome(worker, error=exc)

        for worker, body in enumerate(bodies):
            self._parked[worker] = asyncio.Event()
            self._released[worker] = asyncio.Event()
            tasks[worker] = asyncio.get_running_loop().create_task(worker_main(worker, body))
        try:
            # Let every worker reach its first gate.
            for worker in tasks:
                await self._wait_parked_or_done(worker, tasks[worker])
            while True:
                parked = [w for w, task in tasks.items() if not task.done()]
                if not parked:
                    break
                worker = self._pick(parked)
                self.turns.append(worker)
                self._parked[worker].clear()
                self._released[worker].set()
                await self._wait_parked_or_done(worker, tasks[worker])
        finally:
            for task in tasks.values():
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return [outcomes[w] for w in sorted(outcomes)]

    async def _wait_parked_or_done(self, worker: int, task: asyncio.Task[None]) -> None:
        parked = asyncio.ensure_future(self._parked[worker].wait())
        try:
            done, _ = await asyncio.wait(
                {parked, task}, timeout=self._hang_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not parked.done():
                parked.cancel()
        if not done:
            raise SchedulerHang(f"worker {worker} did not reach a gate within {self._hang_timeout}s")
