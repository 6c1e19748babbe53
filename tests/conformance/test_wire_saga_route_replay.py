"""A saga program on PostgreSQL through the fault proxy whose route registration met a lost COMMIT
answer at the COMMIT psycopg had just prepared (seed 1511222201, 100 ci examples, shrunk to 14
steps with two plain deliveries in place of the opening's walks). The proxy spent the fault on the
prepare round trip and reset the connection before COMMIT ran, so the model's "unknown, applied"
met a registration that never committed: S-ROUTE-03 (``fresh=True`` at the retry). With the
prepare told apart as housekeeping (conformance/wire/_protocols.py) the program passes."""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import Step
from conformance._violations import JsonValue

COMMITTED: dict[str, JsonValue] = {
    "decision": "succeed",
    "fate": "committed",
    "ack_lost": False,
    "relay": "ok",
}
PROGRAM = (
    Step("first_start", {"key": 0}),
    Step("forge_walk", {}),
    Step("manage_walk", {}),
    Step("deliver_command", {"index": 0, **COMMITTED}),
    Step("deliver_command", {"index": 0, **COMMITTED}),
    Step("select_routes", {"definition": "order", "read": "routes", "step_index": 0}),
    Step("renew_or_release", {"renew": False, "worker": "w1"}),
    Step("arm_wire_fault", {"kind": "wire-commit-reply-lost"}),
    Step("advance_clock", {"ms": 10}),
    Step(
        "deliver_result", {"ack_lost": False, "fate": "committed", "forge": "none", "index": 0, "relay": "ok"}
    ),
    Step("claim_timer", {"index": 0, "worker": "w1"}),
    Step("catalog", {"index": 0, "op": "republish"}),
    Step("arm_wire_fault", {"kind": "wire-commit-reply-lost"}),
    Step("route_walk", {}),
)


@pytest.mark.service("postgres")
def test_a_route_registration_whose_commit_answer_was_lost_converges_on_its_generation() -> None:
    failure = FailureFile(
        suite="saga",
        backend="postgres",
        factories={
            "backend": "impls.sql:open_postgres_saga_backend",
            "control": "conformance.crash:postgres_control",
        },
        seed=1511222201,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id="S-ROUTE-03",
        message="the runtime's outcome differs from the model's",
        context={},
        program=PROGRAM,
        service="postgres",
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(PROGRAM) + 1  # every step and the quiescence checks
