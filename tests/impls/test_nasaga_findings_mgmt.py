"""Reproductions of the nasaga findings N-21 onward (docs/nasaga-findings.md): resolution budgets,
management recovery actions and the business query API, as nasaga does them today.

Same rules as ``test_nasaga_findings.py`` (whose fixtures and drivers this module reuses): each
test asserts nasaga's actual behaviour exactly, so a release that changes it fails here and the
finding's decision is revisited, never the assertion loosened.
"""

from __future__ import annotations

from typing import Any

import pytest

from impls.nasaga import NasagaHost
from tests.impls import test_nasaga_findings as base
from tests.impls.test_nasaga_findings import (
    NOW,
    RESOLVE_FIRST,
    TENANT,
    World,
    _answer,
    _commands,
    _instance,
    _manage,
    _refused,
    _start,
    _transitions,
)

host = base.host  # the fixtures of the first module: one PostgreSQL host, one namespace per test
world = base.world

# nasaga_schemas: tests/conftest.py, OWN_SCHEMAS_MARK
pytestmark = [pytest.mark.service("postgres"), pytest.mark.nasaga_schemas]


def _unknown_until_manual(host: NasagaHost, ns: str, saga_id: str, polls: int) -> list[str | None]:
    """Answers the execute and then ``polls`` resolves ``unknown``; the statuses after each."""
    statuses = [_answer(host, ns, saga_id, "p0", "unknown", NOW + 1)]
    for poll in range(polls):
        statuses.append(_answer(host, ns, saga_id, "p0", "unknown", NOW + 2 + poll))
    return statuses


def test_n21_the_resolve_budget_is_a_count_of_polls_per_orchestrator(host: NasagaHost, world: World) -> None:
    """N-21: an unresolved effect is polled until ``resolve_max_attempts`` (orchestrator config,
    default 10) resolves said unknown, then manual intervention; the step's ``budget_ms`` is a
    timer, not a count. With the budget at 2 nasaga stops where the model's ``resolve_budget = 2``
    stops; a retried resolution is polled once and, still unknown, goes back to manual."""
    ns = world(RESOLVE_FIRST, config={"resolve_max_attempts": 2, "enable_manual_close": True})
    _start(host, ns, "s1")
    assert _unknown_until_manual(host, ns, "s1", 2) == [
        "WAITING_RESOLUTION",
        "WAITING_RESOLUTION",
        "MANUAL_INTERVENTION",
    ]
    assert _commands(host, ns, "s1") == [
        ("reserve", "execute", 1),
        ("reserve", "resolve", 1),
        ("reserve", "resolve", 2),
    ]
    assert _instance(host, ns, "s1").failure_code == "resolve_attempts_exhausted"
    retried = _manage(host, ns, "retry_resolution", "s1", "retry-1", now_ms=NOW + 10)
    assert retried == {"action": "retry_resolution", "status": "WAITING_RESOLUTION"}
    assert _commands(host, ns, "s1")[-1] == ("reserve", "resolve", 3)
    assert _answer(host, ns, "s1", "p0", "unknown", NOW + 11) == "MANUAL_INTERVENTION"
    assert _commands(host, ns, "s1")[-1] == ("reserve", "resolve", 3)  # no fourth poll

    default = world(RESOLVE_FIRST)  # resolve_max_attempts = 10: a third poll within the budget
    _start(host, default, "s2")
    assert _unknown_until_manual(host, default, "s2", 2)[-1] == "WAITING_RESOLUTION"
    assert _commands(host, default, "s2")[-1] == ("reserve", "resolve", 3)


def _ops(trail: dict[str, Any]) -> list[tuple[str, str]]:
    return [(o["action"], o["operation_id"]) for o in trail["management_operations"]]


def test_n21_a_retried_resolution_that_succeeds_completes_the_saga(host: NasagaHost, world: World) -> None:
    """N-21 (continued): retry_resolution from manual intervention issues the next resolve poll
    (attempt 3, one past the highest), audited once; a replay of the operation issues nothing."""
    ns = world(RESOLVE_FIRST, config={"resolve_max_attempts": 2})
    _start(host, ns, "s1")
    _unknown_until_manual(host, ns, "s1", 2)
    _manage(host, ns, "retry_resolution", "s1", "retry-1", now_ms=NOW + 10)
    again = _manage(host, ns, "retry_resolution", "s1", "retry-1", now_ms=NOW + 11)
    assert again == {"action": "retry_resolution", "status": "WAITING_RESOLUTION"}
    assert [c for c in _commands(host, ns, "s1") if c[1] == "resolve"] == [
        ("reserve", "resolve", 1),
        ("reserve", "resolve", 2),
        ("reserve", "resolve", 3),
    ]
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 12) == "RUNNING"
    trail = host.call("load_audit_trail", namespace=ns, tenant=TENANT, saga_id="s1")
    assert _ops(trail) == [("retry_resolution", "retry-1")]
    assert ("MANUAL_INTERVENTION", "WAITING_RESOLUTION") in _transitions(host, ns, "s1")
    stale = _refused(lambda: _manage(host, ns, "pause", "s1", "pause-1", expect={"state_version": 0}))
    assert stale.code == "concurrency.stale_snapshot"


def test_n22_control_and_recovery_operations_are_two_ledgers(host: NasagaHost, world: World) -> None:
    """N-22: an operation id bound to a pause is unbound for a retry of the same saga (and back);
    within each family a reused id still replays or conflicts."""
    ns = world(RESOLVE_FIRST, config={"resolve_max_attempts": 2, "enable_manual_close": True})
    _start(host, ns, "s1")
    _unknown_until_manual(host, ns, "s1", 2)
    who = {"actor": "ops-1", "reason": "operator"}
    assert _manage(host, ns, "pause", "s1", "op-1", **who)["action"] == "pause"
    assert _manage(host, ns, "resume", "s1", "op-2", **who)["action"] == "resume"
    retried = _manage(host, ns, "retry_resolution", "s1", "op-1", now_ms=NOW + 10, **who)
    assert retried == {"action": "retry_resolution", "status": "WAITING_RESOLUTION"}
    reused = _refused(lambda: _manage(host, ns, "resume", "s1", "op-1", **who))
    assert reused.code == "backend.conflict"  # op-1 is a pause in the control ledger
    closed = _refused(lambda: _manage(host, ns, "manual_close", "s1", "op-1", now_ms=NOW + 11, **who))
    assert closed.code == "backend.conflict"  # op-1 is a retry in the recovery ledger
    assert "management operation id was reused" in closed.message
    trail = host.call("load_audit_trail", namespace=ns, tenant=TENANT, saga_id="s1")
    assert [(c["to"], c["operation_id"]) for c in trail["controls"]] == [
        ("PAUSED", "op-1"),
        ("ACTIVE", "op-2"),
    ]
    assert _ops(trail) == [("retry_resolution", "op-1")]


def test_n09_a_retried_halted_compensation_is_reopened_and_runs_again(host: NasagaHost, world: World) -> None:
    """N-09 (continued): a compensation answered ``halted`` (nasaga's refusal; it has no rejected
    one) awaits manual intervention; ``retry_compensation`` issues attempt 2 under the operation
    and reopens the participant's halted gate, so the handler runs again (the model's gate would
    replay the refusal, S-PART-03: the reopening is out of scope, the suite answers a reopened
    compensation as the model's gate replays it). A second halted answer hands it back to the
    operator; a succeeded one compensates."""
    ns = world()
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "rejected", NOW + 2) == "COMPENSATING"
    assert _answer(host, ns, "s1", "p0", "halted", NOW + 3) == "MANUAL_INTERVENTION"
    retried = _manage(host, ns, "retry_compensation", "s1", "retry-1", now_ms=NOW + 4)
    assert retried == {"action": "retry_compensation", "status": "COMPENSATING"}
    assert _commands(host, ns, "s1")[-1] == ("reserve", "compensate", 2)
    reopened = base._last(host, ns, "orchestrator", "s1")
    assert reopened.envelope.get("recovery_operation_id") == "retry-1"
    delivered = host.deliver_command(ns, "p0", reopened.envelope, "halted")
    assert (delivered.handled, delivered.status, delivered.handler_calls) == ("executed", "HALTED", 1)
    result = base._last(host, ns, "p0", "s1")
    assert host.deliver_result(ns, result.envelope, now_ms=NOW + 5).status == "MANUAL_INTERVENTION"
    _manage(host, ns, "retry_compensation", "s1", "retry-2", now_ms=NOW + 6)
    assert _commands(host, ns, "s1")[-1] == ("reserve", "compensate", 3)
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 7) == "COMPENSATED"
    trail = host.call("load_audit_trail", namespace=ns, tenant=TENANT, saga_id="s1")
    # nasaga audits the action as ``retry_frozen_compensation`` (``rt/orchestrator.rs:2016``).
    assert _ops(trail) == [("retry_frozen_compensation", "retry-1"), ("retry_frozen_compensation", "retry-2")]
