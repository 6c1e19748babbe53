"""The command line: exit codes 0/1/2, JUnit and JSON reports, the fault catalog, replay."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conformance.cli import main


def test_faults_prints_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faults"]) == 0
    out = capsys.readouterr().out
    for point in ("M-COMMIT-01", "M-COMMIT-04", "M-COMMIT-06"):
        assert point in out
    for kind in ("response-lost", "failed-before", "crash", "interleave", "recovery-sweep"):
        assert kind in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--backend", "no-such-backend"], "unknown backend 'no-such-backend'"),
        (["run", "--store", "no_such_module:make"], "bad store factory"),
        (["run", "--store", "impls.memory:no_such_factory"], "has no attribute 'no_such_factory'"),
        (["run", "--suite", "nope"], "unknown suite 'nope'"),
        (["run", "--faults", "gremlins"], "unknown fault 'gremlins'"),
        (["replay", "/no/such/file.json"], "cannot read failure file"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_an_unreachable_server_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RATCHET_REDIS_URL", "redis://127.0.0.1:1/0")
    assert main(["run", "--backend", "redis", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "backend redis" in err and "scripts/services up redis" in err


def test_a_passing_run_writes_junit_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit, report = tmp_path / "out.xml", tmp_path / "report.json"
    code = main(
        [
            "run",
            "--backend",
            "memory",
            "--suite",
            "store",
            "--seed",
            "3",
            # The files are the point, not the run: a few examples, no gate (conformance-live-commit
            # runs this backend and suite under the whole ci profile, gate on).
            "--examples",
            "10",
            "--no-coverage-gate",
            "--no-database",
            "--failures",
            str(tmp_path / "f"),
            "--junit",
            str(junit),
            "--report",
            str(report),
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().out
    case = ElementTree.parse(junit).getroot().find("testcase")
    assert case is not None and case.get("classname") == "ratchet.memory" and case.get("name") == "store"
    assert case.find("failure") is None
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["results"][0]["steps"] > 0
    assert "backend" in capsys.readouterr().out  # the summary table


def test_a_violation_exits_1_and_replay_reproduces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "out.xml"
    code = main(
        [
            "run",
            "--store",
            "examples.broken_stores:conflict_replays_ack",
            "--suite",
            "store",
            "--seed",
            "3",
            "--no-database",
            "--failures",
            str(tmp_path),
            "--junit",
            str(junit),
            "--quiet",
        ]
    )
    assert code == 1
    assert "C-PRE-03" in capsys.readouterr().out
    failure = ElementTree.parse(junit).getroot().find("testcase/failure")
    assert failure is not None and failure.get("type") == "C-PRE-03"
    assert "shrunk program" in (failure.text or "")
    (path,) = tmp_path.glob("custom-store-C-PRE-03-*.json")
    assert main(["replay", str(path)]) == 2  # the file names a module nobody vouched for
    assert "--trust examples.broken_stores" in capsys.readouterr().err
    assert main(["replay", str(path), "--trust", "examples.broken_stores"]) == 1
    assert "reproduced C-PRE-03" in capsys.readouterr().out
    assert main(["replay", str(path), "--store", "impls.memory:open_store"]) == 0
    assert "did not reproduce" in capsys.readouterr().out
