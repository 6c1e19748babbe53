"""Every harness cell of docs/commit-contract.md names a coverage target the suites really demand.

A cell names checks in backticks; a name is tied when it is a coverage target of the store or the
commit suite (``conformance/commit/suites.py``), or a rule whose ``step:<name>`` target is one.
Every rule row must name at least one tied check, and ``rule:<ID>`` must be demanded wherever the
suites list the rule. Targets are what the coverage gate requires, so the fixed-seed run of
``make conformance`` / ``make test`` reaches each of them or fails: a cell naming a check that
nothing demands, or a check that was renamed, fails here. When a fixed-seed report is present
(``reports/conformance-*.json``), the tied targets must also be reached in it on some backend.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conformance._machine import SuiteStats
from conformance.commit.suites import COMMIT_RULES, STORE_RULES, commit_targets, store_targets

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "commit-contract.md"
RULE_ID = r"C-(?:PRE|POST|ERR)-\d\d"


def _every_target() -> set[str]:
    targets: set[str] = set()
    for atomic in ("True", "False"):
        stats = SuiteStats()
        stats.details.update(
            atomic_publish_and_commit=atomic,
            wire="True",
            inspector="True",
            legacy_import="True",
            outbox_lists_entries="True",
            committer_defaults="True",
            drops_namespaces="True",
        )
        targets |= set(store_targets(stats)) | set(commit_targets(stats))
    return targets


def _cells() -> list[tuple[str, str]]:
    rows = [line.split("|")[1:-1] for line in DOC.read_text(encoding="utf-8").splitlines()]
    return [(r[0].strip(), r[-1].strip()) for r in rows if r and re.fullmatch(RULE_ID, r[0].strip())]


def _tied(cell: str, targets: set[str]) -> set[str]:
    names = set(re.findall(r"`([^`]+)`", cell))
    return {t for name in names for t in (name, f"step:{name}") if t in targets}


@pytest.mark.parametrize(("rule_id", "cell"), _cells(), ids=[r for r, _ in _cells()])
def test_each_harness_cell_names_a_demanded_target(rule_id: str, cell: str) -> None:
    targets = _every_target()
    tied = _tied(cell, targets) | ({f"rule:{rule_id}"} & targets)
    assert tied, f"{rule_id}: the harness cell names no coverage target of the commit suites: {cell}"


def test_the_rules_the_suites_list_are_targets() -> None:
    targets = _every_target()
    for rule_id in (*STORE_RULES, *COMMIT_RULES):
        assert f"rule:{rule_id}" in targets


# make test runs it after the conformance phases that write the reports (pytest-timing's phase).
@pytest.mark.after_suites
def test_tied_targets_were_reached_in_the_last_fixed_seed_run() -> None:
    results = []
    for path in sorted((ROOT / "reports").glob("conformance-*.json")):
        data = json.loads(path.read_text("utf-8"))
        results += [r for r in data.get("results", []) if r.get("suite") in ("store", "commit")]
    if not results:
        message = "no fixed-seed report under reports/ yet (make conformance writes one)"
        if os.environ.get("CI") == "true":  # make test runs this after the suites: a report is due
            pytest.fail(message)
        pytest.skip(message)
    reached = {t for r in results for t in (r.get("coverage") or {}).get("reached", [])}
    targets = _every_target()
    for rule_id, cell in _cells():
        tied = _tied(cell, targets) | ({f"rule:{rule_id}"} & targets)
        assert tied & reached, f"{rule_id}: none of {sorted(tied)} was reached in {len(results)} suite runs"
