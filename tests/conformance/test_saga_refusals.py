"""Which ROLLED_BACK answers the saga harness counts as the database's refusal (S-TX-01).

``conformance.saga._timing``: a backend whose state lives in its object (``in_process``: SQLite in
memory, the memory backend) has no other writer, so its database never refuses a unit; a
``ROLLED_BACK`` it reports is its own error misreported, and the log does not excuse it."""

from __future__ import annotations

import pytest

from conformance._machine import SuiteStats
from conformance.saga._port import TransactionLog
from conformance.saga._timing import TimedBackend
from impls.saga import SagaBackendError, SagaBackendErrorKind
from impls.saga.memory._backend import MemorySagaBackend, MemoryTransaction


class _RefusingTransaction(MemoryTransaction):
    def list_timers(self) -> tuple[()]:
        raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "refused")


class _RefusingBackend(MemorySagaBackend):
    def begin(self) -> MemoryTransaction:
        return _RefusingTransaction(self)


@pytest.mark.parametrize("refusals", [True, False])
def test_a_refusal_is_logged_only_where_the_database_can_refuse(refusals: bool) -> None:
    log = TransactionLog()
    backend = TimedBackend(_RefusingBackend("refusals"), SuiteStats(), log, refusals=refusals)
    tx = backend.begin()
    with pytest.raises(SagaBackendError):
        tx.list_timers()
    assert log.refused == [refusals]
