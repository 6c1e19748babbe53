"""What a saga machine opens per example: backends on fresh namespaces from one factory."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import attrs

from conformance._machine import SuiteStats
from conformance._outage import bounded_sync
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from impls.saga import SagaBackend, SagaBackendError, SagaCapabilities, SagaTransaction


@attrs.frozen
class SagaTarget:
    factory: Callable[..., Any]

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        return cls(backend.factory("backend"))

    def open(self, namespace: str) -> SagaBackend:
        try:
            backend = bounded_sync("the saga backend factory", lambda: self.factory(namespace))
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
