"""docs/where-things-live.md names only paths that exist, so the page stays true."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "where-things-live.md"


def test_every_path_on_the_page_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    paths = {
        p
        for p in re.findall(r"`([\w./-]+)`", text)
        if "/" in p and "<" not in p and not p.startswith(("http", "-"))
    }
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/where-things-live.md names paths that do not exist: {missing}"


def _names_in(node: ast.AST) -> set[str]:
    """String constants of a list literal, also as a ``pytest.param("name", ...)``'s first argument."""
    found: set[str] = set()
    for element in getattr(node, "elts", ()):
        if isinstance(element, ast.Call) and element.args:
            element = element.args[0]
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            found.add(element.value)
    return found


def test_a_backend_is_listed_only_in_the_registry() -> None:
    """The page's promise for a new backend: no test and no make target spells out a family's list."""
    from conformance.backends import BACKEND_GROUPS, REGISTRIES

    families = {family: set(registry) for family, registry in REGISTRIES.items() if len(registry) > 2}
    hand_written = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.List, ast.Tuple)):
                names = _names_in(node)
                hand_written += [
                    f"{path.relative_to(ROOT)}:{node.lineno} ({f})" for f, b in families.items() if b <= names
                ]
    assert not hand_written, f"backend lists written by hand (use tests/_backends.py): {hand_written}"
    makefiles = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
    for path in makefiles:
        for value in re.findall(r"--backend[ =]([\w,-]+)", path.read_text(encoding="utf-8")):
            parts = value.split(",")
            assert len(parts) == 1 or all(p in BACKEND_GROUPS or p.startswith("-") for p in parts), (
                f"{path.name}: --backend {value} lists backends by hand; "
                f"name a group ({', '.join(BACKEND_GROUPS)})"
            )
