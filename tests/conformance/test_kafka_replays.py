"""Programs random reach seeds found on the Kafka connector (docs/transports.md, "Found by the
suites"), replayed on the real broker: each failed before its fix, and must pass now. Needs the
broker (``scripts/services up kafka``)."""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import Step

pytestmark = pytest.mark.service("kafka")

FACTORIES = {"kafka": "impls.endpoints:kafka_bootstrap", "broker_control": "conformance.crash:kafka_control"}

PROGRAMS = {
    # seed 2545864180: a partition backed off, then given back to c1 by a rebalance, was never read
    # again (librdkafka keeps a pause across unassign and assign): S-KAFKA-04 at quiescence
    "backoff-across-rebalance": (
        "S-KAFKA-04",
        (Step("slow_partition", {"fate": "committed"}), Step("scale", {})),
    ),
    # seed 1429146880: c2 left mid-unit and its unit rolled back; the back-off then paused a
    # partition on the closed client (AttributeError out of process, an ERROR of the run)
    "backoff-after-revoke": (
        "S-KAFKA-05",
        (
            Step("start", {"key": 0}),
            Step("publish_commands", {}),
            Step("scale", {}),
            Step("move_mid_unit", {"fate": "rolled_back", "how": "rebalance"}),
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_a_random_seed_found_passes_on_the_fixed_connector(name: str) -> None:
    rule_id, program = PROGRAMS[name]
    failure = FailureFile(
        suite="transport",
        backend="kafka",
        factories=FACTORIES,
        seed=0,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id=rule_id,
        message=name,
        context={},
        program=program,
        service="kafka",
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(program) + 1  # every step and the quiescence checks
