"""docs/where-things-live.md names only paths that exist, so the page stays true."""

from __future__ import annotations

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
