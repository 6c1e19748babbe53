"""The target of the nasaga transport backends and what the gate asks of them (``suites.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest
from conformance.saga._faults import RELAY_CRASH
from conformance.transport import _faults as f
from conformance.transport._faults import redis_restart_targets
from conformance.transport._nasaga_restart import NasagaRestartMachine
from conformance.transport._nasaga_world import PLANTED


@attrs.frozen
class NasagaTransportTarget:
    open_client: Callable[[], Any]
    redis_url: str
    #: A ``ServiceControl`` of the Redis server under the streams (fault ``redis-restart``).
    stream_control: Callable[[], Any] | None = None

    def specialise(self, _base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        return NasagaRestartMachine

    @classmethod
    def of(cls, backend: BackendUnderTest) -> NasagaTransportTarget:
        from impls.endpoints import redis_url

        control = backend.factory("stream_control") if "stream_control" in backend.factories else None
        return cls(backend.factory("streams"), redis_url(), control)


def nasaga_target(backend: BackendUnderTest) -> NasagaTransportTarget:
    """The ``target`` role of the nasaga transport backends (``suites.py``)."""
    return NasagaTransportTarget.of(backend)


@attrs.frozen
class NasagaGrpcTarget:
    """nasaga's gRPC transport in its host: the host opens its listeners. ``plant`` names a
    listener bug the host plants for the harness's own test (examples/broken_nasaga_grpc.py)."""

    plant: str | None = None

    def specialise(self, _base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        from conformance.transport._nasaga_grpc import NasagaGrpcMachine

        return NasagaGrpcMachine


def nasaga_grpc_target(_backend: BackendUnderTest) -> NasagaGrpcTarget:
    """The ``target`` role of ``nasaga-grpc``."""
    return NasagaGrpcTarget()


def nasaga_grpc_targets() -> dict[str, str]:
    """What the gate asks of a run on nasaga's gRPC transport (the runner adds ``fault:<kind>``
    for every kind that applies: the certificate kinds, reply-lost, poison, relay-crash)."""
    from conformance.transport._nasaga_grpc import NasagaGrpcMachine

    targets = {f"step:{name}": "this rule never ran" for name in step_names(NasagaGrpcMachine)}
    for service in ("command", "result"):
        targets[f"reply-lost-absorbed:{service}"] = f"no {service} retried after a lost reply got DUPLICATE"
    targets["relay-redelivery-absorbed"] = "no command sent again after a relay crash was absorbed"
    targets["retryable-kept-unpublished"] = "no RETRYABLE receipt left a command unpublished"
    targets["claimed-producer-rejected"] = "no envelope claiming another owner was rejected"
    targets["refused:foreign_cert"] = "no certificate bound to another producer was refused"
    targets["refused:unauthenticated"] = "no call on the port that asks for no certificate was refused"
    targets["dead-letter:undecodable"] = "no undecodable body was rejected"
    targets["saga-completed"] = "no saga completed over gRPC"
    return targets


def nasaga_targets(stats: SuiteStats) -> dict[str, str]:
    """What the gate asks of a run on nasaga's connector."""
    targets = {f"step:{name}": "this rule never ran" for name in step_names(NasagaRestartMachine)}
    for kind in (
        f.POISON,
        f.FORGED_ENVELOPE,
        f.UNSIGNED_ENVELOPE,
        f.OLD_KEY_ENVELOPE,
        f.TRIM_UNDER_LAG,
        f.CLAIMED_WHILE_WORKING,
        RELAY_CRASH,
    ):
        targets[f"fault:{kind.name}"] = f"no {kind.name} fault was injected"
    targets["duplicate-entry-absorbed"] = "no second entry of a published command was absorbed by the inbox"
    targets["retained-entry-redelivered"] = "no entry left pending by a failing handler was redelivered"
    targets["trimmed-under-lag"] = "no trim removed entries while another group lagged"
    targets.update(redis_restart_targets(stats.details))
    for _, reason in PLANTED.values():
        targets[f"dead-letter:{reason}"] = f"no entry was dead-lettered as {reason}"
    return targets
