"""``--workers N`` and ``--shard I/N`` (issue 19, deliverables 1 and 2): conformance/_workers.py,
conformance/_merge.py, ``conformance merge``.

The split is decided by the numbers alone; the merged suite is judged once over the union of its
shares; the first violation is shrunk once (one failure file per suite); a signal stops every
worker within a second; a matrix with a shard missing has no verdict.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conformance._machine import SuiteStats
from conformance._merge import merge_results
from conformance._report import FailureSummary, SuiteResult, Verdict
from conformance._violations import CoverageGap
from conformance._workers import Split, parse_split, part_examples, part_seed
from conformance.cli import main

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(sys.executable).with_name("conformance")
SMALL = ["--examples", "24", "--steps", "12", "--seed", "11", "--quiet"]


# --- the split ----------------------------------------------------------------------------------


def test_the_split_is_decided_by_the_numbers_alone() -> None:
    assert part_seed(5, 0, 1) == 5  # one share: the run's own seed, so a one-process run is unchanged
    seeds = [part_seed(5, k, 4) for k in range(4)]
    assert seeds == [part_seed(5, k, 4) for k in range(4)] and len(set(seeds)) == 4
    assert seeds != [part_seed(6, k, 4) for k in range(4)]
    for total, parts in ((200, 2), (200, 3), (7, 4), (3, 3)):
        assert sum(part_examples(total, k, parts) for k in range(parts)) == total
    # Machine 2 of 3 with 2 workers runs shares 2 and 3 of 6; the machines' shares tile them all.
    assert list(Split(2, 2, 3).mine) == [2, 3]
    assert sorted(k for i in (1, 2, 3) for k in Split(2, i, 3).mine) == list(range(6))


def test_workers_and_shard_are_parsed_or_refused() -> None:
    assert parse_split("auto", None).workers >= 1
    assert parse_split("3", "2/4") == Split(3, 2, 4)
    for workers, shard in (("0", None), ("x", None), ("1", "0/2"), ("1", "3/2"), ("1", "2"), ("1", "a/b")):
        with pytest.raises(ValueError):
            parse_split(workers, shard)


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "two"], ["--shard", "3/2"]])
def test_a_bad_split_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--backend", "memory", *argv, *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("conformance: error: --")


# --- merging ------------------------------------------------------------------------------------


def _share(verdict: Verdict, reached: set[str], gaps: tuple[str, ...] = (), **kw: object) -> SuiteResult:
    stats = SuiteStats(examples=10, steps=100, reached=set(reached))
    stats.faults.update({"crash": 2})
    return SuiteResult(
        "memory",
        "commit",
        verdict,
        stats,
        1.0,
        1,
        coverage_gaps=tuple(CoverageGap(g, f"{g} never happened") for g in gaps),
        coverage_targets=3,
        **kw,  # type: ignore[arg-type]
    )


def test_the_union_is_judged_once() -> None:
    # Each share missed a target the other reached: the union reached all three.
    one = _share(Verdict.COVERAGE, {"a", "b"}, ("c",))
    two = _share(Verdict.COVERAGE, {"a", "c"}, ("b",))
    merged = merge_results([one, two], elapsed_s=1.5, seed=1, workers=2)
    assert merged.verdict is Verdict.PASS and merged.coverage_gaps == ()
    assert (merged.stats.examples, merged.stats.steps, merged.stats.faults["crash"]) == (20, 200, 4)
    # Both missed c: a gap of the union.
    three = _share(Verdict.COVERAGE, {"a", "b"}, ("c",))
    gap = merge_results([one, three], elapsed_s=1.0, seed=1, workers=2)
    assert gap.verdict is Verdict.COVERAGE and [g.target for g in gap.coverage_gaps] == ["c"]


def test_the_worst_verdict_wins_and_a_stopped_share_never_stands_alone() -> None:
    found = FailureSummary("C-POST-05", "lost", (), None)
    violation = _share(Verdict.VIOLATION, {"a"}, failure=found)
    stopped = _share(Verdict.STOPPED, {"a"})
    passed = _share(Verdict.PASS, {"a", "b", "c"})
    merged = merge_results([stopped, violation], elapsed_s=1.0, seed=1, workers=2)
    assert merged.verdict is Verdict.VIOLATION and merged.failure == found
    assert merge_results([stopped, passed], elapsed_s=1.0, seed=1, workers=2).verdict is Verdict.ERROR
    error = _share(Verdict.ERROR, set(), error="redis went away")
    assert merge_results([violation, error], elapsed_s=1.0, seed=1, workers=2).verdict is Verdict.ERROR
    interrupted = _share(Verdict.INTERRUPTED, set())
    merged = merge_results([violation, interrupted], elapsed_s=1.0, seed=1, workers=2)
    assert merged.verdict is Verdict.INTERRUPTED and merged.failure == found


# --- real runs ----------------------------------------------------------------------------------


def test_two_workers_give_one_merged_report(tmp_path: Path) -> None:
    report, junit, database = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "db"
    argv = ["run", "--backend", "memory", "--suite", "store,commit", "--workers", "2", *SMALL]
    argv += ["--no-coverage-gate", "--report", str(report), "--junit", str(junit)]
    argv += ["--database", str(database), "--failures", str(tmp_path / "f")]
    assert main(argv) == 0
    results = json.loads(report.read_text())["results"]
    assert [(r["suite"], r["workers"], r["verdict"]) for r in results] == [
        ("store", 2, "pass"),
        ("commit", 2, "pass"),
    ]
    assert all(r["examples_target"] == 24 and r["examples"] >= 24 for r in results)
    cases = ElementTree.parse(junit).getroot().findall("testcase")
    assert [c.get("name") for c in cases] == ["store", "commit"]


def test_the_first_violation_stops_the_others_and_is_shrunk_once(tmp_path: Path) -> None:
    failures, report = tmp_path / "failures", tmp_path / "r.json"
    argv = ["run", "--store", "examples.broken_stores:loses_recovery_candidate", "--suite", "store"]
    argv += ["--workers", "2", "--examples", "60", "--steps", "20", "--seed", "7", "--quiet"]
    argv += ["--database", str(tmp_path / "db"), "--failures", str(failures), "--report", str(report)]
    assert main(argv) == 1
    (result,) = json.loads(report.read_text())["results"]
    assert result["verdict"] == "violation" and result["workers"] == 2
    assert result["failure"]["rule_id"] == "C-POST-02" and result["failure"]["program"]
    files = list(failures.iterdir())
    assert [str(f) for f in files] == [result["failure"]["failure_file"]]
    # The examples the finder saved are in its own database shard; nothing is written beside them.
    shards = sorted(p.name for p in (tmp_path / "db").iterdir())
    assert shards and all(name.startswith("worker-") for name in shards), shards


def test_shards_merge_into_one_verdict_and_a_missing_shard_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = [tmp_path / f"shard-{i}.json" for i in (1, 2)]
    for i, path in enumerate(shards, start=1):
        argv = ["run", "--backend", "memory", "--suite", "store", "--shard", f"{i}/2", *SMALL]
        argv += ["--no-database", "--report", str(path), "--failures", str(tmp_path / "f")]
        main(argv)
        data = json.loads(path.read_text())
        assert data["shard"] == f"{i}/2" and data["results"][0]["examples_target"] == 12
    merged, junit = tmp_path / "merged.json", tmp_path / "merged.xml"
    code = main(["merge", *map(str, shards), "--report", str(merged), "--junit", str(junit)])
    data = json.loads(merged.read_text())
    (result,) = data["results"]
    parts = [json.loads(p.read_text())["results"][0] for p in shards]
    assert result["examples"] == sum(p["examples"] for p in parts)
    assert set(result["coverage"]["reached"]) == set().union(*(p["coverage"]["reached"] for p in parts))
    assert code == data["exit_code"] == (0 if result["verdict"] == "pass" else 1)
    assert ElementTree.parse(junit).getroot().find("testcase") is not None
    capsys.readouterr()
    assert main(["merge", str(shards[0])]) == 2
    assert "shards 2 of 2 are missing" in capsys.readouterr().err
    assert main(["merge", str(shards[0]), str(shards[0])]) == 2
    assert "twice" in capsys.readouterr().err


# --- signals ------------------------------------------------------------------------------------

#: (signal, moment, to the whole process group as a terminal's Ctrl-C is, or to the parent alone)
MOMENTS = [
    (
        signal.SIGINT if i % 2 == 0 else signal.SIGTERM,
        round(random.Random(1919 + i).uniform(0.0, 1.5), 3),
        i % 4 < 2,
    )
    for i in range(8)
]


def _ours(marker: str) -> list[int]:
    """Processes (the parent and its workers) whose command line names this test's directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.timing  # a wall-clock bound: run where the cores are not saturated (make test)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find the workers")
@pytest.mark.parametrize(("signum", "offset", "group"), MOMENTS, ids=lambda v: getattr(v, "name", str(v)))
def test_a_signal_stops_every_worker_within_a_second(
    signum: signal.Signals, offset: float, group: bool, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    argv = [str(CONFORMANCE), "run", "--backend", "memory", "--suite", "store,commit", "--workers", "2"]
    argv += ["--examples", "80", "--steps", "20", "--seed", "5", "--no-database"]
    argv += ["--failures", str(tmp_path / "failures"), "--report", str(report)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stderr is not None
        assert child.stderr.readline().startswith("running ")
        time.sleep(offset)
        if child.poll() is not None:
            pytest.skip(f"the run ended before +{offset}s")
        sent = time.monotonic()
        if group:
            os.killpg(child.pid, signum)  # the parent and its workers at once
        else:
            child.send_signal(signum)
        out, err = child.communicate(timeout=10)
        latency = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    print(
        f"{signum.name} to {'the group' if group else 'the parent'} at +{offset:.3f}s: "
        f"exit {child.returncode} after {latency * 1000:.0f} ms (load {os.getloadavg()[0]:.1f})"
    )
    assert child.returncode in (128 + signum, -signum), (out, err)
    assert latency <= 1.0
    assert "Traceback" not in out + err
    deadline = time.monotonic() + 0.5
    while _ours(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ours(str(tmp_path)) == []  # no worker outlives the run
    data = json.loads(report.read_text())
    if data["interrupted"] is not None:
        verdicts = [r["verdict"] for r in data["results"]]
        assert "interrupted" in verdicts or "not-run" in verdicts
        assert all(r["verdict"] != "stopped" for r in data["results"])


# --- fork safety ----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="workers fork where the platform can")
def test_a_forked_worker_starts_its_own_fault_proxy() -> None:
    """A worker forked after the parent ran a wire backend in-process (``bench --workers 1,2``)
    must not arm the parent's proxy, whose serving thread did not survive the fork."""
    from conformance.wire._routes import route

    parent = route("redis").proxy
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        try:
            child = route("redis").proxy
            ok = child is not parent and child.address is not None and child.address != parent.address
            os.write(writer, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(writer)
    answer = os.read(reader, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
