"""The saga timing seam: a ``SagaBackend`` that wraps the real one and meters the port.

``MeteredSagaBackend`` forwards every call of the ``impls.saga.SagaBackend`` port (``begin``,
``readiness``, ``close``) and of each transaction it opens (every read and guarded write,
``commit``, ``rollback``) to the real backend unchanged, and adds up two things:

* port time: wall time spent inside port calls, and a count per method (``begin`` counts the
  transactions). Opening a backend (the factory: connecting, creating tables) counts as ``open``;
* transaction time: wall time with a transaction open, from ``begin`` being called to ``commit``
  or ``rollback`` returning: the port calls plus the runtime's own work between them.

Nothing is stubbed: the runtime and the harness see the real backend's rows and errors. The port is
synchronous and the runtime never nests transactions, so port calls never overlap and a plain sum
is exact; the seam adds two clock reads per call and nothing else, since a memory backend's calls
take a microsecond or two.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import attrs

from impls.saga import SagaBackend, SagaCapabilities, SagaTransaction


def statements_of(backend: object) -> int | None:
    """The SQL backends count their statements (``impls.sql.SqlSagaBackend.statements``); the
    memory backend has none to count."""
    value = getattr(backend, "statements", None)
    return value if isinstance(value, int) else None


@attrs.define
class SagaMeters:
    """What the seam saw in one measured run (or around one counted unit)."""

    port_seconds: float = 0.0  # inside port calls
    calls: Counter[str] = attrs.field(factory=Counter)  # port calls by method; "begin": transactions
    transaction_seconds: float = 0.0  # with a transaction open

    def metered_factory(self, factory: Callable[[str], SagaBackend]) -> Callable[[str], SagaBackend]:
        """A factory of the same shape as ``factory`` whose backends are metered."""

        def open_metered(namespace: str) -> SagaBackend:
            return MeteredSagaBackend(self.call("open", factory, namespace), self)

        return open_metered

    def call(self, name: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.port_seconds += time.perf_counter() - started
            self.calls[name] += 1

    def total_calls(self) -> int:
        return sum(self.calls.values())


class MeteredSagaTransaction:
    """A ``SagaTransaction`` forwarding to ``inner``: each method call timed and counted by name."""

    def __init__(self, inner: SagaTransaction, meters: SagaMeters, opened: float) -> None:
        self._inner = inner
        self._meters = meters
        self._opened: float | None = opened  # when ``begin`` was called

    def _end(self, name: str, method: Callable[[], None]) -> None:
        try:
            self._meters.call(name, method)
        finally:
            if self._opened is not None:  # rollback after commit is allowed and ends nothing new
                self._meters.transaction_seconds += time.perf_counter() - self._opened
                self._opened = None

    def commit(self) -> None:
        self._end("commit", self._inner.commit)

    def rollback(self) -> None:
        self._end("rollback", self._inner.rollback)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute
        meters = self._meters

        def metered(*args: Any, **kwargs: Any) -> Any:
            return meters.call(name, attribute, *args, **kwargs)

        return metered


class MeteredSagaBackend:
    """A ``SagaBackend`` that forwards to ``inner`` and meters every port call (module docstring)."""

    def __init__(self, inner: SagaBackend, meters: SagaMeters) -> None:
        self.inner = inner
        self.meters = meters

    @property
    def capabilities(self) -> SagaCapabilities:
        return self.inner.capabilities

    @property
    def statements(self) -> int | None:
        return statements_of(self.inner)

    def begin(self) -> SagaTransaction:
        opened = time.perf_counter()
        tx = self.meters.call("begin", self.inner.begin)
        return cast(SagaTransaction, MeteredSagaTransaction(tx, self.meters, opened))

    def readiness(self) -> None:
        self.meters.call("readiness", self.inner.readiness)

    def close(self) -> None:
        self.meters.call("close", self.inner.close)
