"""``conformance bench`` runs and produces every figure with sane types (never a timing assertion).

Benchmarks are not timed tests: these run the bench on the memory backend at tiny sizes and check
the shape of what comes out — every section present, counts where counts are known, spreads that
are spreads — and that a backend whose server is down is reported, not crashed on.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from bench._bench import BenchOptions, BenchReport, run_bench
from bench._commit_cost import FRESH, REPLAY
from bench._figures import NOT_MEASURED, PASS, Spread
from bench._floor import LIKE_FOR_LIKE, READ_ONLY, SINGLE, RedisFloor, timed_loop
from bench._table import JSON_FORMAT, render, to_json
from conformance.cli import main

TINY = BenchOptions(
    backends=("memory",), runs=2, examples=2, steps=5, cost_repeats=2, rate_seconds=0.01, seed=3
)


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


def test_spread_of_runs() -> None:
    spread = Spread.of([3, 1, 2, 10])
    assert (spread.median, spread.min, spread.max) == (2.5, 1.0, 10.0)
    assert spread.q1 <= spread.median <= spread.q3
    assert Spread.of([7]).steady and Spread.of([7]).q1 == 7.0
    assert spread.show() == "2 [1-10]" and Spread.of([4, 4]).show() == "4"
    with pytest.raises(ValueError):
        Spread.of([])


def test_throughput_on_memory(report: BenchReport) -> None:
    assert not report.errors and not report.unavailable
    assert [(t.backend, t.suite) for t in report.throughput] == [("memory", "store"), ("memory", "commit")]
    for figure in report.throughput:
        assert len(figure.runs) == TINY.runs
        for spread in (
            figure.steps_per_second,
            figure.backend_share,
            figure.store_share,
            figure.outbox_share,
            figure.harness_share,
            figure.steps_per_run,
        ):
            assert _is_spread(spread)
        assert 0.0 <= figure.backend_share.median <= 1.0
        assert figure.backend_share.median + figure.harness_share.median == pytest.approx(1.0)
        for run in figure.runs:
            assert run.verdict == "pass", run.detail
            assert run.steps > 0 and run.examples > 0
            assert run.store_seconds > 0.0  # the seam saw the real store's calls
            assert run.store_seconds + run.outbox_seconds <= run.elapsed_s


def test_commit_cost_on_memory(report: BenchReport) -> None:
    (cost,) = report.costs
    assert cost.backend == "memory" and cost.atomic_publish_and_commit
    fresh, replay = cost.case(FRESH), cost.case(REPLAY)
    assert fresh is not None and replay is not None
    # The committer's path on an atomic store for a member with no quota: reserve, put_record,
    # publish, commit (no read before reserve: reserve answers a repeat with its durable state).
    assert fresh.store_calls_by_method == {
        "reserve": 1,
        "put_record": 1,
        "mark_published_and_committed": 1,
    }
    assert fresh.outbox_calls.median == 1 and replay.store_calls.median == 1
    assert fresh.store_round_trips is None  # no server behind the memory store
    resumed = [c for c in cost.cases if c.case.startswith("resume from ")]
    assert [c.crash_point for c in resumed] == ["M-COMMIT-02", "M-COMMIT-03", "M-COMMIT-04", "M-COMMIT-06"]
    assert [c.case for c in resumed][-1] == "resume from COMMITTED"
    for case in cost.cases:
        assert _is_spread(case.store_calls) and case.store_calls.steady


def test_commit_rate_on_memory(report: BenchReport) -> None:
    (rate,) = report.rates
    assert rate.backend == "memory"
    assert _is_spread(rate.commits_per_second) and rate.commits_per_second.min > 0
    assert _is_spread(rate.cpu_us_per_commit)
    assert rate.round_trips_per_commit is None and rate.floor_ratio_percent is None
    assert report.floors == () and report.footprints == ()  # no server: no floor, no footprint


def test_targets_and_machine(report: BenchReport) -> None:
    names = [t.name for t in report.targets]
    assert names == [
        "memory store: stateful steps/s (model check on)",
        "memory commit: stateful steps/s (model check on)",
    ]
    assert all(t.verdict in (PASS, "MISS") for t in report.targets)
    assert report.machine.cpus >= 1 and report.machine.python.count(".") == 2
    assert report.elapsed_s > 0


def test_table_and_json(report: BenchReport) -> None:
    text = render(report)
    for heading in ("1. Harness throughput", "2. Commit cost", "3. Commits per second", "Targets"):
        assert heading in text
    document = json.loads(json.dumps(to_json(report)))
    assert document["format"] == JSON_FORMAT
    assert set(document) >= {"machine", "throughput", "costs", "rates", "floors", "footprints", "targets"}
    figure = document["throughput"][0]["steps_per_second"]
    assert set(figure) == {"median", "min", "max", "q1", "q3", "samples"}
    assert len(figure["samples"]) == TINY.runs


def test_down_service_is_unavailable_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATCHET_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    down = run_bench(BenchOptions(backends=("redis",), runs=1))
    assert "redis" in down.unavailable and "scripts/services up redis" in down.unavailable["redis"]
    assert down.throughput == () and down.costs == () and not down.errors
    assert {t.verdict for t in down.targets} == {NOT_MEASURED}
    assert down.exit_code(strict=False) == 0 and down.exit_code(strict=True) == 1


def test_cli_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--backend",
            "memory",
            "--runs",
            "1",
            "--examples",
            "2",
            "--steps",
            "5",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    assert "Targets" in capsys.readouterr().out
    assert json.loads(out.read_text())["options"]["backends"] == ["memory"]


def test_cli_rejects_an_unknown_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "nosuch", "--quiet"]) == 2
    assert "unknown backend" in capsys.readouterr().err


@pytest.mark.service("redis")
def test_redis_floor_writes_on_every_round_trip_and_names_the_durability() -> None:
    """The target's floor writes on each of a commit's round trips (each pays the server's fsync, as a
    commit's do); the read-only one beside it writes nothing; both say how the server persists."""
    from impls.redis import redis_client

    async def probe() -> tuple[str, dict[str, tuple[int, bool]], bytes | None, int]:
        floor = await RedisFloor.open()
        try:
            probes = floor.probes(4)
            for each in probes:
                assert (await timed_loop(each.operation, 0.0)).count >= 3
            written = await floor._client.get(floor._key)
        finally:
            await floor.close()
        client = redis_client()
        try:
            left = int(await client.exists(floor._key))
        finally:
            await client.aclose()
        shapes = {p.shape: (p.round_trips, p.writes) for p in probes if p.shape != SINGLE}
        return floor.durability, shapes, written, left

    durability, shapes, written, left = asyncio.run(probe())
    assert shapes == {LIKE_FOR_LIKE: (4, True), READ_ONLY: (4, False)}
    assert durability.startswith("appendonly ") and "appendfsync " in durability
    assert written == b"1" and left == 0  # the writing script really wrote; close removed its key
