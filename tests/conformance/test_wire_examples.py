"""The wire faults catch what no fault above the seam can: the planted bugs of
examples/wire_stores.py pass every fault of today on the real server and are caught, with their
rule, a shrunk program and a replay, once the store is reached through the fault proxy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance
from examples.wire_stores import WIRE_STORES
from tests._planted import PLANTED_SHRINK_S

# Seeds whose search finds the bug within a few examples (any seed does within the ci profile).
SEEDS = {"resend_not_idempotent": 2, "cql_timeout_not_applied": 2}
SUITES = {"resend_not_idempotent": ("commit",), "cql_timeout_not_applied": ("commit",)}
#: The shipped store of each planted bug's service, which must not reproduce its failure file.
SHIPPED = {
    "resend_not_idempotent": "impls.redis:open_redis_store",
    "cql_timeout_not_applied": "impls.cql:open_cql_store",
}

RunBroken = Callable[[str, bool], Report]


def _cases() -> list[object]:
    return [
        pytest.param(factory, service, rule_id, id=factory, marks=pytest.mark.service(service))
        for factory, (service, rule_id) in sorted(WIRE_STORES.items())
    ]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    reports: dict[tuple[str, bool], Report] = {}

    def run(factory: str, wire: bool) -> Report:
        if (factory, wire) not in reports:
            service = WIRE_STORES[factory][0]
            reports[factory, wire] = run_conformance(
                f"examples.wire_stores:{factory}",
                backend=factory,
                suites=SUITES[factory],
                seed=SEEDS[factory],
                examples=150 if wire else 20,
                service=service if wire else None,
                failure_dir=tmp_path_factory.mktemp(factory),
                database_dir=None,
                shrink_budget_s=PLANTED_SHRINK_S,
            )
        return reports[factory, wire]

    return run


@pytest.mark.parametrize(("factory", "service", "rule_id"), _cases())
def test_a_wire_bug_is_caught_through_the_proxy_and_replays(
    factory: str, service: str, rule_id: str, run_broken: RunBroken
) -> None:
    report = run_broken(factory, True)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
    assert any(step.rule in ("arm_wire_fault", "stalled_send") for step in result.failure.program)
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    assert saved.service == service
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()


@pytest.mark.parametrize(("factory", "service", "rule_id"), _cases())
def test_a_wire_bug_passes_every_fault_above_the_seam(
    factory: str, service: str, rule_id: str, run_broken: RunBroken
) -> None:
    """Without the proxy the same store passes (the wire kinds are then not applicable)."""
    report = run_broken(factory, False)
    (result,) = report.results
    assert result.verdict is not Verdict.VIOLATION, report.details()
    assert "wire-reply-lost" in result.stats.details["not-applicable"]


@pytest.mark.parametrize(("factory", "service", "rule_id"), _cases())
def test_the_shipped_store_does_not_reproduce(
    factory: str, service: str, rule_id: str, run_broken: RunBroken
) -> None:
    """The same program on the shipped store (same service, same proxy) passes: the planted line is
    the bug, not the fault (the CQL store settles a timed-out batch by its reserve token)."""
    failure = run_broken(factory, True).results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(FailureFile.read(failure.failure_file), overrides={"store": SHIPPED[factory]})
    assert not result.reproduced, result.describe()
