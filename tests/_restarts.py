"""What the server-restart tests share: one directed example of the transport suite."""

from __future__ import annotations

from pathlib import Path

from conformance import Report, RunOptions, run_matrix
from conformance._report import SuiteResult
from conformance._suites import BackendUnderTest, suite_named


def one_restart_example(
    backend: BackendUnderTest, tmp_path: Path, seed: int = 20261130
) -> tuple[Report, SuiteResult]:
    """One example of one step under profile ``deep``: the opening's restart walk and nothing more
    (the coverage gate off: it asks for the walk's targets, not every rule's)."""
    options = RunOptions(
        profile="deep",
        seed=seed,
        examples=1,
        steps=1,
        failure_dir=tmp_path / "failures",
        database_dir=None,
        coverage_gate=False,
    )
    report = run_matrix([(backend, suite_named("transport"))], options)
    (result,) = report.results
    return report, result
