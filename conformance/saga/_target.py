"""What a saga machine opens per example: backends on fresh namespaces from one factory."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, cast

import attrs

from conformance._machine import ConformanceMachine, SuiteStats
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from impls.saga import SagaBackend, SagaBackendError, SagaCapabilities, SagaTransaction


@attrs.frozen
class SagaTarget:
    """The backend factory, and the wire (a fault proxy) when the backend names its service and
    its factory takes an ``endpoint`` keyword: every backend of the example is opened through it."""

    factory: Callable[..., Any]
    wire: Any = None  # a conformance.wire.WireRoute, or None

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        from conformance.wire import accepts_endpoint, route

        factory = backend.factory("backend")
        if backend.service is None or not accepts_endpoint(factory):
            return cls(factory)
        wire = route(backend.service)
        return cls(functools.partial(factory, endpoint=wire.endpoint), wire)

    def specialise(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        """The machine with the wire-fault rule (conformance/saga/_wire.py) when there is a wire."""
        if self.wire is None:
            return base
        from conformance.saga._wire import SagaWireRules

        return type(base.__name__, (SagaWireRules, base), {"proxy": self.wire.proxy})

    def open(self, namespace: str) -> SagaBackend:
        try:
            backend = self.factory(namespace)
        except SagaBackendError as exc:
            raise HarnessEnvironmentError(
                f"the saga backend factory could not open a backend: {exc}"
            ) from exc
        if not isinstance(backend, SagaBackend):
            raise HarnessEnvironmentError(
                f"the factory returned {type(backend).__name__}, not an impls.saga.SagaBackend"
            )
        return backend


class _Timed:
    """Forwards every call to ``inner`` and adds its wall time to ``stats.backend_seconds``."""

    def __init__(self, inner: object, stats: SuiteStats) -> None:
        self._inner = inner
        self._stats = stats

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attribute(*args, **kwargs)
            finally:
                self._stats.backend_seconds += time.perf_counter() - started

        return timed


class TimedBackend(_Timed):
    """A ``SagaBackend`` whose transactions are timed too: the report's backend% column."""

    def __init__(self, inner: SagaBackend, stats: SuiteStats) -> None:
        super().__init__(inner, stats)
        self.backend = inner

    @property
    def capabilities(self) -> SagaCapabilities:
        return self.backend.capabilities

    def begin(self) -> SagaTransaction:
        started = time.perf_counter()
        try:
            return cast(SagaTransaction, _Timed(self.backend.begin(), self._stats))
        finally:
            self._stats.backend_seconds += time.perf_counter() - started
