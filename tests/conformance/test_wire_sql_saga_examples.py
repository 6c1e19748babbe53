"""The saga suite, through the fault proxy, catches a SQL saga backend that reports a lost COMMIT
answer as a rollback (examples/wire_sql_saga_backends.py); the shipped backend passes the same
program, since it reports OUTCOME_UNKNOWN and the suite settles it (S-TX-02)."""

from __future__ import annotations

import pytest

from conformance import FailureFile, Verdict, replay, run_conformance
from examples.wire_sql_saga_backends import WIRE_SQL_SAGA_BACKENDS
from tests._planted import PLANTED_SHRINK_S

SEED = 2  # finds the bug early on both engines (about 40 s each; seed 1 took minutes)
SHIPPED = {"postgres": "impls.sql:open_postgres_saga_backend", "mariadb": "impls.sql:open_mysql_saga_backend"}


def _cases() -> list[object]:
    return [
        pytest.param(factory, service, rule_id, id=factory, marks=pytest.mark.service(service))
        for factory, (service, rule_id) in sorted(WIRE_SQL_SAGA_BACKENDS.items())
    ]


@pytest.mark.parametrize(("factory", "service", "rule_id"), _cases())
def test_a_lost_commit_called_a_rollback_is_caught_on_the_wire(
    factory: str, service: str, rule_id: str, tmp_path: object
) -> None:
    report = run_conformance(
        f"examples.wire_sql_saga_backends:{factory}",
        backend=factory,
        suites=("saga",),
        seed=SEED,
        examples=150,
        service=service,
        failure_dir=str(tmp_path),
        database_dir=None,
        shrink_budget_s=PLANTED_SHRINK_S,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.rule_id == rule_id, report.details()
    # Every example on a wire opens with ``wire_walk`` (conformance/saga/_wire.py): its first unit,
    # the first command's delivery, meets wire-commit-reply-lost, and the participant, told
    # "rolled back", runs it again on top of its committed writes (S-PART-01; drawn by
    # ``arm_wire_fault`` alone, a later route unit met it first: S-ROUTE-01).
    wire_steps = {"arm_wire_fault", "wire_walk"}
    assert any(step.rule in wire_steps for step in result.failure.program), report.details()
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    fixed = replay(saved, overrides={"backend": SHIPPED[service]})
    assert not fixed.reproduced, fixed.describe()
