"""scripts/mutation.py's arithmetic and sampling, without running a mutant."""

from __future__ import annotations

import tomllib
from types import ModuleType

from tests.scripts._load import ROOT, script


def load() -> ModuleType:
    return script("mutation")


def test_wilson_interval_matches_the_textbook_values() -> None:
    mutation = load()
    low, high = mutation.wilson(90, 100)
    assert round(low, 3) == 0.826 and round(high, 3) == 0.945
    assert mutation.wilson(0, 0) == (0.0, 1.0)
    low, high = mutation.wilson(50, 50)
    assert high == 1.0 and round(low, 3) == 0.929


def test_every_package_names_modules_that_exist_and_a_sample() -> None:
    mutation = load()
    with open(ROOT / "pyproject.toml", "rb") as handle:
        packages = tomllib.load(handle)["tool"]["ratchet"]["mutation"]["packages"]
    assert set(packages) == {"memory", "commit", "redis", "cql", "saga", "sql"}
    for name, spec in packages.items():
        modules = mutation.modules_of(spec, ROOT)
        assert modules and all((ROOT / m).is_file() for m in modules), name
        assert spec["sample"] >= (50 if name == "cql" else 100), name
        assert all("--suite" in run.split() for run in spec["runs"]), name
