"""The saga suite catches the broken saga backends on PostgreSQL and MariaDB too
(examples/broken_sql_saga_backends.py: the bugs of examples/broken_saga_backends.py planted in
the shared SQL backend), names the rule, shrinks the program, and the failure file replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import FailureFile, RunOptions, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_sql_saga_backends import BROKEN_SQL_SAGA_BACKENDS

SEED = 20_240_601
SERVICES = {"postgres": "postgres", "mysql": "mariadb"}


def _cases() -> list[object]:
    cases: list[object] = []
    for factory, rule_id in sorted(BROKEN_SQL_SAGA_BACKENDS.items()):
        service = SERVICES[factory.split("_", 1)[0]]
        cases.append(pytest.param(factory, rule_id, service, id=factory, marks=pytest.mark.service(service)))
    return cases


@pytest.mark.parametrize(("factory", "rule_id", "service"), _cases())
def test_broken_sql_saga_backend_is_caught_and_replays(
    factory: str, rule_id: str, service: str, tmp_path: Path
) -> None:
    path = f"examples.broken_sql_saga_backends:{factory}"
    backend = BackendUnderTest(factory, "saga", {"backend": path}, service)
    report = run_matrix(
        [(backend, suite_named("saga"))],
        RunOptions(profile="ci", seed=SEED, failure_dir=tmp_path, database_dir=None),
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 12, report.details()
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    assert saved.factories == {"backend": path}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()


@pytest.mark.service("postgres")
def test_the_correct_postgres_backend_does_not_reproduce(tmp_path: Path) -> None:
    """The failure file of the fencing bug replayed on the real PostgreSQL backend passes."""
    path = "examples.broken_sql_saga_backends:postgres_timer_ignores_fencing"
    report = run_matrix(
        [(BackendUnderTest("broken", "saga", {"backend": path}, "postgres"), suite_named("saga"))],
        RunOptions(profile="ci", seed=SEED, failure_dir=tmp_path, database_dir=None),
    )
    failure = report.results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file), overrides={"backend": "impls.sql:open_postgres_saga_backend"}
    )
    assert not result.reproduced, result.describe()
