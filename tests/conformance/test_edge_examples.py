"""Issue 15's checks each catch their planted store (examples/edge_stores.py) with the right rule,
a short program and a failure file that replays; the shipped store the example changed does not
reproduce. Seeds and example counts are small and fixed, so each case costs a few seconds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance
from examples.edge_stores import EDGE_STORES
from tests._planted import PLANTED_SHRINK_S

# factory -> (seed, examples, the shipped store the example is a change of); six steps an example
# keep the shrinking short
RUNS = {
    "leaks_script_text": (5, 60, "impls.redis:open_fakeredis_store"),
    "noop_readiness": (3, 60, "impls.redis:open_redis_store"),
    "reply_in_32_bits": (2, 60, "impls.memory:open_store"),
    "seq_read_unguarded": (1, 60, "impls.redis:open_fakeredis_store"),
}
STEPS = 6

RunEdge = Callable[[str], Report]


def _cases() -> list[object]:
    return [
        pytest.param(
            factory, rule_id, id=factory, marks=[pytest.mark.service(service)] if service is not None else []
        )
        for factory, (service, _, rule_id) in sorted(EDGE_STORES.items())
    ]


@pytest.fixture(scope="module")
def run_edge(tmp_path_factory: pytest.TempPathFactory) -> RunEdge:
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            service, suite, _ = EDGE_STORES[factory]
            seed, examples, _ = RUNS[factory]
            reports[factory] = run_conformance(
                f"examples.edge_stores:{factory}",
                backend=factory,
                suites=(suite,),
                seed=seed,
                examples=examples,
                steps=STEPS,
                service=service,
                failure_dir=tmp_path_factory.mktemp(factory),
                database_dir=None,
                shrink_budget_s=PLANTED_SHRINK_S,
            )
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), _cases())
def test_an_edge_bug_is_caught_with_its_rule_and_replays(
    factory: str, rule_id: str, run_edge: RunEdge
) -> None:
    report = run_edge(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 8, report.details()
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    shipped = replay(saved, overrides={"store": RUNS[factory][2]})
    assert not shipped.reproduced, shipped.describe()


@pytest.mark.parametrize("factory", ["impls.memory:open_store", "impls.redis:open_fakeredis_store"])
def test_every_shipped_store_offers_the_inspector_and_declares_its_internals(factory: str) -> None:
    """The ports the new checks use (impls.api.StoreInspector, DeclaresInternals); the CQL and
    Redis stores share their classes with these (impls/cql/_inspect.py, impls/redis/_inspect.py)."""
    import asyncio
    import importlib

    from impls.api import DeclaresInternals, InMemoryMembership, StoreInspector
    from impls.cql import CqlMessageStore

    module, name = factory.split(":")

    async def opened() -> object:
        store = await getattr(importlib.import_module(module), name)("rtinspect1", InMemoryMembership())
        await store.close()
        return store

    store = asyncio.run(opened())
    assert isinstance(store, StoreInspector) and isinstance(store, DeclaresInternals)
    assert store.internal_text
    assert hasattr(CqlMessageStore, "read_raw") and hasattr(CqlMessageStore, "write_raw")
    assert "ledger" in CqlMessageStore.internal_text


def test_a_custom_committer_is_held_against_the_contract_and_replays(
    tmp_path: pytest.TempPathFactory,
) -> None:
    """``--committer`` / ``committer_factory``: the commit suite drives the given committer; a
    committer that drops its quota is caught (C-PRE-08) and its failure file replays (with the
    committer's module trusted), and not with the shipped committer."""
    from examples.broken_committers import BROKEN_COMMITTERS

    report = run_conformance(
        "impls.memory:open_store",
        backend="memory",
        suites=("commit",),
        seed=2,  # catches it within 35 examples (seed 1 no longer does since the directed walks)
        examples=60,
        steps=8,
        committer_factory="examples.broken_committers:ignores_quota",
        failure_dir=str(tmp_path),
        database_dir=None,
    )
    (result,) = report.results
    assert result.failure is not None and result.failure.rule_id == BROKEN_COMMITTERS["ignores_quota"]
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    assert saved.factories["committer"] == "examples.broken_committers:ignores_quota"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    shipped = replay(saved, overrides={"committer": "impls.commit:MessageCommitter"})
    assert not shipped.reproduced, shipped.describe()
