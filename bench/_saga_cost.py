"""Saga unit cost per backend: transactions, port calls and SQL statements per unit; units per second.

A unit is one atomic unit of the saga contract: one local transaction of the runtime (the saga contract,
S-ORCH-02, S-PART-01, S-TX-01), a database-rolled-back attempt retried at most as ``run_unit`` says.
Two representative units, each fresh and replayed:

* ``start``: ``Orchestrator.start_saga`` of a new business key (S-START-01..03): definition,
  receipt and quota read; receipt, instance, journal, quota, command outbox and timer written;
* ``start again``: the same request once more: the receipt answers ``AlreadyExists`` (S-START-02);
* ``command``: ``Participant.handle_command`` of a new command, decided ``SUCCEED`` (S-PART-01..03):
  inbox claim, gate, business fact, result outbox;
* ``command again``: the same command delivered again: the inbox answers ``DuplicateCommand``.

Counts come from the saga seam (``_saga_seam``: transactions are ``begin`` calls, port calls by
method) and from the SQL backends' statement counter (``impls.sql.SqlSagaBackend.statements``,
BEGIN/COMMIT/ROLLBACK included; on PostgreSQL and MariaDB each statement is one round trip). The
memory backend has no SQL, so none.

Units per second are sequential loops of fresh units on one backend (one connection), each slice
on fresh namespaces (``_saga_workload.opened``) so that every backend holds at most one slice's
rows: the memory backend copies its tables on BEGIN, so its rate would otherwise fall as rows pile up.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

import attrs

from bench._figures import Spread, Stopwatch
from bench._saga_seam import MeteredSagaBackend, SagaMeters
from bench._saga_throughput import saga_factory
from bench._saga_workload import (
    command_for,
    opened,
    participant,
    ready_orchestrator,
    start_request,
)
from bench._workload import new_namespace
from conformance.backends import SagaBackendSpec
from conformance.saga._world import ORCHESTRATOR
from impls.saga import Orchestrator, Participant
from model.saga import AlreadyExists, CommandEnvelope, CommandProcessed, Decision, DuplicateCommand, Started

START, START_AGAIN, COMMAND, COMMAND_AGAIN = "start", "start again", "command", "command again"
ORCHESTRATOR_SIDE, PARTICIPANT_SIDE = "orchestrator", "participant"
#: The units whose rate is measured (the fresh ones), with the side that runs them.
RATED_UNITS = {START: ORCHESTRATOR_SIDE, COMMAND: PARTICIPANT_SIDE}


@attrs.frozen
class UnitCount:
    """What one unit costs, per unit."""

    unit: str
    side: str  # orchestrator or participant
    outcome: str  # the runtime's outcome type, the same every time
    transactions: Spread
    port_calls: Spread  # every port call: begin, reads, writes, commit/rollback
    statements: Spread | None  # SQL statements; None: the backend has no SQL to count
    port_calls_by_method: dict[str, float]  # median per method


@attrs.frozen
class SagaUnitCost:
    backend: str
    row_locks: bool  # SELECT ... FOR UPDATE (servers) or a serial BEGIN (SQLite, memory)
    units: tuple[UnitCount, ...]

    def unit(self, name: str) -> UnitCount | None:
        return next((u for u in self.units if u.unit == name), None)


@attrs.define
class _Sample:
    outcome: str
    calls: Counter[str]
    statements: int | None


class _Counting:
    """A backend behind the seam, and the deltas of its counters around one unit."""

    def __init__(self, backend: MeteredSagaBackend) -> None:
        self.backend = backend

    def around(self, unit: Callable[[], object]) -> _Sample:
        meters = self.backend.meters
        calls, statements = Counter(meters.calls), self.backend.statements
        outcome = unit()
        after = self.backend.statements
        return _Sample(
            outcome=type(outcome).__name__,
            calls=meters.calls - calls,
            statements=None if statements is None or after is None else after - statements,
        )


def _count(unit: str, side: str, samples: Sequence[_Sample]) -> UnitCount:
    outcomes = {s.outcome for s in samples}
    if len(outcomes) != 1:
        raise RuntimeError(f"unit {unit!r} ended differently from run to run: {sorted(outcomes)}")
    methods = sorted({m for s in samples for m in s.calls})
    statements = [s.statements for s in samples if s.statements is not None]
    return UnitCount(
        unit=unit,
        side=side,
        outcome=outcomes.pop(),
        transactions=Spread.of([s.calls["begin"] for s in samples]),
        port_calls=Spread.of([s.calls.total() for s in samples]),
        statements=Spread.of(statements) if len(statements) == len(samples) else None,
        port_calls_by_method={m: statistics.median([s.calls[m] for s in samples]) for m in methods},
    )


def _expect(outcome: object, wanted: type, unit: str) -> None:
    # The bench measures the path it names; any other outcome (a rollback under contention, a
    # refusal) would make the figure describe a different unit.
    if not isinstance(outcome, wanted):
        raise RuntimeError(f"unit {unit!r} ended {outcome!r}, not {wanted.__name__}")


def start_once(orchestrator: Orchestrator, n: int, wanted: type = Started) -> object:
    outcome = orchestrator.start_saga(start_request(n), 0)
    _expect(outcome, wanted, START if wanted is Started else START_AGAIN)
    return outcome


def handle_once(part: Participant, command: CommandEnvelope, wanted: type = CommandProcessed) -> object:
    outcome = part.handle_command(command, ORCHESTRATOR, Decision.SUCCEED)
    _expect(outcome, wanted, COMMAND if wanted is CommandProcessed else COMMAND_AGAIN)
    return outcome


def measure_cost(spec: SagaBackendSpec, repeats: int) -> SagaUnitCost:
    """Each unit ``repeats`` times on fresh namespaces, after one warm-up unit of each side."""
    meters = SagaMeters()
    with opened(meters.metered_factory(saga_factory(spec)), new_namespace()) as (orch_db, part_db):
        assert isinstance(orch_db, MeteredSagaBackend) and isinstance(part_db, MeteredSagaBackend)
        orchestrator, part = ready_orchestrator(orch_db), participant(part_db)
        start_once(orchestrator, 0)  # warm-up: prepared statements, caches, the first rows
        handle_once(part, command_for(0))
        on_orch, on_part = _Counting(orch_db), _Counting(part_db)
        samples: dict[str, list[_Sample]] = {u: [] for u in (START, START_AGAIN, COMMAND, COMMAND_AGAIN)}
        for n in range(1, repeats + 1):
            command = command_for(n)
            samples[START].append(on_orch.around(partial(start_once, orchestrator, n)))
            samples[START_AGAIN].append(on_orch.around(partial(start_once, orchestrator, n, AlreadyExists)))
            samples[COMMAND].append(on_part.around(partial(handle_once, part, command)))
            again = partial(handle_once, part, command, DuplicateCommand)
            samples[COMMAND_AGAIN].append(on_part.around(again))
        units = tuple(
            _count(unit, ORCHESTRATOR_SIDE if unit.startswith(START) else PARTICIPANT_SIDE, found)
            for unit, found in samples.items()
        )
        return SagaUnitCost(spec.name, orch_db.capabilities.row_locks, units)


def start_loop(orchestrator: Orchestrator, seconds: float, first: int) -> Stopwatch:
    """Sequential starts of new business keys for ``seconds``; the stopwatch holds count and rate."""
    watch = Stopwatch(seconds, minimum=3)
    n = first
    while watch.running():
        start_once(orchestrator, n)
        n += 1
        watch.tick()
    return watch


def command_loop(part: Participant, commands: Sequence[CommandEnvelope], seconds: float) -> Stopwatch:
    """Sequential new commands for ``seconds`` or until ``commands`` run out (made beforehand, so
    making them is not measured); the stopwatch holds count and rate."""
    watch = Stopwatch(seconds, minimum=min(3, len(commands)))
    pending = iter(commands)
    while watch.running():
        command = next(pending, None)
        if command is None:
            break
        handle_once(part, command)
        watch.tick()
    return watch
