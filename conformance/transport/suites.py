"""Registers the transport family (backends ``fakeredis``, ``redis``, ``kafka``) and its ``transport`` suite.

Coverage on Redis Streams: every rule ran and every transport fault kind was injected; an entry
redelivered after its consumer died was absorbed by the inbox; a busy claim took nothing; a trim
removed entries while another group lagged; the runtime's own dead letter, a refused signature and
an undecodable body each went to the dead letters (with their acknowledgement).

Coverage on Kafka: every Kafka rule ran and every fault kind that applies was injected; a record
redelivered after its consumer died was absorbed; a rebalance moved a partition away from a unit
in flight; a healthy partition was read while the other backed off; a refused signature and an
undecodable body were dead-lettered; with a broker control, the offsets and dead letters survived
a broker restart.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Family, Suite, register_family, register_suite
from conformance.backends import TRANSPORT_BACKENDS
from conformance.transport._faults import TRANSPORT_FAULTS, redis_restart_targets
from conformance.transport._target import TransportTarget


def _machine() -> type[ConformanceMachine]:
    from conformance.transport._directed import DirectedTransportMachine

    return DirectedTransportMachine


def _kafka_machine() -> type[ConformanceMachine]:
    from conformance.transport._kafka_rules import KafkaMachine

    return KafkaMachine


def transport_targets(stats: SuiteStats) -> Mapping[str, str]:
    if stats.details.get("transport:connector") == "nasaga-kafka":
        from conformance.transport._nasaga_kafka_target import nasaga_kafka_targets

        return nasaga_kafka_targets(stats)
    if stats.details.get("transport:runtime") == "nasaga":
        from conformance.transport._nasaga_target import nasaga_grpc_targets, nasaga_targets

        return (
            nasaga_grpc_targets()
            if stats.details.get("transport:connector") == "grpc"
            else nasaga_targets(stats)
        )
    # fault:<kind> targets come from the runner (each kind where it applies: _faults.KAFKA_ONLY ...).
    if stats.details.get("transport:connector") == "kafka":
        return kafka_targets(stats)
    targets = {f"step:{name}": "this rule never ran" for name in step_names(_machine())}
    targets["redelivery-after-kill-absorbed"] = "no entry of a killed consumer was redelivered and absorbed"
    targets["busy-claim-took-nothing"] = "no claim met a consumer still working"
    targets["trimmed-under-lag"] = "no trim removed entries while another group lagged"
    targets["dead-letter:DeadLettered"] = "the runtime never dead-lettered a command (transient budget)"
    targets["dead-letter:bad_signature"] = "no forged envelope was dead-lettered"
    targets["dead-letter:undecodable"] = "no poison entry was dead-lettered"
    targets.update(redis_restart_targets(stats.details))
    return targets


def kafka_targets(stats: SuiteStats) -> Mapping[str, str]:
    targets = {f"step:{name}": "this rule never ran" for name in step_names(_kafka_machine())}
    if "kafka:broker_restarts" not in stats.details:
        targets.pop("step:restart_broker", None)  # no broker control: the rule had nothing to do
    else:
        targets["offsets-survived-broker-restart"] = "no broker restart was survived"
    targets["redelivery-after-kill-absorbed"] = "no record of a killed consumer was redelivered and absorbed"
    targets["rebalance-mid-unit-redelivered"] = "no rebalance moved a partition away from a unit in flight"
    targets["healthy-partition-moved-during-backoff"] = "no partition was read while the other backed off"
    targets["rebalanced"] = "the group never scaled between units"
    targets["backoff-held-across-rebalance"] = "no rebalance came while a partition backed off (S-KAFKA-05)"
    targets["dead-letter:bad_signature"] = "no forged record was dead-lettered"
    targets["dead-letter:undecodable"] = "no poison record was dead-lettered"
    return targets


def _named_backends() -> Mapping[str, BackendUnderTest]:
    return {
        name: BackendUnderTest(
            name, "transport", dict(spec.factories), spec.service, examples=spec.examples, steps=spec.steps
        )
        for name, spec in TRANSPORT_BACKENDS.items()
    }


TRANSPORT_FAMILY = register_family(
    Family("transport", _named_backends, ("streams",), flag="--streams", what="a streams client")
)

TRANSPORT_SUITE = register_suite(
    Suite(
        name="transport",
        family="transport",
        description=(
            "Redis Streams, gRPC/mTLS and Kafka connectors over Ratchet's saga runtime, beside the model"
        ),
        fault_kinds=TRANSPORT_FAULTS,
        machine=_machine,
        make_target=TransportTarget.of,
        coverage_targets=transport_targets,
    )
)
