"""Registers the transport family (backends ``fakeredis``, ``redis``) and its ``transport`` suite.

Coverage: every rule ran and every transport fault kind was injected; an entry redelivered after
its consumer died was absorbed by the inbox; a busy claim took nothing; a trim removed entries
while another group lagged; the runtime's own dead letter, a refused signature and an undecodable
body each went to the dead letters (with their acknowledgement).
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Family, Suite, register_family, register_suite
from conformance.transport._faults import TRANSPORT_FAULTS
from conformance.transport._target import TransportTarget

TRANSPORT_BACKENDS = {
    "fakeredis": (
        "impls.transport:open_fakeredis_client",
        None,
        "the Redis Streams connector on fakeredis (embedded, Lua via lupa); gRPC over loopback mTLS",
    ),
    "redis": (
        "impls.transport:open_redis_client",
        "redis",
        "the Redis Streams connector on the real Redis 7 server; gRPC over loopback mTLS",
    ),
}


def _machine() -> type[ConformanceMachine]:
    from conformance.transport._directed import DirectedTransportMachine

    return DirectedTransportMachine


def transport_targets(stats: SuiteStats) -> Mapping[str, str]:
    targets = {f"step:{name}": "this rule never ran" for name in step_names(_machine())}
    for kind in TRANSPORT_FAULTS:
        targets[f"fault:{kind.name}"] = f"no {kind.name} fault was injected"
    targets["redelivery-after-kill-absorbed"] = "no entry of a killed consumer was redelivered and absorbed"
    targets["busy-claim-took-nothing"] = "no claim met a consumer still working"
    targets["trimmed-under-lag"] = "no trim removed entries while another group lagged"
    targets["dead-letter:DeadLettered"] = "the runtime never dead-lettered a command (transient budget)"
    targets["dead-letter:bad_signature"] = "no forged envelope was dead-lettered"
    targets["dead-letter:undecodable"] = "no poison entry was dead-lettered"
    return targets


def _named_backends() -> Mapping[str, BackendUnderTest]:
    return {
        name: BackendUnderTest(name, "transport", {"streams": factory}, service)
        for name, (factory, service, _) in TRANSPORT_BACKENDS.items()
    }


TRANSPORT_FAMILY = register_family(Family("transport", _named_backends, ("streams",)))

TRANSPORT_SUITE = register_suite(
    Suite(
        name="transport",
        family="transport",
        description="Redis Streams and gRPC/mTLS connectors over Ratchet's saga runtime beside the model",
        fault_kinds=TRANSPORT_FAULTS,
        machine=_machine,
        make_target=TransportTarget.of,
        coverage_targets=transport_targets,
    )
)
