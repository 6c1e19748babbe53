"""A store's documented endpoint options are judged at their edges on a wire (C-ERR-04): the planted
store of examples/config_stores.py, which never reads ``replication_factor``, is caught by the
store suite's opening, and the shipped CQL store passes the same walk."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import Verdict, run_conformance
from conformance.wire._routes import ENDPOINT_OPTIONS
from examples.config_stores import CONFIG_STORES


def test_the_cql_options_are_the_documented_ones() -> None:
    (option,) = ENDPOINT_OPTIONS["cassandra"]
    assert option.name == "replication_factor"
    assert "0" in option.refused and option.accepted == ("1",)


@pytest.mark.service("cassandra")
@pytest.mark.parametrize("factory", sorted(CONFIG_STORES))
def test_a_store_ignoring_its_endpoint_option_is_caught(factory: str, tmp_path: Path) -> None:
    service, rule_id = CONFIG_STORES[factory]
    report = run_conformance(
        f"examples.config_stores:{factory}",
        backend=factory,
        suites=("store",),
        seed=20261130,
        examples=2,
        service=service,
        failure_dir=tmp_path,
        database_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    assert [step.rule for step in result.failure.program] == ["endpoint_walk"], report.details()


@pytest.mark.service("cassandra")
def test_the_shipped_cql_store_passes_the_endpoint_walk(tmp_path: Path) -> None:
    report = run_conformance(
        "impls.cql:open_cql_store",
        backend="cql",
        suites=("store",),
        seed=20261130,
        examples=2,
        service="cassandra",
        failure_dir=tmp_path,
        database_dir=None,
    )
    (result,) = report.results
    assert result.verdict is not Verdict.VIOLATION, report.details()
    assert "endpoint-options-judged" in result.stats.reached, report.details()
