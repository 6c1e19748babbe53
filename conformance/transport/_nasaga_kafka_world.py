"""What the transport suite on nasaga's Kafka connector shares: names, plans, the target and the
gate's targets (machine: ``_nasaga_kafka.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import ConformanceMachine, step_names
from conformance._suites import BackendUnderTest
from conformance.saga import _world as w
from conformance.transport import _faults as f
from model import saga as m

GROUP, OWNER, STEP = "work", "p0", "reserve"
PARTITIONS = 2
#: The world's business keys; a saga's command goes to partition ``index % 2`` (the harness names
#: the partition, so a batch can put a failing saga beside a healthy one on purpose).
KEYS = (*w.BUSINESS_KEYS, *w.UPLOAD_KEYS)
PARTITION_OF = {
    m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key): index % PARTITIONS for index, key in enumerate(KEYS)
}
BACKOFF_MS = 400  # nafka's consume_retry_backoff_ms: the pause of a partition after a failure
SETTLE_S = 30.0  # every record has its outcome within this once nothing more fails
EVENT_HEADER = "X-Nasa-Event"  # nafka's routing header; nasaga's command event type is its value
COMMAND_EVENT = b"saga.command"
#: how -> (fault kind, nasaga's dead-letter reason as nafka's DLT header carries it)
PLANTED = {
    "poison": (f.POISON, "decode"),  # nafka's own: the JSON does not decode (reason text is nafka's)
    "forged": (f.FORGED_ENVELOPE, "saga_command_identity_invalid"),
}
DECISIONS = {"succeed": m.Decision.SUCCEED, "reject": m.Decision.REJECT}
#: Fault kinds of the suite nasaga's Kafka connector cannot be put through, and why.
NASAGA_KAFKA_LACKS = {
    f.KEY_ROTATED.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
    f.UNSIGNED_ENVELOPE.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
    f.OLD_KEY_ENVELOPE.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
    f.REBALANCE_MID_UNIT.name: "one nafka consumer per host process; a second member is not hosted yet",
    f.BROKER_RESTART.name: "the shared broker is not restarted under nasaga's consumer (backend kafka does)",
}


@attrs.frozen
class NasagaKafkaTarget:
    bootstrap: Callable[[], str]

    def specialise(self, _base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        from conformance.transport._nasaga_kafka import NasagaKafkaMachine

        return NasagaKafkaMachine

    @classmethod
    def of(cls, backend: BackendUnderTest) -> NasagaKafkaTarget:
        return cls(backend.factory("kafka"))


def nasaga_kafka_target(backend: BackendUnderTest) -> Any:
    """The ``target`` role of ``nasaga-kafka`` (``conformance/backends.py``)."""
    return NasagaKafkaTarget.of(backend)


def nasaga_kafka_targets() -> dict[str, str]:
    """What the gate asks of a run on nasaga's Kafka connector (the runner adds ``fault:<kind>``)."""
    from conformance.transport._nasaga_kafka import NasagaKafkaMachine

    targets = {f"step:{name}": "this rule never ran" for name in step_names(NasagaKafkaMachine)}
    targets["redelivery-after-kill-absorbed"] = "no record of a killed consumer was redelivered and absorbed"
    targets["healthy-partition-moved-during-backoff"] = "no partition was read while the other backed off"
    targets["duplicate-record-absorbed"] = "no second record of a published command was absorbed"
    targets["failed-record-redelivered"] = "no record a failing handler left was redelivered"
    for how in PLANTED:
        targets[f"dead-letter:{how}"] = f"no {how} record was dead-lettered"
    return targets
