"""The target of backend ``nasaga-kafka`` and what the gate asks of it (``suites.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest
from conformance.transport._faults import BROKER_RESTART
from conformance.transport._nasaga_kafka import NasagaKafkaMachine
from conformance.transport._nasaga_kafka_world import PLANTED


@attrs.frozen
class NasagaKafkaTarget:
    bootstrap: Callable[[], str]
    #: A planted bug of the host's handler (``examples/broken_nasaga_kafka.py``), or None.
    planted_bug: str | None = None
    #: The broker's control (``conformance.crash:kafka_control``): the walk restarts it in profile
    #: deep (``_nasaga_kafka_restart.py``); None: never restarted.
    broker_control: Callable[[], Any] | None = None

    def specialise(self, _base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        return NasagaKafkaMachine

    @classmethod
    def of(cls, backend: BackendUnderTest) -> NasagaKafkaTarget:
        bug = backend.factory("planted_bug")() if "planted_bug" in backend.factories else None
        control = backend.factory("broker_control") if "broker_control" in backend.factories else None
        return cls(backend.factory("kafka"), bug, control)


def nasaga_kafka_target(backend: BackendUnderTest) -> Any:
    """The ``target`` role of ``nasaga-kafka`` (``conformance/backends.py``)."""
    return NasagaKafkaTarget.of(backend)


def nasaga_kafka_targets(stats: SuiteStats) -> dict[str, str]:
    """What the gate asks of a run on nasaga's Kafka connector (the runner adds ``fault:<kind>``);
    the broker restart's target only where the run could restart the broker."""
    targets = {f"step:{name}": "this rule never ran" for name in step_names(NasagaKafkaMachine)}
    targets["redelivery-after-kill-absorbed"] = "no record of a killed consumer was redelivered and absorbed"
    targets["healthy-partition-moved-during-backoff"] = "no partition was read while the other backed off"
    targets["duplicate-record-absorbed"] = "no second record of a published command was absorbed"
    targets["revoked-unit-redelivered-to-new-owner"] = "no partition was handed over while its unit ran"
    targets["backoff-held-across-rebalance"] = "no rebalance came while a partition backed off (S-KAFKA-05)"
    if not stats.details.get(f"transport:{BROKER_RESTART.name}", "").startswith("not applicable"):
        targets["offsets-survived-broker-restart"] = "no broker restart under a running unit was survived"
    targets["failed-record-redelivered"] = "no record a failing handler left was redelivered"
    for how in (*PLANTED, "exhausted"):
        targets[f"dead-letter:{how}"] = f"no {how} record was dead-lettered"
    return targets
