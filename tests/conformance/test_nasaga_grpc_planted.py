"""The transport suite on nasaga's gRPC transport catches a planted listener bug
(examples/broken_nasaga_grpc.py) with its rule, and its program shrinks to a few steps."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from conformance import Verdict, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_nasaga_grpc import BROKEN_NASAGA_GRPC
from tests._planted import planted_options
from tests.impls.test_nasaga_findings import _need_host_binary

# nasaga_schemas: tests/conftest.py, OWN_SCHEMAS_MARK
pytestmark = [pytest.mark.service("postgres"), pytest.mark.nasaga_schemas]


@pytest.mark.parametrize("factory", sorted(BROKEN_NASAGA_GRPC))
def test_a_planted_nasaga_listener_bug_is_caught(factory: str, tmp_path: Path) -> None:
    _need_host_binary()
    roles = {"target": f"examples.broken_nasaga_grpc:{factory}"}
    backend = BackendUnderTest(f"nasaga-grpc:{factory}", "transport", roles, "postgres")
    # Met at the first quiescence after one step, which Hypothesis's shrink already leaves alone:
    # no minimize pass (each replay is a whole example on the real engine).
    planted = planted_options(1, tmp_path, examples=1, steps=5)
    options = attrs.evolve(planted, shrink_budget_s=5.0, minimize=False)
    report = run_matrix([(backend, suite_named("transport"))], options)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == BROKEN_NASAGA_GRPC[factory], report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
