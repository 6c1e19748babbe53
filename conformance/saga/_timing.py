"""Backend time: every call on a saga backend (and its transactions) adds to ``stats.backend_seconds``
and to the method's latency histogram (``stats.latency``, ``conformance/_metrics.py``)."""

from __future__ import annotations

import time
from typing import Any, cast

from conformance._machine import SuiteStats
from impls.saga import SagaBackend, SagaCapabilities, SagaTransaction


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
                elapsed = time.perf_counter() - started
                self._stats.backend_seconds += elapsed
                self._stats.latency.observe(name, elapsed)

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
            elapsed = time.perf_counter() - started
            self._stats.backend_seconds += elapsed
            self._stats.latency.observe("begin", elapsed)
