"""What a transport machine opens: the connectors' parts, each a factory a backend names.

Roles (``BackendUnderTest.factories``): ``streams`` opens a sync redis-py client (fakeredis or a
real server); ``consumer`` builds a stream consumer (``impls.transport:StreamConsumer`` or a
planted bug's subclass); ``admin`` the trimmer/backlog reader; ``listener`` the gRPC listener;
``stream_control`` (optional) a ``ServiceControl`` (``conformance.crash``) of the Redis server
under the streams, which fault ``redis-restart`` kills -9 and restarts (``_stream_restart.py``).
A failure file records these paths, so a replay rebuilds the very connector that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._suites import BackendUnderTest
from conformance.transport._kafka_target import KafkaTarget

DEFAULT_ROLES = {
    "consumer": "impls.transport:StreamConsumer",
    "admin": "impls.transport:StreamAdmin",
    "listener": "impls.transport:GrpcListener",
}


@attrs.frozen
class TransportTarget:
    open_client: Callable[[], Any]
    consumer: Callable[..., Any]
    admin: Callable[..., Any]
    listener: Callable[..., Any]
    stream_control: Callable[[], Any] | None = None

    @classmethod
    def of(cls, backend: BackendUnderTest) -> TransportTarget | KafkaTarget:
        """Raises ``ValueError`` for a factory path that does not import (a usage error). A backend
        naming a ``kafka`` bootstrap gets the Kafka machine (conformance/transport/_kafka_target.py);
        one naming a ``target`` brings another runtime's connectors (``_nasaga_target.py``)."""
        if "target" in backend.factories:
            target: TransportTarget = backend.factory("target")(backend)
            return target
        if "kafka" in backend.factories:
            return KafkaTarget.of(backend)
        roles = {**DEFAULT_ROLES, **backend.factories}
        full = BackendUnderTest(backend.name, backend.family, roles, backend.service)
        control = full.factory("stream_control") if "stream_control" in roles else None
        return cls(
            full.factory("streams"),
            full.factory("consumer"),
            full.factory("admin"),
            full.factory("listener"),
            control,
        )
