"""C-POST-12 catches each planted cleanup port (examples/cleanup_stores.py) with its rule, and the
failure file replays; the shipped fakeredis store the example changed does not reproduce. The check
draws nothing from Hypothesis, so the shipped store's run at the same seed passes with the same
examples."""

from __future__ import annotations

import pytest

from conformance import Verdict, replay, run_conformance
from examples.cleanup_stores import CLEANUP_STORES
from tests._planted import PLANTED_SHRINK_S, caught_and_replayed

SHIPPED = "impls.redis:open_fakeredis_store"


@pytest.mark.parametrize("factory", sorted(CLEANUP_STORES))
def test_a_broken_cleanup_port_is_caught_with_its_rule_and_replays(
    factory: str, tmp_path: pytest.TempPathFactory
) -> None:
    suite, rule_id = CLEANUP_STORES[factory]
    report = run_conformance(
        f"examples.cleanup_stores:{factory}",
        backend=factory,
        suites=(suite,),
        seed=1,
        examples=20,
        steps=6,
        failure_dir=str(tmp_path),
        database_dir=None,
        shrink_budget_s=PLANTED_SHRINK_S,
    )
    saved = caught_and_replayed(report, rule_id)
    (role,) = (role for role, path in saved.factories.items() if path.endswith(factory))
    original = "impls.saga.memory:open_memory_saga_backend" if suite == "saga" else SHIPPED
    shipped = replay(saved, overrides={role: original})
    assert not shipped.reproduced, shipped.describe()


def test_the_shipped_store_passes_the_same_run() -> None:
    report = run_conformance(
        SHIPPED, backend="fakeredis", suites=("store",), seed=1, examples=20, steps=6, database_dir=None
    )
    (result,) = report.results
    # 20 short examples do not reach every coverage target; what matters is no violation
    assert result.verdict in (Verdict.PASS, Verdict.COVERAGE) and result.failure is None, report.details()
    assert result.namespaces_dropped > 0
