"""The commit contract's rule IDs agree everywhere, and its traceability table points at real things.

docs/commit-contract.md states each rule (``- **C-...**``) and maps it to the model, the model's
tests and the harness; ``model.commit.RULES`` holds the same IDs and statements. A renamed
function or test, or a rule added in one place only, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import model.commit

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "commit-contract.md"
MODEL_DIR = ROOT / "model" / "commit"
TEST_DIR = Path(__file__).resolve().parent
RULE_ID = r"C-(?:PRE|POST|ERR)-\d\d"


def _table() -> list[list[str]]:
    rows = [line.split("|")[1:-1] for line in DOC.read_text(encoding="utf-8").splitlines()]
    return [[cell.strip() for cell in row] for row in rows if row and re.fullmatch(RULE_ID, row[0].strip())]


_DEFINITION = re.compile(r"^\s*(?:async def|def|class)\s+(\w+)|^\s*(\w+)\s*[:=]", re.M)


def _defined(directory: Path, pattern: str) -> set[str]:
    """Functions, classes and assigned names (enum members included) of the matching files."""
    found: set[str] = set()
    for path in directory.glob(pattern):
        for function_or_class, assigned in _DEFINITION.findall(path.read_text("utf-8")):
            found.add(function_or_class or assigned)
    return found


def test_rule_ids_are_the_same_everywhere() -> None:
    text = DOC.read_text(encoding="utf-8")
    stated = re.findall(rf"^- \*\*({RULE_ID})\*\* (.*?)(?=\n- \*\*|\n\n|\n#)", text, re.S | re.M)
    table = [row[0] for row in _table()]
    assert len({rule for rule, _ in stated}) == len(stated) == 26
    assert [rule for rule, _ in stated] == list(model.commit.RULES) == table
    for rule, statement in stated:
        assert " ".join(statement.split()) == model.commit.RULES[rule], rule


def test_model_references_resolve() -> None:
    names = _defined(MODEL_DIR, "*.py")
    for rule, model_cell, _tests, _harness in _table():
        for ref in re.findall(r"`([^`]+)`", model_cell):
            for part in ref.split("."):
                assert part in names, f"{rule}: {ref} names nothing in model/commit"


def test_model_tests_resolve_and_every_rule_has_a_harness_check() -> None:
    rule_tests = _defined(TEST_DIR, "test_rules.py")
    machine = (TEST_DIR / "test_store_machine.py").read_text("utf-8")
    for rule, _model, test_cell, harness_cell in _table():
        assert harness_cell and harness_cell != "—", rule
        for part in test_cell.split(";"):
            part = part.strip()
            refs = re.findall(r"`([^`(]+)[^`]*`", part.split("(")[0])
            if part.startswith("R "):
                for ref in refs:
                    assert ref in rule_tests, f"{rule}: {ref} is not a test in test_rules.py"
            elif part.startswith("M "):
                for ref in refs:
                    assert re.search(rf"\b{re.escape(ref)}\b", machine), f"{rule}: {ref} not in the machine"
