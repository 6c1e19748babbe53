"""The ``mutation`` profile (``make mutation``, docs/sensitivity.md): one verdict per run, fast.

A broken store is caught as in the ci profile, but the program is left as Hypothesis found it (no
shrink phase, no minimizing pass) and the suites after the failed one are not run.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import Phase

from conformance import Verdict, run_conformance
from conformance._settings import PROFILES, hypothesis_settings
from conformance.cli import PROFILE_NAMES

SEED = 20_261_130


def test_the_cli_offers_every_profile() -> None:
    assert set(PROFILE_NAMES) == set(PROFILES)


def test_the_mutation_profile_does_not_shrink() -> None:
    settings = hypothesis_settings("mutation", database_dir=None)
    assert Phase.shrink not in settings.phases
    assert Phase.shrink in hypothesis_settings("ci", database_dir=None).phases


def test_a_violation_stops_the_run_and_the_later_suites_are_not_run(tmp_path: Path) -> None:
    report = run_conformance(
        "examples.broken_stores:repeat_consumes_sequence",
        backend="repeat_consumes_sequence",
        suites=("store", "commit"),
        profile="mutation",
        seed=SEED,
        failure_dir=tmp_path,
        database_dir=None,
    )
    store, commit = report.results
    assert store.verdict is Verdict.VIOLATION, report.details()
    assert store.failure is not None and store.failure.rule_id == "C-POST-01"
    assert commit.verdict is Verdict.NOT_RUN
    assert report.exit_code == 1
