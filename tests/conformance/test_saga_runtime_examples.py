"""The saga suite catches every shipped runtime whose metrics lie (examples/broken_saga_runtimes.py)
within the ci profile, names the S-OBS rule it broke, shrinks the program to a few steps, and its
failure file replays to the same violation, from Python and from ``conformance replay``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from conformance.cli import main
from examples.broken_saga_runtimes import BROKEN_SAGA_RUNTIMES
from tests._planted import planted_options

# Fixed seeds whose search and shrink take few examples.
SEEDS = {"retry_counted_twice": 1, "labels_by_tenant": 1, "stage_per_unit": 0}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    """Runs the saga suite on a broken runtime once per module; the tests read facets of that run."""
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            path = f"examples.broken_saga_runtimes:{factory}"
            backend = BackendUnderTest(factory, "saga", {"runtime": path})
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures)
            reports[factory] = run_matrix([(backend, suite_named("saga"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_SAGA_RUNTIMES.items()))
def test_broken_saga_runtime_is_caught_and_replays(
    factory: str, rule_id: str, run_broken: RunBroken, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
    assert result.failure.at == "quiescence"
    assert report.exit_code == 1

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.rule_id == rule_id
    assert saved.factories == {"runtime": f"examples.broken_saga_runtimes:{factory}"}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert main(["replay", str(path), "--trust", "examples.broken_saga_runtimes"]) == 1
    assert f"reproduced {rule_id} at quiescence" in capsys.readouterr().out


def test_a_backend_whose_database_refuses_some_commits_passes() -> None:
    """The correct runtime on a database that refuses every third COMMIT (as contention does): it
    runs each refused unit again under the same fate, and the ledger counts every attempt it ran
    at the storage port, so no metric, outcome or row differs (S-OBS-02, S-OBS-03, S-TX-01)."""
    report = run_conformance(
        "examples.contended_saga_backend:contended",
        suites=("saga",),
        seed=6,
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.PASS, report.details()
