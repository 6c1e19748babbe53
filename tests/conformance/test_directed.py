"""The directed rules reach what they are there for (docs/ci-gate.md, "A gate that does not hang on
the seed"): a few examples suffice, where random programs needed luck."""

from __future__ import annotations

import pytest

from conformance import run_conformance

COMMIT_WALK = {
    "step:fault_walk",
    "crash-at:M-COMMIT-01",
    "crash-at:M-COMMIT-02",
    "crash-at:M-COMMIT-03",
    "crash-at:M-COMMIT-04",
    "outbox-entry-reused-after:M-COMMIT-04",
    "outbox-entry-reused-after:outbox-ack-lost",
    "fault:outbox-failed",
}
SAGA_WALK = {
    "step:route_walk",
    "select-one:AmbiguousRoute",
    "route-retry-converged",
    "renew:StaleGeneration",
    "publish:DefinitionConflict",
    "publish:InvalidDefinition",
}


def _reached(store: str, suite: str) -> set[str]:
    report = run_conformance(
        store,
        backend="memory",
        suites=(suite,),
        examples=12,
        seed=3,
        database_dir=None,
        failure_dir=None,
        coverage_gate=False,
    )
    (result,) = report.results
    assert result.verdict.value == "pass", report.details()
    return result.stats.reached


def test_the_commit_fault_walk_reaches_every_crash_point_and_outbox_reuse() -> None:
    assert _reached("impls.memory:open_store", "commit") >= COMMIT_WALK


def test_the_saga_route_walk_reaches_the_rare_route_outcomes() -> None:
    assert _reached("impls.saga.memory:open_memory_saga_backend", "saga") >= SAGA_WALK


def test_the_saga_reorder_walk_delivers_out_of_order() -> None:
    assert _reached("impls.saga.memory:open_memory_saga_backend", "saga") >= {
        "step:reorder_walk",
        "fault:reorder",
    }


#: What the opening on a wire reaches in every example (conformance/commit/_wire_rules.py).
WIRE_OPENING = (
    "fault:wire-reply-lost",
    "fault:wire-reset-before",
    "fault:wire-stall",
    "fault:partition",
    "fault:response-lost",
    "fault:failed-before",
    "rule:C-PRE-05",
    "rule:C-PRE-02",  # repeat_walk: a pending key's repeat (conformance/commit/_store_machine.py)
    "rule:C-PRE-09",  # and a committed key's
)


@pytest.mark.service("redis")
def test_the_wire_opening_reaches_every_wire_and_seam_fault_in_every_example() -> None:
    report = run_conformance(
        "impls.redis:open_redis_store",
        backend="redis",
        suites=("store",),
        examples=3,
        seed=3,
        service="redis",
        database_dir=None,
        failure_dir=None,
        coverage_gate=False,
    )
    (result,) = report.results
    assert result.verdict.value == "pass", report.details()
    opened = result.stats.reached_in["step:wire_walk"]
    assert opened >= 1
    assert {target: result.stats.reached_in[target] for target in WIRE_OPENING} == dict.fromkeys(
        WIRE_OPENING, opened
    )
    assert result.stats.reached_in["legacy-sequences-continued"] == opened


def test_the_stream_walk_dead_letters_a_command_and_rolls_one_back_each_time_it_runs() -> None:
    """``stream_walk`` fails a command the participant has not handled until its budget
    dead-letters it, and rolls back another's COMMIT (conformance/transport/_directed.py): the
    first genuine entry it held was often a duplicate, absorbed, and no dead letter followed."""
    from conformance._runner import RunOptions, run_suite
    from conformance._suites import FAMILIES, load_suites

    suite = load_suites()["transport"]
    options = RunOptions(examples=12, seed=11, database_dir=None, failure_dir=None, coverage_gate=False)
    result = run_suite(suite, FAMILIES["transport"].backends()["fakeredis"], options)
    assert result.verdict.value == "pass", result.error
    walked = result.stats.reached_in["step:stream_walk"]
    assert walked >= 1
    assert result.stats.reached_in["dead-letter:DeadLettered"] >= walked
    assert result.stats.reached_in["fault:commit-rolled-back"] >= walked
    assert result.stats.reached_in["busy-claim-took-nothing"] >= walked
