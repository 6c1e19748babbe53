"""Dependencies point one way: conformance -> impls -> model (BRIEF "Layout").

Computed from the source with ``ast``, every import counted, also those inside functions and
under ``TYPE_CHECKING``: an upward import is a defect however lazily it is made.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What each layer may import of ours.
ALLOWED = {"model": {"model"}, "impls": {"model", "impls"}, "conformance": {"model", "impls", "conformance"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_no_upward_import(layer: str) -> None:
    ours = set(ALLOWED)
    offences = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for name in sorted(_imports(path)):
            top = name.split(".")[0]
            if top in ours and top not in ALLOWED[layer]:
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offences, "upward imports:\n" + "\n".join(offences)
