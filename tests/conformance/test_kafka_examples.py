"""The transport suite on Kafka catches every planted connector bug (examples/broken_kafka.py), names
the rule it broke, shrinks the program to a few steps, and the failure file replays to the same
violation; the same program on the real connector passes. Needs the broker (``scripts/services up
kafka``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_kafka import BROKEN_KAFKA
from tests._planted import planted_options

pytestmark = pytest.mark.service("kafka")

BOOTSTRAP = "impls.endpoints:kafka_bootstrap"
SEEDS = {
    "OffsetBeforeCommit": 1,
    "DeadLetterUnacknowledged": 1,
    "BackoffBlocksAll": 1,
    "PauseKeptOnRebalance": 1,
}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            roles = {"kafka": BOOTSTRAP, "kafka_consumer": f"examples.broken_kafka:{factory}"}
            backend = BackendUnderTest(factory, "transport", roles, "kafka")
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures, examples=15, steps=15)
            reports[factory] = run_matrix([(backend, suite_named("transport"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize("factory", sorted(BROKEN_KAFKA))
def test_planted_kafka_bug_is_caught_and_replays(factory: str, run_broken: RunBroken) -> None:
    rule_id = BROKEN_KAFKA[factory]
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 10, report.details()
    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert (saved.suite, saved.rule_id) == ("transport", rule_id)
    assert saved.factories["kafka_consumer"] == f"examples.broken_kafka:{factory}"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    print(f"{factory}: {rule_id} in {result.elapsed_s:.1f}s, {len(saved.program)} steps")


def test_the_real_kafka_connector_does_not_reproduce(run_broken: RunBroken) -> None:
    """The same program on the real consumer passes: the bug was the connector's."""
    failure = run_broken("OffsetBeforeCommit").results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file),
        overrides={"kafka_consumer": "impls.transport:KafkaCommandConsumer"},
    )
    assert not result.reproduced, result.describe()
