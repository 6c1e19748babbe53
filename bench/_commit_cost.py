"""Commit cost per backend: store calls and server round trips per commit, and commits per second.

Counts come from the timing seam (store and outbox calls by method) and from the backends' own
round-trip counters (``round_trips`` on the Redis and CQL stores and outboxes; the memory backend
has no server, so none). Cases, each repeated and reported as a spread (they should be steady):

* ``fresh``: ``MessageCommitter.send`` of a new request, reserve to ACK;
* ``replay``: ``send`` of the same request again (the ACK is read back);
* ``resume from <stage>``: a committer is killed at a fault point (the stage it leaves durable),
  then a new committer's ``resume(key, conversation)`` finishes the commit. One case per fault
  point the store's path passes (``model.commit.fault_points_for``), except M-COMMIT-01, where
  nothing is durable yet and a retry is a fresh commit.

Commits per second is a sequential ``send`` loop of new requests on one connection (``_workload``).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Awaitable

import attrs

from bench._figures import Spread, Stopwatch
from bench._seam import Meter, MeteredOutbox, MeteredStore
from bench._workload import (
    SHORT_IDS,
    Ids,
    Killed,
    kill_at,
    membership,
    new_namespace,
    opened,
    request,
)
from conformance.backends import BackendSpec
from impls.api import InMemoryMembership, MessageStore, Outbox, SystemClock
from impls.commit import MessageCommitter
from model.commit import (
    AuthenticatedSend,
    FaultPoint,
    LoadedCommitted,
    LoadedInFlight,
    fault_points_for,
)

FRESH, REPLAY = "fresh", "replay"


@attrs.frozen
class CallCount:
    """What one commit case costs, per commit."""

    case: str
    crash_point: str | None  # for a resume: where the first committer died
    store_calls: Spread
    store_round_trips: Spread | None  # None: the backend has no server round trips to count
    outbox_calls: Spread
    outbox_round_trips: Spread | None
    store_calls_by_method: dict[str, float]  # median per method

    @property
    def round_trips(self) -> float | None:
        if self.store_round_trips is None:
            return None
        outbox = self.outbox_round_trips.median if self.outbox_round_trips is not None else 0.0
        return self.store_round_trips.median + outbox


@attrs.frozen
class CommitCost:
    backend: str
    atomic_publish_and_commit: bool
    cases: tuple[CallCount, ...]

    def case(self, name: str) -> CallCount | None:
        return next((c for c in self.cases if c.case == name), None)


@attrs.define
class _Sample:
    store_calls: Counter[str]
    outbox_calls: int
    store_round_trips: int | None
    outbox_round_trips: int | None


class _Counting:
    """A store and an outbox behind the seam, and the deltas of their counters around one call."""

    def __init__(self, store: MessageStore, outbox: Outbox) -> None:
        self.store = MeteredStore(store, Meter())
        self.outbox = MeteredOutbox(outbox, Meter())

    async def around(self, call: Awaitable[object]) -> _Sample:
        """``call`` is a coroutine not yet started: counters are read before and after it runs."""
        calls = Counter(self.store.meter.calls)
        outbox_calls = self.outbox.meter.total_calls()
        store_rt, outbox_rt = self.store.round_trips, self.outbox.round_trips
        await call
        after_rt, after_outbox_rt = self.store.round_trips, self.outbox.round_trips
        return _Sample(
            store_calls=self.store.meter.calls - calls,
            outbox_calls=self.outbox.meter.total_calls() - outbox_calls,
            store_round_trips=None if store_rt is None or after_rt is None else after_rt - store_rt,
            outbox_round_trips=(
                None if outbox_rt is None or after_outbox_rt is None else after_outbox_rt - outbox_rt
            ),
        )


def _count(case: str, samples: list[_Sample], crash_point: str | None = None) -> CallCount:
    methods = sorted({m for s in samples for m in s.store_calls})
    store_rt = [s.store_round_trips for s in samples if s.store_round_trips is not None]
    outbox_rt = [s.outbox_round_trips for s in samples if s.outbox_round_trips is not None]
    return CallCount(
        case=case,
        crash_point=crash_point,
        store_calls=Spread.of([s.store_calls.total() for s in samples]),
        store_round_trips=Spread.of(store_rt) if len(store_rt) == len(samples) else None,
        outbox_calls=Spread.of([s.outbox_calls for s in samples]),
        outbox_round_trips=Spread.of(outbox_rt) if len(outbox_rt) == len(samples) else None,
        store_calls_by_method={m: statistics.median([s.store_calls[m] for s in samples]) for m in methods},
    )


async def measure_cost(spec: BackendSpec, repeats: int, ids: Ids = SHORT_IDS) -> CommitCost:
    """Each case ``repeats`` times on a fresh namespace, after one warm-up commit."""
    directory = membership(ids)
    clock = SystemClock()
    async with opened(spec, new_namespace(), directory) as (store, outbox):
        seam = _Counting(store, outbox)
        committer = MessageCommitter(seam.store, seam.outbox, directory, clock)
        serial = itertools.count(1)
        await committer.send(request(ids, next(serial)))  # warm-up: connect, load scripts, prepare
        fresh: list[_Sample] = []
        replay: list[_Sample] = []
        for _ in range(repeats):
            sent = request(ids, next(serial))
            fresh.append(await seam.around(committer.send(sent)))
            replay.append(await seam.around(committer.send(sent)))
        cases = [_count(FRESH, fresh), _count(REPLAY, replay)]
        for point in fault_points_for(store.capabilities):
            if point is FaultPoint.M_COMMIT_01:
                continue
            resumed: list[_Sample] = []
            stage = "?"
            for _ in range(repeats):
                sent = request(ids, next(serial))
                stage = await _crash_at(point, sent, seam.store, seam.outbox, directory, clock, store)
                after_crash = MessageCommitter(seam.store, seam.outbox, directory, clock)
                resumed.append(await seam.around(after_crash.resume(sent.commit_key, sent.conversation)))
            cases.append(_count(f"resume from {stage}", resumed, point.value))
        return CommitCost(spec.name, store.capabilities.atomic_publish_and_commit, tuple(cases))


async def _crash_at(
    point: FaultPoint,
    sent: AuthenticatedSend,
    store: MessageStore,
    outbox: Outbox,
    directory: InMemoryMembership,
    clock: SystemClock,
    raw: MessageStore,
) -> str:
    """Kill a committer at ``point``; return the stage it left durable, as the case names it."""
    dying = MessageCommitter(store, outbox, directory, clock, fault_hook=kill_at(point))
    try:
        await dying.send(sent)
    except Killed:
        pass
    else:
        raise RuntimeError(f"the committer never reached {point.value}")
    loaded = await raw.load_commit(sent.commit_key, sent.conversation)
    if isinstance(loaded, LoadedCommitted):
        return "COMMITTED"
    if isinstance(loaded, LoadedInFlight):
        in_outbox = " + outbox ack" if point is FaultPoint.M_COMMIT_04 else ""
        return f"{loaded.stage.name}{in_outbox}"
    raise RuntimeError(f"nothing durable after a crash at {point.value}")


async def commit_loop(committer: MessageCommitter, ids: Ids, seconds: float, first: int) -> Stopwatch:
    """Sequential sends of new requests for ``seconds``; the stopwatch holds count and rate."""
    watch = Stopwatch(seconds, minimum=3)
    n = first
    while watch.running():
        await committer.send(request(ids, n))
        n += 1
        watch.tick()
    return watch
