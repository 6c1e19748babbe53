"""The saga side of one bench run (``SAGA_SECTION``): every saga measurement on every chosen saga backend.

Order per backend, as on the commit side (``_bench``): is its server up (if not: *unavailable*,
skipped) -> harness throughput of the ``saga`` suite -> unit cost -> unit rates alternated slice
by slice with the raw SQL floor of the same driver (``_saga_floor``), so that both see the same
machine load. A measurement that fails on one backend is recorded as an error and the bench goes
on. No target is set for sagas, so nothing here is checked against one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import attrs

from bench import _saga_throughput
from bench._figures import Spread, Tally
from bench._guard import guarded as guard
from bench._saga_cost import (
    COMMAND,
    RATED_UNITS,
    START,
    SagaUnitCost,
    command_loop,
    measure_cost,
    start_loop,
)
from bench._saga_floor import SagaFloor, SagaFloorProbe, SqlFloor, open_sql_floor, sync_timed_loop
from bench._saga_throughput import SAGA_SUITE, SagaThroughput, saga_factory
from bench._saga_workload import command_for, opened, participant, ready_orchestrator
from bench._section import Progress, Section, SectionOutcome, unavailable
from bench._wire_cost import WireUnitCost, measure_wire
from bench._workload import new_namespace
from conformance.backends import SAGA_BACKENDS, SagaBackendSpec

if TYPE_CHECKING:
    from bench._options import BenchOptions

T = TypeVar("T")
RATE_SLICES = 10  # a unit-rate run alternates floor and Ratchet this many times
FIRST_COMMANDS = 64  # commands made for the first slice, before its rate is known


@attrs.frozen
class SagaUnitRate:
    backend: str
    unit: str  # start (orchestrator) or command (participant)
    units_per_second: Spread  # sequential units, one backend, one connection
    cpu_us_per_unit: Spread  # this process's CPU time per unit (runtime, backend, driver)
    statements_per_unit: float | None  # from the unit cost; None: no SQL
    floor_per_second: Spread | None  # the unit-shaped floor probe, same runs
    floor_ratio_percent: Spread | None  # per run: Ratchet / floor * 100


def saga_spec(name: str) -> SagaBackendSpec:
    if name not in SAGA_BACKENDS:
        raise ValueError(f"unknown saga backend {name!r}; known: {', '.join(SAGA_BACKENDS)}")
    return SAGA_BACKENDS[name]


class _Slices:
    """Ratchet's two units and the floor probes, each run for one slice at a time."""

    def __init__(self, spec: SagaBackendSpec, floor: SqlFloor | None, cost: SagaUnitCost) -> None:
        self.spec = spec
        statements = {u: cost.unit(u) for u in RATED_UNITS}
        self.statements = {u: c.statements.median for u, c in statements.items() if c and c.statements}
        self.probes = floor.probes({u: round(n) for u, n in self.statements.items()}) if floor else []
        self.floor = {p.name: Tally() for p in self.probes}
        self.units = {u: Tally() for u in RATED_UNITS}
        self._serial = 1
        self._commands_per_slice = FIRST_COMMANDS

    def run(self, seconds: float) -> None:
        for probe in self.probes:
            self.floor[probe.name].add(sync_timed_loop(probe.operation, seconds))
        # Fresh namespaces per slice (see _saga_cost); opening them is not measured.
        with opened(saga_factory(self.spec), new_namespace()) as (orch_db, part_db):
            orchestrator, part = ready_orchestrator(orch_db), participant(part_db)
            started = start_loop(orchestrator, seconds, self._serial)
            self._serial += started.count
            self.units[START].add(started)
            commands = [command_for(n) for n in range(self._serial, self._serial + self._commands_per_slice)]
            handled = command_loop(part, commands, seconds)
            self._serial += len(commands)
            self.units[COMMAND].add(handled)
            # Enough commands for the next slice at this rate, with room to spare.
            self._commands_per_slice = max(FIRST_COMMANDS, round(1.5 * handled.per_second * seconds) + 8)


def _rates(
    spec: SagaBackendSpec, cost: SagaUnitCost, options: BenchOptions, say: Progress
) -> tuple[list[SagaUnitRate], SagaFloor | None]:
    floor = open_sql_floor(spec.name)
    piece = options.rate_seconds / RATE_SLICES
    unit_runs: dict[str, list[Tally]] = {u: [] for u in RATED_UNITS}
    floor_runs: dict[str, list[Tally]] = {}
    try:
        _Slices(spec, floor, cost).run(piece / 4)  # warm-up: connections, statements, caches
        probes = []
        for index in range(options.runs):
            slices = _Slices(spec, floor, cost)
            probes = slices.probes
            for _ in range(RATE_SLICES):
                slices.run(piece)
            for unit, tally in slices.units.items():
                unit_runs[unit].append(tally)
            for name, tally in slices.floor.items():
                floor_runs.setdefault(name, []).append(tally)
            shaped = {p.shaped_like: slices.floor[p.name].per_second for p in probes if p.shaped_like}
            say(
                f"saga rate {spec.name} run {index + 1}/{options.runs}: "
                + ", ".join(
                    f"{unit} {slices.units[unit].per_second:.0f}/s"
                    + (f" (floor {shaped[unit]:.0f}/s)" if unit in shaped else "")
                    for unit in RATED_UNITS
                )
            )
        found_floor = None
        if floor is not None:
            found_floor = SagaFloor(
                spec.name,
                floor.server,
                tuple(
                    SagaFloorProbe(
                        p.name,
                        p.statements,
                        Spread.of([t.per_second for t in floor_runs[p.name]]),
                        Spread.of([t.cpu_us_per_op for t in floor_runs[p.name]]),
                        p.shaped_like,
                    )
                    for p in probes
                ),
            )
    finally:
        if floor is not None:
            floor.close()
    rates = []
    for unit in RATED_UNITS:
        mine = [t.per_second for t in unit_runs[unit]]
        shaped_probe = next((p for p in probes if p.shaped_like == unit), None)
        shaped_rates = [t.per_second for t in floor_runs[shaped_probe.name]] if shaped_probe else []
        ratios = (
            [100.0 * r / f for r, f in zip(mine, shaped_rates, strict=True) if f > 0] if shaped_rates else []
        )
        count = cost.unit(unit)
        rates.append(
            SagaUnitRate(
                backend=spec.name,
                unit=unit,
                units_per_second=Spread.of(mine),
                cpu_us_per_unit=Spread.of([t.cpu_us_per_op for t in unit_runs[unit]]),
                statements_per_unit=count.statements.median if count and count.statements else None,
                floor_per_second=Spread.of(shaped_rates) if shaped_rates else None,
                floor_ratio_percent=Spread.of(ratios) if ratios else None,
            )
        )
    return rates, found_floor


def run_saga(options: BenchOptions, progress: Progress) -> SectionOutcome:
    """Every saga measurement on every available saga backend of ``options``; never raises for a
    backend that is down or a measurement that fails (see ``SectionOutcome.errors``)."""
    say = progress
    specs = [SAGA_BACKENDS[name] for name in options.backends if name in SAGA_BACKENDS]
    unavailable_: dict[str, str] = {}
    errors: dict[str, str] = {}
    servers: dict[str, str] = {}
    throughput: list[SagaThroughput] = []
    costs: list[SagaUnitCost] = []
    rates: list[SagaUnitRate] = []
    floors: list[SagaFloor] = []
    wire: list[WireUnitCost] = []
    # A runtime under test (nasaga) is counted at the wire, and so is Ratchet's runtime on the
    # same PostgreSQL, by the same method in the same run (``_wire_cost``).
    at_wire = any(s.role == "runtime" for s in specs)

    def guarded(section: str, spec: SagaBackendSpec, body: Callable[[], T]) -> T | None:
        return guard(errors, say, section, spec.name, body)

    def measure_throughput(spec: SagaBackendSpec) -> SagaThroughput:
        _saga_throughput.warm_up(spec, options.seed)
        return _saga_throughput.measure(
            spec,
            runs=options.runs,
            examples=options.examples,
            steps=options.steps,
            seed=options.seed,
            progress=say,
        )

    for spec in specs:
        reason = unavailable(spec.service)
        if reason is not None:
            unavailable_[spec.name] = reason
            say(f"{spec.name}: unavailable: {reason}")
            continue
        measured = guarded("saga-throughput", spec, partial(measure_throughput, spec))
        if measured is not None:
            throughput.append(measured)
        if at_wire and spec.service == "postgres":
            counted = guarded(
                "saga-wire-cost",
                spec,
                partial(measure_wire, spec, options.cost_repeats, options.rate_seconds),
            )
            wire.extend(counted or ())
        if spec.role == "runtime":
            continue  # no SagaBackend port: sections 6 and 7 measure Ratchet's runtime over one
        cost = guarded("saga-cost", spec, partial(measure_cost, spec, options.cost_repeats))
        if cost is None:
            continue
        say(f"saga cost {spec.name}: {len(cost.units)} units measured")
        costs.append(cost)
        pair = guarded("saga-rate", spec, partial(_rates, spec, cost, options, say))
        if pair is not None:
            rates.extend(pair[0])
            if pair[1] is not None:
                floors.append(pair[1])
                servers[spec.name] = pair[1].server
    figures = {
        "saga_throughput": tuple(throughput),
        "saga_costs": tuple(costs),
        "saga_rates": tuple(rates),
        "saga_floors": tuple(floors),
        "saga_wire_costs": tuple(wire),  # nasaga beside Ratchet on PostgreSQL (_wire_cost)
    }
    return SectionOutcome(figures, servers, unavailable_, errors)


SAGA_SECTION = Section("saga", lambda options: SAGA_SUITE in options.suites, run_saga)
