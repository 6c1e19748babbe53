"""Backend time: every call on a saga backend (and its transactions) adds to ``stats.backend_seconds``
and to the method's latency histogram (``stats.latency``, ``conformance/_metrics.py``).

The same seam keeps the runtime's transactions in order (``TransactionLog``): which ones the
database refused with a definite rollback (a serialization failure, a deadlock, a lock timeout),
so the metrics ledger can count the attempts a runtime ran again (S-OBS-02).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from conformance._machine import SuiteStats
from conformance.saga._port import TransactionLog
from impls.saga import (
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaCapabilities,
    SagaTransaction,
    read_only,
)

R = TypeVar("R")


class _Timed:
    """Forwards every call to ``inner`` and adds its wall time to ``stats.backend_seconds``."""

    def __init__(self, inner: object, stats: SuiteStats) -> None:
        self._inner = inner
        self._stats = stats

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute
        stats = self._stats

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attribute(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                stats.backend_seconds += elapsed
                stats.latency.observe(name, elapsed)

        # Found before ``__getattr__`` from now on: a step calls a few hundred port methods, and
        # ``inner`` is fixed for this object's life, so its bound method is too.
        self.__dict__[name] = timed
        return timed


class _LoggedTransaction:
    """A timed transaction that marks its log entry when the database refuses it.

    Only a backend whose database can refuse a unit gets the mark: one whose state lives in the
    backend object alone (``BackendUnderTest.in_process``: SQLite in memory, the memory backend)
    has no other writer, so nothing can make its database refuse a unit; a ``ROLLED_BACK`` there
    is the backend's own error misreported as a refusal, and the harness excuses nothing for it
    (S-TX-01)."""

    def __init__(
        self, inner: SagaTransaction, stats: SuiteStats, log: TransactionLog, refusals: bool = True
    ) -> None:
        self._inner = inner
        self._stats = stats
        self._log = log
        self._refusals = refusals
        self._entry = len(log.refused)
        log.refused.append(False)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute
        stats, log = self._stats, self._log

        # One wrapper that times and logs (it was two, one inside the other: a third of the
        # harness's own time per port call on the memory backend).
        def logged(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attribute(*args, **kwargs)
            except SagaBackendError as exc:
                if exc.kind is SagaBackendErrorKind.ROLLED_BACK and self._refusals:
                    log.refused[self._entry] = True
                    if name == "commit":
                        log.refused_at_commit.add(self._entry)
                raise
            finally:
                elapsed = time.perf_counter() - started
                stats.backend_seconds += elapsed
                stats.latency.observe(name, elapsed)

        self.__dict__[name] = logged  # found before ``__getattr__`` from now on
        return logged


class TimedBackend(_Timed):
    """A ``SagaBackend`` whose transactions are timed too: the report's backend% column.

    It also counts, per namespace, the transactions that may have written (``generation``), so
    the harness can keep a read-back while nothing was written (``RatchetRuntime``'s observer):
    every ``begin`` counts except the observer's own reads (``observe``), and so does every
    other call on the backend (``readiness``, ``close``: whatever a backend does there, the
    count is conservative). The count is shared by every ``TimedBackend`` opened on the same
    namespace in this process, so a write through another backend object on the same rows is
    seen too; what no seam of this process sees (a server restart, another process) the
    harness must say itself (``RatchetRuntime.forget_reads``)."""

    def __init__(
        self,
        inner: SagaBackend,
        stats: SuiteStats,
        log: TransactionLog | None = None,
        refusals: bool = True,
        namespace: str | None = None,
    ) -> None:
        super().__init__(inner, stats)
        self.backend = inner
        self.log = TransactionLog() if log is None else log
        #: False: no other writer can make the database refuse a unit (``_LoggedTransaction``).
        self.refusals = refusals
        #: [count]: one list per namespace (``_GENERATIONS``), a private one without a namespace
        self._generation = [0] if namespace is None else _GENERATIONS.setdefault(namespace, [0])
        #: the thread reading for the observer, else None: its ``begin`` s count as no write
        self._observer: int | None = None

    @property
    def capabilities(self) -> SagaCapabilities:
        return self.backend.capabilities

    @property
    def generation(self) -> int:
        """Transactions (and other backend calls) on this namespace that may have written."""
        return self._generation[0]

    def __getattr__(self, name: str) -> Any:
        attribute = _Timed.__getattr__(self, name)
        if not callable(attribute):
            return attribute
        del self.__dict__[name]  # counted at every call, so never cached past this wrapper
        generation = self._generation

        def counted(*args: Any, **kwargs: Any) -> Any:
            generation[0] += 1
            return attribute(*args, **kwargs)

        self.__dict__[name] = counted
        return counted

    def observe(self, body: Callable[[SagaTransaction], R]) -> R:
        """``read_only(self, body)`` that does not count as a possible write: the observer's own
        read-back (its ``begin`` s roll back, and ``body`` calls only list and load methods)."""
        self._observer = threading.get_ident()
        try:
            return read_only(cast(SagaBackend, self), body)
        finally:
            self._observer = None

    def begin(self) -> SagaTransaction:
        if self._observer != threading.get_ident():  # another thread's begin counts
            self._generation[0] += 1
        started = time.perf_counter()
        try:
            try:
                inner = self.backend.begin()
            except SagaBackendError as exc:
                # A BEGIN the database refused is a transaction it refused before anything ran:
                # the runtime answers ``RolledBack`` for the unit (``impls.saga._unit``), and the
                # harness settles that only when the log shows the call's last transaction refused
                # (``_base.database_refused``). Unlogged, the model expected the unit applied.
                if exc.kind is SagaBackendErrorKind.ROLLED_BACK and self.refusals:
                    self.log.refused.append(True)
                raise
            return cast(SagaTransaction, _LoggedTransaction(inner, self._stats, self.log, self.refusals))
        finally:
            elapsed = time.perf_counter() - started
            self._stats.backend_seconds += elapsed
            self._stats.latency.observe("begin", elapsed)


#: namespace -> [transactions that may have written], shared by its ``TimedBackend`` objects
#: (a namespace is one example's; a few hundred small lists per run).
_GENERATIONS: dict[str, list[int]] = {}
