"""What the Kafka transport machine opens: the broker's bootstrap, the consumer, the broker control.

Roles (``BackendUnderTest.factories``): ``kafka`` returns the bootstrap servers (the registry's is
``impls.endpoints:kafka_bootstrap``); ``kafka_consumer`` builds a group member
(``impls.transport:KafkaCommandConsumer`` or a planted bug's subclass); ``broker_control``, when
given, is a ``conformance.crash.ServiceControl`` for the broker-restart fault. The target swaps the
suite's base machine for the Kafka machine (``specialise``), so ``--suite transport --backend
kafka`` runs the same suite on the third connector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import ConformanceMachine
from conformance._suites import BackendUnderTest

KAFKA_ROLES = {"kafka_consumer": "impls.transport:KafkaCommandConsumer"}


@attrs.frozen
class KafkaTarget:
    bootstrap: Callable[[], str]
    consumer: Callable[..., Any]
    broker_control: Callable[[], Any] | None

    @classmethod
    def of(cls, backend: BackendUnderTest) -> KafkaTarget:
        roles = {**KAFKA_ROLES, **backend.factories}
        full = BackendUnderTest(backend.name, backend.family, roles, backend.service)
        control = full.factory("broker_control") if "broker_control" in roles else None
        return cls(full.factory("kafka"), full.factory("kafka_consumer"), control)

    def specialise(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        from conformance.transport._kafka_rules import KafkaMachine

        return KafkaMachine
