"""Which ROLLED_BACK answers the saga harness counts as the database's refusal (S-TX-01).

``conformance.saga._timing``: a backend whose state lives in its object (``in_process``: SQLite in
memory, the memory backend) has no other writer, so its database never refuses a unit; a
``ROLLED_BACK`` it reports is its own error misreported, and the log does not excuse it."""

from __future__ import annotations

import pytest

from conformance._machine import SuiteStats
from conformance.saga._port import TransactionLog
from conformance.saga._ratchet import _receipt
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


class _ReceiptTransaction(MemoryTransaction):
    kind = SagaBackendErrorKind.CORRUPT

    def load_receipt(self, saga_id: str) -> None:
        raise SagaBackendError(self.kind, "the receipt read failed")


@pytest.mark.parametrize("kind", list(SagaBackendErrorKind))
def test_only_a_receipt_that_does_not_decode_is_the_read_backs_answer(kind: SagaBackendErrorKind) -> None:
    """The read-back judges a receipt that does not decode (S-START-03); a refused or failed read
    is the read's own error (``read_only`` retries a refusal; an outage is exit 2), never a verdict."""
    tx = _ReceiptTransaction(MemorySagaBackend("receipts"))
    tx.kind = kind
    if kind is SagaBackendErrorKind.CORRUPT:
        assert _receipt(tx, "saga-1") == "SagaBackendError(corrupt)"
    else:
        with pytest.raises(SagaBackendError):
            _receipt(tx, "saga-1")


@pytest.mark.parametrize(
    ("refused", "retried"),
    [
        ([True, True, True], 2),  # one unit refused on every attempt: the last one is not run again
        ([True, True, True, False], 2),  # ... and then a dead letter's transaction
        ([True, True, True, True, False], 3),  # ... whose first attempt was refused too
        ([True, False, False], 1),  # a refused attempt run again, then another unit
        ([False, True, False], 1),
    ],
)
def test_a_unit_given_up_is_not_counted_as_run_again(refused: list[bool], retried: int) -> None:
    """S-OBS-02: a unit refused on each of its attempts (three in Ratchet's runtime) was given up;
    the transaction after it is the next unit's (the dead letter of the delivery's spent budget),
    not one more attempt of it."""
    log = TransactionLog(attempts=3)
    log.refused.extend(refused)
    assert log.retried_within(0) == retried
