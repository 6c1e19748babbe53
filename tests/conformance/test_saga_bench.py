"""The saga side of ``conformance bench`` runs and fills every figure (never a timing assertion).

Like test_bench.py: the bench runs on the embedded saga backends (memory, SQLite) at tiny sizes and
the tests check the shape of what comes out -- the saga sections present, counts that are the same
every time, spreads that are spreads, the seam and the SQL statement counter counting what ran --
and that a saga backend whose server is down is reported, not crashed on.
"""

from __future__ import annotations

import json
import math

import pytest

from bench._bench import BenchOptions, BenchReport, _chosen, run_bench
from bench._figures import Spread
from bench._saga_cost import COMMAND, COMMAND_AGAIN, START, START_AGAIN, measure_cost
from bench._saga_floor import TRIVIAL_STATEMENTS, open_sql_floor, sync_timed_loop
from bench._saga_seam import MeteredSagaBackend, SagaMeters
from bench._table import JSON_FORMAT, render, to_json
from conformance.backends import SAGA_BACKENDS
from conformance.cli import main
from impls.sql import SqlSagaBackend, open_sqlite_saga_backend

TINY = BenchOptions(
    backends=("memory", "sqlite"),
    suites=("saga",),
    runs=2,
    examples=2,
    steps=5,
    cost_repeats=2,
    rate_seconds=0.01,
    seed=3,
)
UNITS = {
    START: "Started",
    START_AGAIN: "AlreadyExists",
    COMMAND: "CommandProcessed",
    COMMAND_AGAIN: "DuplicateCommand",
}


@pytest.fixture(scope="module")
def report() -> BenchReport:
    return run_bench(TINY)


def _is_spread(value: object) -> bool:
    return (
        isinstance(value, Spread)
        and len(value.samples) >= 1
        and all(math.isfinite(s) for s in value.samples)
        and value.min <= value.q1 <= value.median <= value.q3 <= value.max
    )


def test_saga_only_runs_no_commit_section(report: BenchReport) -> None:
    assert not report.errors and not report.unavailable
    assert report.throughput == () and report.costs == () and report.rates == () and report.floors == ()
    assert report.targets == ()  # no target is set for sagas


def test_saga_throughput(report: BenchReport) -> None:
    assert [(t.backend, t.suite) for t in report.saga_throughput] == [("memory", "saga"), ("sqlite", "saga")]
    for figure in report.saga_throughput:
        assert len(figure.runs) == TINY.runs
        for spread in (
            figure.steps_per_second,
            figure.backend_share,
            figure.transaction_share,
            figure.harness_share,
            figure.transactions_per_step,
            figure.steps_per_run,
        ):
            assert _is_spread(spread)
        assert 0.0 < figure.backend_share.median <= 1.0
        assert figure.backend_share.median + figure.harness_share.median == pytest.approx(1.0)
        for run in figure.runs:
            assert run.verdict == "pass", run.detail
            assert run.steps > 0 and run.transactions > 0
            assert 0.0 < run.port_seconds <= run.elapsed_s
            # The harness times its backend calls too (its summary-table backend% column).
            assert run.harness_backend_seconds > 0.0


def test_saga_unit_cost(report: BenchReport) -> None:
    assert [c.backend for c in report.saga_costs] == ["memory", "sqlite"]
    memory, sqlite = report.saga_costs
    assert not memory.row_locks and not sqlite.row_locks  # both serialize whole transactions
    for cost in report.saga_costs:
        assert {u.unit: u.outcome for u in cost.units} == UNITS
        for unit in cost.units:
            assert unit.transactions.median == 1 and unit.transactions.steady  # one atomic unit
            assert unit.port_calls.steady and unit.port_calls.median == sum(
                unit.port_calls_by_method.values()
            )
            ends = "commit" if unit.unit in (START, COMMAND) else "rollback"  # a replay writes nothing
            assert unit.port_calls_by_method[ends] == 1
    for unit in memory.units:
        assert unit.statements is None  # no SQL behind the memory backend
    for unit in sqlite.units:
        assert unit.statements is not None and unit.statements.steady
        # BEGIN, a statement per port call at least, COMMIT or ROLLBACK: never fewer than the calls.
        assert unit.statements.median >= unit.port_calls.median
    assert [u.port_calls_by_method for u in memory.units] == [u.port_calls_by_method for u in sqlite.units]


def test_saga_rates_and_floor(report: BenchReport) -> None:
    assert [(r.backend, r.unit) for r in report.saga_rates] == [
        ("memory", START),
        ("memory", COMMAND),
        ("sqlite", START),
        ("sqlite", COMMAND),
    ]
    for rate in report.saga_rates:
        assert _is_spread(rate.units_per_second) and rate.units_per_second.min > 0
        assert _is_spread(rate.cpu_us_per_unit)
    memory_start, memory_command, sqlite_start, sqlite_command = report.saga_rates
    for rate in (memory_start, memory_command):
        assert rate.floor_per_second is None and rate.statements_per_unit is None
    (floor,) = report.saga_floors
    assert floor.backend == "sqlite" and floor.server.startswith("SQLite ")
    assert report.servers == {"sqlite": floor.server}
    (sqlite_cost,) = [c for c in report.saga_costs if c.backend == "sqlite"]
    for rate in (sqlite_start, sqlite_command):
        probe = floor.shaped_like(rate.unit)
        count = sqlite_cost.unit(rate.unit)
        assert probe is not None and count is not None and count.statements is not None
        assert probe.statements == rate.statements_per_unit == count.statements.median
        assert _is_spread(rate.floor_per_second) and _is_spread(rate.floor_ratio_percent)
    assert floor.probes[0].statements == TRIVIAL_STATEMENTS and floor.probes[0].shaped_like is None


def test_table_and_json(report: BenchReport) -> None:
    text = render(report)
    for heading in ("5. Saga harness throughput", "6. Saga unit cost", "7. Saga units per second"):
        assert heading in text
    assert "1. Harness throughput" not in text and "no target is set for sagas" in text
    document = json.loads(json.dumps(to_json(report)))
    assert document["format"] == JSON_FORMAT
    assert {"saga_throughput", "saga_costs", "saga_rates", "saga_floors"} <= set(document)
    figure = document["saga_rates"][0]["units_per_second"]
    assert set(figure) == {"median", "min", "max", "q1", "q3", "samples"} and len(figure["samples"]) == 2


def test_seam_and_statement_counter() -> None:
    meters = SagaMeters()
    backend = meters.metered_factory(open_sqlite_saga_backend)("seam")
    assert isinstance(backend, MeteredSagaBackend)
    traced: list[str] = []  # SQLite's own record of every statement it ran: an independent count
    assert isinstance(backend.inner, SqlSagaBackend)
    backend.inner.connection.set_trace_callback(traced.append)
    before = backend.statements
    assert before is not None  # schema creation already counted its statements
    backend.readiness()  # BEGIN IMMEDIATE; SELECT 1; ROLLBACK
    assert backend.statements == before + 3
    tx = backend.begin()
    assert tx.load_receipt("nobody") is None
    tx.rollback()
    tx.rollback()  # idempotent: counted as a call, sends nothing, ends no second interval
    assert backend.statements == before + 6 == before + len(traced)
    assert [sql.split()[0] for sql in traced] == ["BEGIN", "SELECT", "ROLLBACK"] * 2
    assert meters.calls == {"open": 1, "readiness": 1, "begin": 1, "load_receipt": 1, "rollback": 2}
    assert meters.transaction_seconds > 0.0 and meters.port_seconds > 0.0
    backend.close()


def test_backend_names_per_family() -> None:
    _, commit, saga, skipped = _chosen(BenchOptions(backends=("memory", "redis", "sqlite"), suites=("saga",)))
    assert (commit, [s.name for s in saga], skipped) == ([], ["memory", "sqlite"], ["redis"])
    _, commit, saga, skipped = _chosen(BenchOptions(backends=("memory", "sqlite"), suites=("store", "saga")))
    assert ([s.name for s in commit], [s.name for s in saga], skipped) == (
        ["memory"],
        ["memory", "sqlite"],
        [],
    )
    with pytest.raises(ValueError, match="unknown backend"):
        _chosen(BenchOptions(backends=("nosuch",), suites=("saga",)))
    with pytest.raises(ValueError, match="runs suites saga"):
        _chosen(BenchOptions(backends=("redis",), suites=("saga",)))


def test_down_saga_service_is_unavailable_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATCHET_PG_DSN", "postgresql://ratchet:ratchet@127.0.0.1:1/ratchet")  # nothing there
    down = run_bench(BenchOptions(backends=("postgres",), suites=("saga",), runs=1))
    assert "postgres" in down.unavailable and "scripts/services up postgres" in down.unavailable["postgres"]
    assert down.saga_throughput == () and down.saga_costs == () and not down.errors
    assert down.exit_code(strict=False) == 0 and down.exit_code(strict=True) == 1


def test_cli_saga_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "redis", "--suite", "saga", "--quiet"]) == 2
    assert "runs suites saga" in capsys.readouterr().err


@pytest.mark.service("postgres")
def test_postgres_unit_cost_and_floor() -> None:
    """The SQL flow is shared (impls/sql/_saga.py): PostgreSQL sends the statements SQLite does."""
    on_postgres = measure_cost(SAGA_BACKENDS["postgres"], 1)
    on_sqlite = measure_cost(SAGA_BACKENDS["sqlite"], 1)
    assert on_postgres.row_locks
    for unit in UNITS:
        pg, lite = on_postgres.unit(unit), on_sqlite.unit(unit)
        assert pg is not None and lite is not None and pg.statements is not None
        assert pg.outcome == UNITS[unit] and pg.statements == lite.statements
    floor = open_sql_floor("postgres")
    assert (
        floor is not None and floor.server.startswith("PostgreSQL ") and "synchronous_commit " in floor.server
    )
    try:
        for probe in floor.probes({START: 16}):
            assert sync_timed_loop(probe.operation, 0.0).count >= 3
    finally:
        floor.close()


@pytest.mark.service("postgres")
def test_wire_cost_counts_nasaga_beside_ratchet_on_postgres() -> None:
    """Section 8: both runtimes' units counted at the same proxy; a replayed start commits on
    nasaga (N-19) and rolls back on Ratchet's runtime."""
    import os
    import shutil

    from bench._wire_cost import UNITS as WIRE_UNITS
    from bench._wire_cost import measure_wire

    if not (os.environ.get("RATCHET_NASAGA_HOST") or shutil.which("cargo")):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true: the nasaga host needs cargo", pytrace=False)
        pytest.skip("the nasaga host needs cargo")
    costs = {
        name: {c.unit: c for c in measure_wire(SAGA_BACKENDS[name], 1, 0.05)}
        for name in ("postgres", "nasaga-pg")
    }
    for name, units in costs.items():
        assert tuple(units) == WIRE_UNITS
        for unit in WIRE_UNITS:
            assert _is_spread(units[unit].round_trips) and units[unit].round_trips.median >= 2, (name, unit)
            assert units[unit].by_label.get("BEGIN", 0.0) >= 1.0, (name, unit)  # psycopg may re-prepare
        assert units["start"].units_per_second is not None and units["start"].units_per_second.median > 0
    assert costs["nasaga-pg"]["start again"].by_label.get("COMMIT") == 1.0
    assert costs["postgres"]["start again"].by_label.get("ROLLBACK") == 1.0
