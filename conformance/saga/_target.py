"""What a saga machine opens per example: a runtime under test on fresh namespaces.

A saga backend is given as a ``backend`` factory (Ratchet's runtime runs over it) or as a
``runtime`` factory (a runtime that brings its own storage, such as the nasaga host). A backend
factory that names its service and takes an ``endpoint`` keyword is opened through the fault
proxy (``conformance.wire``), and the machine gets the wire-fault rule (``_wire.SagaWireRules``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import attrs

from conformance._machine import ConformanceMachine, SuiteStats
from conformance._suites import BackendUnderTest
from conformance.saga._port import FateHook, SagaRuntime
from conformance.saga._ratchet import RatchetRuntime

Opener = Callable[[str, FateHook, SuiteStats], SagaRuntime]


@attrs.frozen
class SagaTarget:
    open: Opener
    wire: Any = None  # a conformance.wire.WireRoute, or None

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        if "runtime" in backend.factories:
            return cls(cast(Opener, backend.factory("runtime")))
        from conformance.wire import accepts_endpoint, route

        factory: Callable[..., Any] = backend.factory("backend")
        wire = None
        if backend.service is not None and accepts_endpoint(factory):
            wire = route(backend.service)
            factory = functools.partial(factory, endpoint=wire.endpoint)
        opened = factory
        return cls(lambda namespace, fates, stats: RatchetRuntime(opened, namespace, fates, stats), wire)

    def specialise(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        """The machine with the wire-fault rule (conformance/saga/_wire.py) when there is a wire."""
        if self.wire is None:
            return base
        from conformance.saga._wire import SagaWireRules

        return type(base.__name__, (SagaWireRules, base), {"proxy": self.wire.proxy})
