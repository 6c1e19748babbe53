"""The coverage gate is real: a run that never reaches a fault point or fault kind fails."""

from __future__ import annotations

from conformance import Verdict, run_conformance


def test_a_fault_point_never_reached_fails_the_gate() -> None:
    report = run_conformance(
        "impls.memory:open_store",
        backend="memory",
        suites=("commit",),
        seed=7,
        faults=["-M-COMMIT-03"],
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.COVERAGE, report.details()
    assert [gap.target for gap in result.coverage_gaps] == ["crash-at:M-COMMIT-03"]
    assert report.exit_code == 1
    assert "never reached: crash-at:M-COMMIT-03" in report.details()


def test_a_fault_kind_never_injected_fails_the_gate() -> None:
    report = run_conformance(
        "impls.memory:open_store",
        backend="memory",
        suites=("store",),
        seed=7,
        faults=["-response-lost"],
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.COVERAGE
    assert "fault:response-lost" in [gap.target for gap in result.coverage_gaps]


def test_the_gate_can_be_reported_without_failing() -> None:
    report = run_conformance(
        "impls.memory:open_store",
        backend="memory",
        suites=("commit",),
        seed=7,
        faults=["-M-COMMIT-03"],
        database_dir=None,
        failure_dir=None,
        coverage_gate=False,
    )
    (result,) = report.results
    assert result.verdict is Verdict.PASS
    assert [gap.target for gap in result.coverage_gaps] == ["crash-at:M-COMMIT-03"]
    assert report.exit_code == 0
