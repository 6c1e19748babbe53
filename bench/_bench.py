"""One bench run: every section (``_section.Section``) on every available backend, then the targets.

``SECTIONS`` are the commit side (here), the saga side (``_saga_bench``) and the transports
(``_transport_bench``). The commit side, per backend: is its server up (if not, the backend is
*unavailable* and skipped, never a crash) -> harness throughput per suite -> commit cost -> commit
rate alternated run by run with the raw floor of its server (so both see the same machine load) ->
on Redis, the commit-hash footprint. A measurement that fails on one backend is recorded as an
error for that backend and the bench goes on.

Backend names are per family: the commit side runs on the chosen commit backends when a
commit-family suite (``store``, ``commit``) is chosen, the saga side on the chosen saga backends
when ``saga`` is; ``memory`` names one backend of each family.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import attrs

from bench import _throughput
from bench._commit_cost import FRESH, CommitCost, commit_loop, measure_cost
from bench._environment import Machine, load_average, machine
from bench._figures import MISS, NOT_MEASURED, PASS, Spread, Tally, TargetCheck, at_least
from bench._floor import LIKE_FOR_LIKE, READ_ONLY, Floor, FloorProbe, open_floor, timed_loop
from bench._guard import guarded as guard
from bench._options import ALL_BACKENDS as ALL_BACKENDS
from bench._options import COMMIT_SUITES as COMMIT_SUITES
from bench._options import SUITES as SUITES
from bench._options import BenchOptions as BenchOptions
from bench._redis_footprint import (
    TARGET_COMMITTED_BYTES,
    TARGET_ENCODING,
    Footprint,
    measure_footprint,
    meets_target,
)
from bench._saga_bench import SAGA_SECTION, SagaUnitRate
from bench._saga_cost import SagaUnitCost
from bench._saga_floor import SagaFloor
from bench._saga_throughput import SAGA_SUITE, SagaThroughput
from bench._section import Progress, Section, SectionOutcome, merge, unavailable
from bench._throughput import Throughput
from bench._transport_bench import (
    STREAM_BACKENDS,
    TRANSPORT_ONLY,
    TRANSPORT_SECTION,
    TRANSPORT_SUITE,
    TransportRate,
)
from bench._wire_cost import WireUnitCost
from bench._workload import SHORT_IDS, membership, new_namespace, opened
from conformance.backends import COMMIT_BACKENDS, SAGA_BACKENDS, BackendSpec, SagaBackendSpec
from impls.api import SystemClock
from impls.commit import MessageCommitter

STEPS_PER_SECOND_TARGETS = {"memory": 1000.0, "redis": 400.0, "cql": 40.0}
FLOOR_RATIO_TARGET = 50.0  # percent: a fresh Redis commit vs as many writing EVALSHAs, same server
RATE_SLICES = 10  # a commit-rate run alternates floor and Ratchet this many times

T = TypeVar("T")


@attrs.frozen
class CommitRate:
    backend: str
    commits_per_second: Spread  # sequential MessageCommitter.send, one connection
    cpu_us_per_commit: Spread  # this process's CPU time per commit (committer, store, driver)
    round_trips_per_commit: float | None
    # The like-for-like floor probe (as many round trips, each writing as a commit's do), same runs:
    floor_per_second: Spread | None
    floor_ratio_percent: Spread | None  # per run: Ratchet / like-for-like floor * 100 (the target's figure)
    read_only_floor_per_second: Spread | None = None  # the same round trips writing nothing, same runs
    read_only_ratio_percent: Spread | None = None  # per run: Ratchet / read-only floor * 100
    durability: str | None = None  # the server's persistence settings, reported as the floor opened


@attrs.frozen
class BenchReport:
    options: BenchOptions
    machine: Machine
    servers: dict[str, str]  # backend -> server version
    unavailable: dict[str, str]  # backend -> why
    errors: dict[str, str]  # "section backend" -> what went wrong
    targets: tuple[TargetCheck, ...]
    elapsed_s: float
    # The sections' figures (``SectionOutcome.figures`` keys are these names).
    throughput: tuple[Throughput, ...] = ()
    costs: tuple[CommitCost, ...] = ()
    rates: tuple[CommitRate, ...] = ()
    floors: tuple[Floor, ...] = ()
    footprints: tuple[Footprint, ...] = ()
    saga_throughput: tuple[SagaThroughput, ...] = ()
    saga_costs: tuple[SagaUnitCost, ...] = ()
    saga_rates: tuple[SagaUnitRate, ...] = ()
    saga_floors: tuple[SagaFloor, ...] = ()
    saga_wire_costs: tuple[WireUnitCost, ...] = ()
    transport_rates: tuple[TransportRate, ...] = ()

    @property
    def missed(self) -> list[TargetCheck]:
        return [t for t in self.targets if t.verdict != PASS]

    def non_passing_runs(self) -> list[str]:
        runs = [(t.backend, t.suite, r.verdict, r.detail) for t in self.throughput for r in t.runs]
        runs += [(t.backend, t.suite, r.verdict, r.detail) for t in self.saga_throughput for r in t.runs]
        return [
            f"{backend}/{suite}: {verdict} ({detail})"
            for backend, suite, verdict, detail in runs
            if verdict != "pass"
        ]

    def exit_code(self, strict: bool) -> int:
        """2 when a section could not be measured; with ``strict``, 1 for a MISS, an unavailable
        backend or a conformance run that did not pass; else 0."""
        if self.errors:
            return 2
        if strict and (self.missed or self.unavailable or self.non_passing_runs()):
            return 1
        return 0


#: The report fields sections fill (every ``SectionOutcome.figures`` key is one of them).
FIGURE_FIELDS = (
    "throughput",
    "costs",
    "rates",
    "floors",
    "footprints",
    "saga_throughput",
    "saga_costs",
    "saga_rates",
    "saga_floors",
    "saga_wire_costs",
    "transport_rates",
)


def _chosen(options: BenchOptions) -> tuple[list[str], list[BackendSpec], list[SagaBackendSpec], list[str]]:
    """The commit suites, commit backends and saga backends of ``options``, and the backends named
    that no chosen suite runs on (skipped). ``ValueError`` for an unknown suite or backend name, or
    when no named backend runs any chosen suite."""
    from conformance._suites import suite_named

    families = {suite: suite_named(suite).family for suite in options.suites}  # ValueError: unknown
    commit_suites = [s for s, family in families.items() if family == "commit"]
    for name in options.backends:
        if name not in COMMIT_BACKENDS and name not in SAGA_BACKENDS and name not in TRANSPORT_ONLY:
            raise ValueError(f"unknown backend {name!r}; known: {', '.join(ALL_BACKENDS)}")
    commit = [COMMIT_BACKENDS[n] for n in options.backends if commit_suites and n in COMMIT_BACKENDS]
    saga = [SAGA_BACKENDS[n] for n in options.backends if SAGA_SUITE in families and n in SAGA_BACKENDS]
    running = {spec.name for spec in commit} | {spec.name for spec in saga}
    if TRANSPORT_SUITE in families:  # the transport section: stream backends, and gRPC on loopback
        running |= {n for n in options.backends if n in STREAM_BACKENDS or n in TRANSPORT_ONLY} or {"grpc"}
    if not running:
        names, suites = ",".join(options.backends), ",".join(options.suites)
        raise ValueError(f"no backend of {names} runs suites {suites}")
    return commit_suites, commit, saga, [n for n in options.backends if n not in running]


async def _rate_and_floor(
    spec: BackendSpec, cost: CommitCost, options: BenchOptions, progress: Progress
) -> tuple[CommitRate, Floor | None]:
    """Each run interleaves the floor probes and Ratchet's commit loop in short slices, so that
    both see the same machine load even when other processes come and go."""
    fresh = cost.case(FRESH)
    round_trips = fresh.round_trips if fresh is not None else None
    server = await open_floor(spec.name) if round_trips else None
    probes = server.probes(round(round_trips)) if server is not None and round_trips else []
    floor_runs: dict[str, list[Tally]] = {p.name: [] for p in probes}
    ratchet: list[Tally] = []
    ids = SHORT_IDS
    directory = membership(ids)
    piece = options.rate_seconds / RATE_SLICES
    try:
        async with opened(spec, new_namespace(), directory) as (store, outbox):
            committer = MessageCommitter(store, outbox, directory, SystemClock())
            serial = (await commit_loop(committer, ids, 0.0, 1)).count + 1  # warm-up
            for probe in probes:
                await timed_loop(probe.operation, 0.0)
            for index in range(options.runs):
                tallies = {p.name: Tally() for p in probes}
                mine = Tally()
                for _ in range(RATE_SLICES):
                    for probe in probes:
                        tallies[probe.name].add(await timed_loop(probe.operation, piece))
                    watch = await commit_loop(committer, ids, piece, serial)
                    serial += watch.count
                    mine.add(watch)
                ratchet.append(mine)
                for name, tally in tallies.items():
                    floor_runs[name].append(tally)
                shaped = [tallies[p.name].per_second for p in probes if p.shape == LIKE_FOR_LIKE]
                extra = f", floor {shaped[0]:.0f}/s" if shaped else ""
                progress(
                    f"commit rate {spec.name} run {index + 1}/{options.runs}: "
                    f"{mine.per_second:.0f} commits/s{extra}"
                )
    finally:
        if server is not None:
            await server.close()
    floor = None
    if server is not None:
        floor = Floor(
            spec.name,
            server.server,
            server.durability,
            tuple(
                FloorProbe(
                    p.name,
                    p.round_trips,
                    Spread.of([w.per_second for w in floor_runs[p.name]]),
                    Spread.of([w.cpu_us_per_op for w in floor_runs[p.name]]),
                    p.shape,
                    p.writes,
                )
                for p in probes
            ),
        )

    def against(shape: str) -> tuple[Spread | None, Spread | None]:
        """The floor of ``shape`` run by run, and Ratchet's rate over it in each run (percent)."""
        runs = next((floor_runs[p.name] for p in probes if p.shape == shape), [])
        if not runs:
            return None, None
        ratios = [
            100.0 * r.per_second / f.per_second
            for r, f in zip(ratchet, runs, strict=True)
            if f.per_second > 0
        ]
        if not ratios:
            return None, None
        return Spread.of([f.per_second for f in runs]), Spread.of(ratios)

    floor_rate, ratio = against(LIKE_FOR_LIKE)
    read_only_rate, read_only_ratio = against(READ_ONLY)
    rate = CommitRate(
        backend=spec.name,
        commits_per_second=Spread.of([w.per_second for w in ratchet]),
        cpu_us_per_commit=Spread.of([w.cpu_us_per_op for w in ratchet]),
        round_trips_per_commit=round_trips,
        floor_per_second=floor_rate,
        floor_ratio_percent=ratio,
        read_only_floor_per_second=read_only_rate,
        read_only_ratio_percent=read_only_ratio,
        durability=floor.durability if floor is not None else None,
    )
    return rate, floor


def _measure_throughput(spec: BackendSpec, suite: str, options: BenchOptions, say: Progress) -> Throughput:
    _throughput.warm_up(spec, suite, options.seed)
    return _throughput.measure(
        spec,
        suite,
        runs=options.runs,
        examples=options.examples,
        steps=options.steps,
        seed=options.seed,
        progress=say,
    )


def _commit_side(options: BenchOptions, say: Progress) -> SectionOutcome:
    """The commit sections on every available commit backend of ``options``."""
    commit_suites, specs, _, _ = _chosen(options)
    unavailable_: dict[str, str] = {}
    errors: dict[str, str] = {}
    servers: dict[str, str] = {}
    throughput: list[Throughput] = []
    costs: list[CommitCost] = []
    rates: list[CommitRate] = []
    floors: list[Floor] = []
    footprints: list[Footprint] = []

    def guarded(section: str, spec: BackendSpec, body: Callable[[], T]) -> T | None:
        return guard(errors, say, section, spec.name, body)

    for spec in specs:
        reason = unavailable(spec.service)
        if reason is not None:
            unavailable_[spec.name] = reason
            say(f"{spec.name}: unavailable: {reason}")
            continue
        for suite in commit_suites:
            measured = guarded("throughput", spec, partial(_measure_throughput, spec, suite, options, say))
            if measured is not None:
                throughput.append(measured)
        cost = guarded("commit-cost", spec, partial(asyncio.run, measure_cost(spec, options.cost_repeats)))
        if cost is not None:
            say(f"commit cost {spec.name}: {len(cost.cases)} cases measured")
            costs.append(cost)
            pair = guarded(
                "commit-rate", spec, partial(asyncio.run, _rate_and_floor(spec, cost, options, say))
            )
            if pair is not None:
                rates.append(pair[0])
                if pair[1] is not None:
                    floors.append(pair[1])
                    servers[spec.name] = f"{pair[1].server} ({pair[1].durability})"
        if spec.name == "redis":
            found = guarded("footprint", spec, partial(asyncio.run, measure_footprint()))
            if found is not None:
                footprints.extend(found)
                say("redis footprint: measured")
    figures = {
        "throughput": tuple(throughput),
        "costs": tuple(costs),
        "rates": tuple(rates),
        "floors": tuple(floors),
        "footprints": tuple(footprints),
    }
    return SectionOutcome(figures, servers, unavailable_, errors)


COMMIT_SECTION = Section(
    "commit", lambda options: any(s in COMMIT_SUITES for s in options.suites), _commit_side
)

#: Every side of the bench, in the order they run.
SECTIONS: tuple[Section, ...] = (COMMIT_SECTION, SAGA_SECTION, TRANSPORT_SECTION)


def run_bench(options: BenchOptions, progress: Progress | None = None) -> BenchReport:
    """Run every section on every available backend of ``options``; never raises for a backend
    that is down or a section that fails (see ``BenchReport.errors``). ``ValueError`` for an unknown
    backend or suite name."""
    say: Progress = progress if progress is not None else (lambda line: None)
    _, _, _, skipped = _chosen(options)  # ValueError before anything runs
    if options.runs < 1:
        raise ValueError("runs must be >= 1")
    if options.backends != ALL_BACKENDS:  # the default names every backend: skipping is expected
        for name in skipped:
            say(f"{name}: skipped (not a backend of suites {','.join(options.suites)})")
    started = time.perf_counter()
    load_at_start = load_average()
    merged = merge([section.run(options, say) for section in SECTIONS if section.applies(options)])
    report = BenchReport(
        options=options,
        machine=machine(load_at_start),
        servers=dict(merged.servers),
        unavailable=dict(merged.unavailable),
        errors=dict(merged.errors),
        targets=(),
        elapsed_s=0.0,
        **{field: merged.figures.get(field, ()) for field in FIGURE_FIELDS},
    )
    return attrs.evolve(report, targets=targets(report), elapsed_s=time.perf_counter() - started)


def targets(report: BenchReport) -> tuple[TargetCheck, ...]:
    """The bench's targets, each against the median of its figure; n/a where it was not measured."""
    checks: list[TargetCheck] = []
    # Every target is a commit-side figure: none is set for sagas.
    chosen = report.options.backends if any(s in COMMIT_SUITES for s in report.options.suites) else ()
    for backend, floor in STEPS_PER_SECOND_TARGETS.items():
        if backend not in chosen:
            continue
        for suite in (s for s in report.options.suites if s in COMMIT_SUITES):
            found = next((t for t in report.throughput if (t.backend, t.suite) == (backend, suite)), None)
            checks.append(
                at_least(
                    f"{backend} {suite}: stateful steps/s (model check on)",
                    found.steps_per_second if found is not None else None,
                    floor,
                )
            )
    if "redis" in chosen:
        checks.append(_redis_round_trips(next((c for c in report.costs if c.backend == "redis"), None)))
        rate = next((r for r in report.rates if r.backend == "redis"), None)
        durability = rate.durability if rate is not None and rate.durability else "server not measured"
        checks.append(
            at_least(
                f"redis: fresh commits/s vs raw EVALSHA floor (same round trips, each writing; {durability})",
                rate.floor_ratio_percent if rate is not None else None,
                FLOOR_RATIO_TARGET,
                "%",
            )
        )
        committed = [f for f in report.footprints if f.committed]
        wanted = f"{TARGET_ENCODING}, <= {TARGET_COMMITTED_BYTES} B"
        if not committed:
            checks.append(TargetCheck("redis: committed hash footprint", wanted, "unavailable", NOT_MEASURED))
        for footprint in committed:
            checks.append(
                TargetCheck(
                    f"redis: committed hash footprint ({footprint.ids} ids, 100 B body)",
                    wanted,
                    f"{footprint.encoding}, {footprint.memory_usage} B",
                    PASS if meets_target(footprint) else MISS,
                )
            )
    return tuple(checks)


def _redis_round_trips(cost: CommitCost | None) -> TargetCheck:
    name, wanted = "redis: fresh commit round trips", "1 per store call + 1 outbox"
    fresh = cost.case(FRESH) if cost is not None else None
    if fresh is None or fresh.store_round_trips is None or fresh.outbox_round_trips is None:
        return TargetCheck(name, wanted, "unavailable", NOT_MEASURED)
    calls, store_rt = fresh.store_calls.median, fresh.store_round_trips.median
    outbox_rt = fresh.outbox_round_trips.median
    steady = fresh.store_round_trips.steady and fresh.outbox_round_trips.steady
    ok = steady and store_rt == calls and outbox_rt == fresh.outbox_calls.median == 1
    measured = f"{calls:g} store calls, {store_rt:g} + {outbox_rt:g} round trips"
    return TargetCheck(name, wanted, measured, PASS if ok else MISS)
