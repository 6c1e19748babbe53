"""Backend time: every call on a saga backend (and its transactions) adds to ``stats.backend_seconds``
and to the method's latency histogram (``stats.latency``, ``conformance/_metrics.py``).

The same seam keeps the runtime's transactions in order (``TransactionLog``): which ones the
database refused with a definite rollback (a serialization failure, a deadlock, a lock timeout),
so the metrics ledger can count the attempts a runtime ran again (S-OBS-02).
"""

from __future__ import annotations

import time
from typing import Any, cast

from conformance._machine import SuiteStats
from conformance.saga._port import TransactionLog
from impls.saga import (
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaCapabilities,
    SagaTransaction,
)


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


class _LoggedTransaction(_Timed):
    """A timed transaction that marks its log entry when the database refuses it.

    Only a backend whose database can refuse a unit gets the mark: one whose state lives in the
    backend object alone (``BackendUnderTest.in_process``: SQLite in memory, the memory backend)
    has no other writer, so nothing can make its database refuse a unit; a ``ROLLED_BACK`` there
    is the backend's own error misreported as a refusal, and the harness excuses nothing for it
    (S-TX-01)."""

    def __init__(
        self, inner: SagaTransaction, stats: SuiteStats, log: TransactionLog, refusals: bool = True
    ) -> None:
        super().__init__(inner, stats)
        self._log = log
        self._refusals = refusals
        self._entry = len(log.refused)
        log.refused.append(False)

    def __getattr__(self, name: str) -> Any:
        attribute = super().__getattr__(name)
        if not callable(attribute):
            return attribute

        def logged(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except SagaBackendError as exc:
                if exc.kind is SagaBackendErrorKind.ROLLED_BACK and self._refusals:
                    self._log.refused[self._entry] = True
                    if name == "commit":
                        self._log.refused_at_commit.add(self._entry)
                raise

        return logged


class TimedBackend(_Timed):
    """A ``SagaBackend`` whose transactions are timed too: the report's backend% column."""

    def __init__(
        self, inner: SagaBackend, stats: SuiteStats, log: TransactionLog | None = None, refusals: bool = True
    ) -> None:
        super().__init__(inner, stats)
        self.backend = inner
        self.log = TransactionLog() if log is None else log
        #: False: no other writer can make the database refuse a unit (``_LoggedTransaction``).
        self.refusals = refusals

    @property
    def capabilities(self) -> SagaCapabilities:
        return self.backend.capabilities

    def begin(self) -> SagaTransaction:
        started = time.perf_counter()
        try:
            transaction = _LoggedTransaction(self.backend.begin(), self._stats, self.log, self.refusals)
            return cast(SagaTransaction, transaction)
        finally:
            elapsed = time.perf_counter() - started
            self._stats.backend_seconds += elapsed
            self._stats.latency.observe("begin", elapsed)
