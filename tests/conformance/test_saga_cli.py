"""A third-party saga backend on the command line and from Python: ``run --suite saga
--saga-backend``, ``replay --saga-backend`` of a saga failure file (role ``backend``),
``run_conformance(..., suites=("saga",))``, and ``--faults`` honoured by the saga machine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance import Verdict, run_conformance
from conformance.cli import main
from impls.saga.memory import open_memory_saga_backend

MEMORY = "impls.saga.memory:open_memory_saga_backend"
SEED = 3


def _run(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--suite", "saga", "--seed", str(SEED), "--no-database", "--failures", str(tmp_path),
            "--quiet", *extra]  # fmt: skip


def test_a_broken_saga_backend_given_with_store_exits_1_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path, "--saga-backend", "examples.broken_saga_backends:timer_ignores_fencing")) == 1
    assert "VIOLATION S-TIMER-02" in capsys.readouterr().out
    (path,) = tmp_path.glob("custom-saga-S-TIMER-02-*.json")
    assert json.loads(path.read_text())["factories"] == {
        "backend": "examples.broken_saga_backends:timer_ignores_fencing"
    }
    assert main(["replay", str(path), "--trust", "examples.broken_saga_backends"]) == 1
    assert "reproduced S-TIMER-02" in capsys.readouterr().out
    # --saga-backend fills the saga family's "backend" role: the correct backend does not reproduce.
    assert main(["replay", str(path), "--saga-backend", MEMORY]) == 0
    assert "did not reproduce" in capsys.readouterr().out
    assert main(["replay", str(path), "--outbox", "impls.memory:open_outbox"]) == 2
    assert "saga backends take no outbox factory" in capsys.readouterr().err


def test_the_memory_saga_backend_given_with_store_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ci profile's own example count: the gate's targets are met by that budget (make
    # conformance), not by a seed's luck at a smaller one.
    code = main(_run(tmp_path, "--saga-backend", MEMORY))
    out = capsys.readouterr().out
    assert code == 0, out
    # Every target the saga suite declares (docs/ci-gate.md), and no fewer than it had on
    # 2026-12-01 (82; the count grows as checks are added, a drop means targets went missing).
    found = re.search(r" (\d+)/(\d+)  pass", out)
    assert found is not None, out
    assert found[1] == found[2] and int(found[2]) >= 82, out


def test_store_with_an_outbox_is_a_usage_error_for_the_saga_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["run", "--suite", "saga", "--saga-backend", MEMORY, "--outbox", "impls.memory:open_outbox"])
        == 2
    )
    assert "saga backends take no outbox factory" in capsys.readouterr().err


def test_a_fault_filter_injects_only_the_faults_it_names(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    argv = _run(tmp_path, "--backend", "memory", "--faults", "commit-unknown", "--examples", "60")
    assert main([*argv, "--no-coverage-gate", "--report", str(report_path)]) == 0
    (result,) = json.loads(report_path.read_text())["results"]
    assert result["verdict"] == "pass"
    assert set(result["faults_injected"]) == {"commit-unknown"}
    # As on the commit side, a filtered run is a debugging run: the gate still asks for every kind.
    assert main([*argv, "--report", str(report_path)]) == 1
    (result,) = json.loads(report_path.read_text())["results"]
    gaps = {gap["target"] for gap in result["coverage"]["gaps"]}
    assert "fault:commit-unknown" not in gaps and {"fault:ack-lost", "fault:reorder"} <= gaps


def test_run_conformance_runs_the_saga_suite_on_a_factory_callable() -> None:
    report = run_conformance(
        open_memory_saga_backend,
        suites=("saga",),
        examples=60,
        seed=SEED,
        database_dir=None,
        failure_dir=None,
        coverage_gate=False,  # the Python entry point's run; the gate is the CLI test's above
    )
    (result,) = report.results
    assert result.verdict is Verdict.PASS, report.details()
    assert (result.backend, result.suite) == ("custom", "saga")
    with pytest.raises(ValueError, match="no outbox factory"):
        run_conformance(MEMORY, suites=("saga",), outbox_factory="impls.memory:open_outbox")
