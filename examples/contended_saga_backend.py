"""A correct saga backend under contention: the in-memory backend whose database refuses every
third COMMIT with a definite rollback, as PostgreSQL's serialization failures (``40001``) and
MariaDB's deadlocks do when other sessions write the same tables; and the first statement of
every fifth transaction, reads included, as PostgreSQL's SSI does at a statement too (it may pick
a read-only transaction as the victim, and a deadlock is reported at the statement that waited).

Nothing of a refused transaction applies, so a runtime that runs the unit again (bounded,
``impls.saga.run_unit``; a read, ``impls.saga.read_only``) keeps every outcome the model's. Each
retried attempt is one more observation of its stage (S-OBS-02), which the metrics ledger counts
at the storage port (``conformance/saga/_timing.TransactionLog``)::

    conformance run --saga-backend examples.contended_saga_backend:contended --suite saga

``refused_in_bursts`` refuses three COMMITs in a row now and then, so a unit can be refused on every
attempt the runtime makes (``impls.saga.MAX_ATTEMPTS``); the runtime then answers ``RolledBack``,
which is true (nothing applied) and which the saga machine settles as the fate "rolled back" once
the storage port saw the database refuse the unit's last transaction (``_base.database_refused``)::

    conformance run --saga-backend examples.contended_saga_backend:refused_in_bursts --suite saga
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from impls.saga import SagaBackendError, SagaBackendErrorKind, SagaTransaction
from impls.saga.memory._backend import MemorySagaBackend, MemoryTransaction

#: Every how many COMMITs of one backend object the database refuses.
REFUSE_EVERY = 3
#: Every how many transactions of one backend object the database refuses at the first statement
#: (the transaction begun, nothing of it run yet). Five, beside the COMMITs' three, so a unit's
#: consecutive attempts (``impls.saga.MAX_ATTEMPTS``) and a read's are never all refused.
REFUSE_STATEMENT_EVERY = 5
#: A transaction's statements: what the port's ``SagaTransaction`` offers but its end.
STATEMENTS = frozenset(
    name for name in dir(SagaTransaction) if not name.startswith("_") and name not in ("commit", "rollback")
)


class _ContendedTransaction(MemoryTransaction):
    def __init__(self, backend: ContendedBackend) -> None:
        super().__init__(backend)
        self._contended = backend
        backend.transactions += 1
        self._refuse_statement = backend.transactions % REFUSE_STATEMENT_EVERY == 0

    def __getattribute__(self, name: str) -> Any:
        attribute = object.__getattribute__(self, name)
        if name not in STATEMENTS or not object.__getattribute__(self, "_refuse_statement"):
            return attribute
        return self._statement(attribute)

    def _statement(self, statement: Callable[..., Any]) -> Callable[..., Any]:
        # Refused when called, not when looked up: a caller may hold the method before it calls it.
        def refused_first(*args: Any, **kwargs: Any) -> Any:
            if self._refuse_statement:
                self._refuse_statement = False
                self.rollback()
                raise SagaBackendError(
                    SagaBackendErrorKind.ROLLED_BACK,
                    "could not serialize access due to read/write dependencies",
                )
            return statement(*args, **kwargs)

        return refused_first

    def commit(self) -> None:
        self._contended.commits += 1
        if self._contended.commits % REFUSE_EVERY == 0:
            self.rollback()
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")
        super().commit()


class ContendedBackend(MemorySagaBackend):
    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.commits = 0
        self.transactions = 0

    def begin(self) -> MemoryTransaction:
        return _ContendedTransaction(self)


def contended(namespace: str) -> MemorySagaBackend:
    return ContendedBackend(namespace)


#: ``refused_in_bursts``: every ``BURST_EVERY``-th run of COMMITs, ``BURST`` in a row are refused.
BURST = 3
BURST_EVERY = 5


class _BurstTransaction(MemoryTransaction):
    def __init__(self, backend: BurstBackend) -> None:
        super().__init__(backend)
        self._burst = backend

    def commit(self) -> None:
        number = self._burst.commits
        self._burst.commits += 1
        if (number // BURST) % BURST_EVERY == BURST_EVERY - 1:
            self.rollback()
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")
        super().commit()


class BurstBackend(MemorySagaBackend):
    """Contention in bursts: ``BURST`` COMMITs in a row refused with a definite rollback, so a unit
    that meets a burst's first refusal is refused on every one of its ``run_unit`` attempts."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.commits = 0

    def begin(self) -> MemoryTransaction:
        return _BurstTransaction(self)


def refused_in_bursts(namespace: str) -> MemorySagaBackend:
    return BurstBackend(namespace)


class _AppliedThenRefusedTransaction(_BurstTransaction):
    def commit(self) -> None:
        number = self._burst.commits
        self._burst.commits += 1
        MemoryTransaction.commit(self)  # the bug: the writes are durable ...
        if (number // BURST) % BURST_EVERY == BURST_EVERY - 1:
            # ... and the COMMIT is still reported as a definite rollback.
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")


class AppliedThenRefusedBackend(BurstBackend):
    """Broken: in the same bursts, a COMMIT that applied is reported as refused (ROLLED_BACK).

    The runtime runs the unit again on top of its own committed writes; the harness's allowance
    for a database's definite rollback must not hide that (the rows read back show the unit)."""

    def begin(self) -> MemoryTransaction:
        return _AppliedThenRefusedTransaction(self)


def applied_then_refused(namespace: str) -> MemorySagaBackend:
    return AppliedThenRefusedBackend(namespace)
