"""The saga-durability failure of ``make test`` at seed 20261130 (stop 29), replayed: two transient
failures spend p0's budget of two, the dead letter's acknowledgement is lost, p0 is reopened, and at
quiescence the copy is delivered again. Ratchet's runtime kept its dead letters in the participant
object, so the reopened one ran the command (S-PART-02: model ``DuplicateCommand``, runtime
``CommandProcessed``). The dead letter is now claimed in the inbox (docs/saga-contract.md, "a dead
letter is durable"); the replay runs every step and the quiescence checks without a violation.
"""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import Step

TRANSIENT = {"decision": "transient_failure", "index": 7, "relay": "ok"}
PROGRAM = (
    Step("first_start", {"key": 0}),
    Step("deliver_command", {**TRANSIENT, "ack_lost": False, "fate": "rolled_back"}),
    Step("deliver_command", {**TRANSIENT, "ack_lost": True, "fate": "committed"}),
    Step("reopen", {"which": "p0"}),
)

FACTORIES = {
    "postgres": ("impls.sql:open_postgres_saga_backend", "conformance.crash:postgres_control"),
    "mysql": ("impls.sql:open_mysql_saga_backend", "conformance.crash:mariadb_control"),
}


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("postgres", marks=pytest.mark.service("postgres")),
        pytest.param("mysql", marks=pytest.mark.service("mariadb")),
    ],
)
def test_a_dead_lettered_command_met_again_after_a_reopen_is_a_duplicate(backend: str) -> None:
    store, control = FACTORIES[backend]
    failure = FailureFile(
        suite="saga-durability",
        backend=backend,
        factories={"backend": store, "control": control},
        seed=20261130,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id="S-PART-02",
        message="a dead-lettered command ran after its participant was reopened",
        context={},
        program=PROGRAM,
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(PROGRAM) + 1  # every step and the quiescence checks
