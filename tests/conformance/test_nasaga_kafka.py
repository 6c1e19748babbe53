"""The transport suite on nasaga's Kafka consumer catches a handler that acknowledges a record whose
unit never committed (examples/broken_nasaga_kafka.py), names the rule, and the failure file
replays to the same violation; the same program on the real handler passes. Needs the broker,
PostgreSQL and the host (``scripts/services up kafka postgres``, ``make nasaga-host``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import FailureFile, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from conformance.backends import TRANSPORT_BACKENDS
from examples.broken_nasaga_kafka import BROKEN_NASAGA_KAFKA
from tests._planted import planted_options

pytestmark = [pytest.mark.service("kafka"), pytest.mark.service("postgres"), pytest.mark.nasaga_schemas]


@pytest.mark.parametrize("bug", sorted(BROKEN_NASAGA_KAFKA))
def test_planted_handler_bug_is_caught_and_replays(bug: str, tmp_path: Path) -> None:
    roles = {
        **TRANSPORT_BACKENDS["nasaga-kafka"].factories,
        "planted_bug": f"examples.broken_nasaga_kafka:{bug}",
    }
    backend = BackendUnderTest(f"nasaga-kafka-{bug}", "transport", roles, "kafka")
    options = planted_options(1, tmp_path, examples=1, steps=2)
    report = run_matrix([(backend, suite_named("transport"))], options)
    (result,) = report.results
    # The details say whether the walk's rebalance ran and what it handed over (a once-seen miss).
    assert result.verdict is Verdict.VIOLATION, (report.details(), result.stats.details)
    assert result.failure is not None
    assert result.failure.rule_id == BROKEN_NASAGA_KAFKA[bug], report.details()
    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.factories["planted_bug"] == f"examples.broken_nasaga_kafka:{bug}"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    # The same program behind nasaga's own handler passes: the bug was the planted one.
    honest = replay(saved, overrides={"planted_bug": "examples.broken_nasaga_kafka:no_bug"})
    assert not honest.reproduced, honest.describe()
