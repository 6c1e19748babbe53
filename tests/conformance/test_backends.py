"""Every shipped commit backend passes both suites, coverage gate included."""

from __future__ import annotations

import pytest

from conformance import Verdict, run_conformance
from conformance.backends import COMMIT_BACKENDS


def run(name: str, **options: object):  # type: ignore[no-untyped-def]
    spec = COMMIT_BACKENDS[name]
    return run_conformance(
        spec.store_factory,
        outbox_factory=spec.outbox_factory,
        backend=name,
        suites=("store", "commit"),
        seed=11,
        database_dir=None,
        failure_dir=None,
        **options,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "name",
    # memory runs both suites in test_pytest_plugin.py through the base class
    ["fakeredis", pytest.param("redis", marks=pytest.mark.service("redis"))],
)
def test_backend_passes_the_ci_profile(name: str) -> None:
    report = run(name)
    assert report.ok, report.details()
    assert all(r.verdict is Verdict.PASS and not r.coverage_gaps for r in report.results)


@pytest.mark.service("cassandra")
def test_cassandra_passes_a_short_run() -> None:
    """A shorter run than ci (the full one is `conformance run --backend cql`), gate reported only."""
    report = run("cql", examples=50, coverage_gate=False)
    assert report.ok, report.details()
