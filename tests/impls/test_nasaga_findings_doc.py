"""docs/nasaga-findings.md stays consistent: every finding in the summary has its section and a
replay that exists, and every saga rule ID it cites is a rule of the contract."""

from __future__ import annotations

import re
from pathlib import Path

from model.saga import RULES

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "nasaga-findings.md").read_text(encoding="utf-8")
#: The replays: ``test_nasaga_findings.py`` and its continuations ``test_nasaga_findings_*.py``.
TESTS = "\n".join(
    path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "tests" / "impls").glob("test_nasaga_findings*.py"))
)


def test_every_finding_has_a_section_a_decision_and_a_replay() -> None:
    rows = re.findall(r"^\| (N-\d\d) \| (.+?) \| (.+?) \| (.+?) \|$", DOC, re.M)
    assert len(rows) >= 16
    for finding, _title, decision, replay in rows:
        assert re.search(rf"^## {finding} — ", DOC, re.M), f"{finding} has no section"
        assert decision.strip(), f"{finding} has no decision"
        named = re.findall(r"`(test_\w+)", replay)
        for test in named:
            assert f"def {test}" in TESTS, f"{finding}: {test} is in no test_nasaga_findings*.py"
        assert named or "saga suite" in replay, f"{finding} names no replay"


def test_cited_rule_ids_are_contract_rules() -> None:
    cited = set(re.findall(r"\bS-[A-Z]+-\d\d\b", DOC))
    assert cited
    assert cited <= set(RULES), sorted(cited - set(RULES))
