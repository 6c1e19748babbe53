"""The one-line pytest entry point for backend authors (conformance.testing.StoreConformance)."""

from __future__ import annotations

import pytest

PASSING = """
from conformance.testing import StoreConformance
from impls.memory import open_store

class TestMemoryStore(StoreConformance):
    store_factory = staticmethod(open_store)
"""

FAILING = """
from conformance.testing import StoreConformance

class TestBrokenStore(StoreConformance):
    store_factory = "examples.broken_stores:history_without_authorization"
"""


@pytest.fixture(autouse=True)
def backend_authors_ini(pytester: pytest.Pytester) -> None:
    """The inner run gets the configuration a backend author's project would have (pytest-asyncio
    asks for its fixture loop scope to be set)."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_the_plugin_adds_its_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--help")
    result.stdout.fnmatch_lines(["*--ratchet-profile*", "*--ratchet-examples*", "*--ratchet-seed*"])


def test_a_correct_store_passes_both_suites(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_SEED", "5")
    pytester.makepyfile(test_mystore=PASSING)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=2)


def test_a_broken_store_fails_naming_the_rule(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken=FAILING)
    result = pytester.runpytest_inprocess(
        "--ratchet-seed", "0", "-k", "store_suite", "-vv"
    )  # -vv: untruncated; seed 0 finds and shrinks C-PRE-05 in 1.2 CPU-s, seed 5 took 11.8
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*C-PRE-05*", "*shrunk program*", "*conformance replay*"])
    # The `-r` summary line is the rule and its message, not the first line of the table.
    (short,) = [line for line in result.stdout.lines if line.startswith("FAILED ")]
    assert " - Failed: TestBrokenStore/store: C-PRE-05: " in short, short
    assert "backend  suite" not in short
