"""Time and progress (issue 19, deliverable 6): the time budget, done/target with an ETA, a summary
table that fits 100 columns, and a one-line headline for pytest's ``-r`` summary."""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from pathlib import Path

import attrs
import pytest

from conformance._machine import RecordedFailure, RunContext, Step, SuiteStats
from conformance._progress import Progress
from conformance._report import FailureSummary, Report, SuiteResult, Verdict
from conformance._violations import Violation
from conformance.cli import main

COMMIT_KINDS = (
    "clock-advance",
    "crash",
    "failed-before",
    "interleave",
    "outbox-ack-lost",
    "outbox-down",
    "outbox-failed",
    "recovery-sweep",
    "response-lost",
)


def _result(backend: str, suite: str, verdict: Verdict, **kwargs: object) -> SuiteResult:
    stats = SuiteStats(examples=2000, steps=123456, faults=Counter({k: 12345 for k in COMMIT_KINDS}))
    stats.backend_seconds = 12.0
    return SuiteResult(backend, suite, verdict, stats, 99.0, 1, coverage_targets=52, **kwargs)  # type: ignore[arg-type]


def test_the_summary_table_fits_100_columns_with_every_fault_kind() -> None:
    failure = FailureSummary(
        "C-POST-05", "a long message " * 5, (Step("reserve", {"key": "t1/alice/m1"}),), None
    )
    report = Report(
        (
            _result("fakeredis", "commit", Verdict.PASS),
            _result("cql", "commit", Verdict.VIOLATION, failure=failure),
            _result("sqlite", "saga", Verdict.VIOLATION, failure=attrs.evolve(failure, rule_id="S-TIMER-02")),
            _result("a-very-long-custom-backend-name-given-with-name", "store", Verdict.PASS),
            _result("postgres", "saga", Verdict.INTERRUPTED, failure=failure),
            _result("mysql", "saga", Verdict.NOT_RUN),
        ),
        interrupted_by=2,
    )
    table = report.summary_table()
    print(table)
    assert max(len(line) for line in table.splitlines()) <= 100
    for kind in COMMIT_KINDS:
        assert f"{kind} 12345" in table  # folded into the second block, not dropped
    assert "VIOLATION C-POST-05" in table and "INTERRUPTED (found)" in table


def test_the_headline_is_one_line_naming_the_rule() -> None:
    failure = FailureSummary("C-PRE-05", "history_page showed bob's history to mallory", (), None)
    report = Report(
        (
            _result("memory", "store", Verdict.PASS),
            _result("mine", "commit", Verdict.VIOLATION, failure=failure),
        )
    )
    assert report.headline() == "mine/commit: C-PRE-05: history_page showed bob's history to mallory"
    assert Report((_result("memory", "store", Verdict.PASS),)).headline() == "pass: 1 suites"


def test_progress_shows_done_of_target_and_an_eta() -> None:
    stream = io.StringIO()
    progress = Progress(stream, interval_s=0.0)
    context = RunContext("store", "memory", None, target_examples=200)
    context.started = time.perf_counter() - 10.0
    context.stats.examples, context.stats.steps = 50, 2000
    progress._last = 0.0
    progress(context)
    line = stream.getvalue()
    assert "memory/store: 50/200 examples, 2000 steps" in line
    assert "ETA 30s" in line  # 10 s for 50 examples, 150 to go
    context.last_failure = RecordedFailure([], Violation("C-POST-02", "lost"), [])
    progress._last = 0.0
    progress(context)
    assert "shrinking C-POST-02" in stream.getvalue().splitlines()[-1]


@pytest.mark.timing
def test_the_time_budget_stops_generation_and_the_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    started = time.monotonic()
    argv = ["run", "--backend", "memory", "--suite", "store", "--profile", "deep", "--seed", "4", "--quiet"]
    code = main(
        [
            *argv,
            "--time-budget",
            "1.5s",
            "--no-database",
            "--failures",
            str(tmp_path),
            "--report",
            str(report),
        ]
    )
    elapsed = time.monotonic() - started
    assert code in (0, 1)  # a pass or a coverage gap on what ran: never an error
    (result,) = json.loads(report.read_text())["results"]
    assert result["budget_spent"] is True and result["examples"] < result["examples_target"] == 2000
    assert elapsed < 5.0
    out = capsys.readouterr().out
    assert "the time budget ran out after" in out and "*: the time budget ran out first" in out
