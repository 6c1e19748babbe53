"""The rule catalogue, the contract document and the tests agree."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from model.saga import RULES

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "saga-contract.md"
MODEL_DIR = ROOT / "model" / "saga"
TEST_DIR = Path(__file__).resolve().parent
RULE_ID = r"S-[A-Z]+-\d\d"


def traceability_rows() -> list[list[str]]:
    table = DOC.read_text(encoding="utf-8").split("## 7. Traceability", 1)[1]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if re.match(rf"\| {RULE_ID} \|", line)]
    return [[cell.strip() for cell in row] for row in rows]


def test_rule_ids_are_the_same_everywhere() -> None:
    ids = list(RULES)
    assert len(ids) == len(set(ids))
    stated = re.findall(rf"^- \*\*({RULE_ID})\*\*", DOC.read_text(encoding="utf-8"), re.M)
    table = [row[0] for row in traceability_rows()]
    assert stated == ids
    assert table == ids


def test_every_rule_is_cited_by_model_code() -> None:
    sources = "".join(
        p.read_text(encoding="utf-8")
        for p in MODEL_DIR.glob("_*.py")
        if p.name not in ("_rules.py", "__init__.py")
    )
    expanded = set(re.findall(RULE_ID, sources))
    for prefix, low, high in re.findall(r"(S-[A-Z]+)-(\d\d)\.\.(\d\d)", sources):
        expanded |= {f"{prefix}-{n:02d}" for n in range(int(low), int(high) + 1)}
    missing = [rule for rule in RULES if rule not in expanded]
    assert not missing


def test_traceability_references_resolve() -> None:
    defined = {
        match
        for path in TEST_DIR.glob("test_*.py")
        for match in re.findall(r"^(?:def )?(test_\w+)", path.read_text(encoding="utf-8"), re.M)
    }
    for rule, model_cell, test_cell, harness_cell in traceability_rows():
        for ref in re.findall(r"`([^`]+)`", model_cell):
            module_name, _, attribute_path = ref.partition(":")
            target: object = importlib.import_module(f"model.saga.{module_name}")
            for attribute in attribute_path.split("."):
                target = getattr(target, attribute)
        tests = re.findall(r"`([^`]+)`", test_cell)
        assert tests, rule
        for ref in tests:
            file_name, _, test_name = ref.partition("::")
            assert (TEST_DIR / f"{file_name}.py").exists(), ref
            assert test_name in defined, ref
        assert harness_cell, rule
