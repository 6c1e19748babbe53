"""Request/response delivery: admission by principal and closed receipts (S-GRPC-01..05)."""

from __future__ import annotations

import pytest

from model.saga import (
    ACKNOWLEDGING,
    Admitted,
    DeadLettered,
    DeliveryCall,
    DuplicateCommand,
    DuplicateResult,
    MessageRefused,
    OutcomeUnknown,
    Receipt,
    ReceiptKind,
    RefusalReason,
    RolledBack,
    Unauthenticated,
    admit_call,
    answer_call,
    receipt_for,
    same_acknowledgement,
)
from model.saga._participant import CommandProcessed
from model.saga._values import DeliveryVerdict


class _Committed:
    verdict = DeliveryVerdict.ACK


def test_s_grpc_01_every_outcome_maps_to_one_receipt_of_the_closed_set() -> None:
    cases = [
        (_Committed(), ReceiptKind.COMMITTED),
        (DuplicateCommand("c"), ReceiptKind.DUPLICATE),
        (DuplicateResult("r"), ReceiptKind.DUPLICATE),
        (RolledBack(), ReceiptKind.RETRYABLE),
        (OutcomeUnknown(), ReceiptKind.RETRYABLE),
        (MessageRefused("c", RefusalReason.UNTRUSTED_PRODUCER), ReceiptKind.REJECTED),
        (DeadLettered("c", 2), ReceiptKind.REJECTED),
    ]
    for outcome, kind in cases:
        receipt = receipt_for("p0", "c", outcome)
        assert receipt.kind is kind, outcome
        assert (receipt.message_id, receipt.principal) == ("c", "p0")
    assert {k for _, k in cases} == set(ReceiptKind)
    assert CommandProcessed.verdict is DeliveryVerdict.ACK


def test_s_grpc_02_the_principal_is_bound_to_the_claimed_producer() -> None:
    assert admit_call(DeliveryCall("m", "p0", "p0")) == Admitted("p0")
    refused = admit_call(DeliveryCall("m", "p0", "p1"))
    assert refused == Receipt(ReceiptKind.REJECTED, "m", "p1", "principal_mismatch")
    assert answer_call(DeliveryCall("m", "p0", "p1"), None) == refused


def test_s_grpc_03_calls_without_a_principal_never_reach_a_handler() -> None:
    assert admit_call(DeliveryCall("m", "p0", None)) == Unauthenticated("m")
    assert answer_call(DeliveryCall("m", "p0", None), None) == Unauthenticated("m")
    with pytest.raises(ValueError):
        answer_call(DeliveryCall("m", "p0", "p0"), None)


def test_s_grpc_04_retryable_is_never_reported_committed() -> None:
    for outcome in (RolledBack(), OutcomeUnknown()):
        receipt = answer_call(DeliveryCall("m", "p0", "p0"), outcome)
        assert isinstance(receipt, Receipt) and receipt.kind is ReceiptKind.RETRYABLE
        assert receipt.kind not in ACKNOWLEDGING


def test_s_grpc_05_a_retry_after_a_lost_reply_gets_the_same_acknowledgement() -> None:
    first = receipt_for("p0", "m", _Committed())
    retry = receipt_for("p0", "m", DuplicateCommand("m"))
    assert same_acknowledgement(first, retry)
    assert not same_acknowledgement(first, receipt_for("p0", "m", RolledBack()))
    assert not same_acknowledgement(first, receipt_for("p1", "m", DuplicateCommand("m")))
    assert not same_acknowledgement(first, receipt_for("p0", "n", DuplicateCommand("n")))
