"""Request/response delivery (gRPC): admission by principal and closed receipts (S-GRPC-*).

A delivery call carries one envelope and the producer it claims. The principal is what the
transport authenticated (the subject of the client certificate under mutual TLS), never a field
of the request: a call without one is refused before any handler runs (``Unauthenticated``, no
receipt, S-GRPC-03), and a call whose claimed producer is not its principal gets a ``REJECTED``
receipt without reaching the handler (S-GRPC-02). Everything else reaches the handler with the
principal as the producer, and its outcome's ``DeliveryVerdict`` becomes the receipt (S-GRPC-01):

=============================  ============  ====================================
outcome                        verdict       receipt
=============================  ============  ====================================
committed (fresh, stale)       ACK           ``COMMITTED``
duplicate absorbed             ACK           ``DUPLICATE``
rolled back, outcome unknown   REDELIVER     ``RETRYABLE`` (never committed, S-GRPC-04)
refused, dead-lettered         DEAD_LETTER   ``REJECTED``
=============================  ============  ====================================

A client that lost a reply sends the same envelope again; the inbox and gate decide, so the
retry is answered with the acknowledgement the lost reply carried: ``COMMITTED`` or
``DUPLICATE`` for the same message, never a second effect (S-GRPC-05).
"""

from __future__ import annotations

import enum
from typing import Protocol, TypeAlias

import attrs

from ._orchestrator import DuplicateResult
from ._participant import DuplicateCommand
from ._values import DeliveryVerdict


class ReceiptKind(enum.Enum):
    COMMITTED = "committed"
    DUPLICATE = "duplicate"
    RETRYABLE = "retryable"
    REJECTED = "rejected"


#: The receipts that acknowledge a delivery: the client may stop sending it.
ACKNOWLEDGING = frozenset({ReceiptKind.COMMITTED, ReceiptKind.DUPLICATE})


@attrs.frozen
class Receipt:
    """The answer to one delivery call, bound to the principal that made it (S-GRPC-02)."""

    kind: ReceiptKind
    message_id: str
    principal: str
    reason: str = ""


@attrs.frozen
class DeliveryCall:
    message_id: str
    claimed_producer: str
    principal: str | None  # None: the transport authenticated nobody


@attrs.frozen
class Unauthenticated:
    """Refused before the handler: a status, not a receipt (S-GRPC-03)."""

    message_id: str


@attrs.frozen
class Admitted:
    principal: str


CallAnswer: TypeAlias = Receipt | Unauthenticated


class HasVerdict(Protocol):
    @property
    def verdict(self) -> DeliveryVerdict: ...


def admit_call(call: DeliveryCall) -> Admitted | CallAnswer:
    """Whether the handler may see ``call``; otherwise the answer it gets (S-GRPC-02, S-GRPC-03)."""
    if call.principal is None:
        return Unauthenticated(call.message_id)
    if call.claimed_producer != call.principal:
        return Receipt(ReceiptKind.REJECTED, call.message_id, call.principal, "principal_mismatch")
    return Admitted(call.principal)


def receipt_for(principal: str, message_id: str, outcome: HasVerdict) -> Receipt:
    """The receipt for a handler's outcome (S-GRPC-01, S-GRPC-04).

    post: (__return__.kind is ReceiptKind.RETRYABLE) == (outcome.verdict is DeliveryVerdict.REDELIVER)
    """
    if outcome.verdict is DeliveryVerdict.REDELIVER:
        return Receipt(ReceiptKind.RETRYABLE, message_id, principal)
    if outcome.verdict is DeliveryVerdict.DEAD_LETTER:
        return Receipt(ReceiptKind.REJECTED, message_id, principal, type(outcome).__name__)
    if isinstance(outcome, DuplicateCommand | DuplicateResult):
        return Receipt(ReceiptKind.DUPLICATE, message_id, principal)
    return Receipt(ReceiptKind.COMMITTED, message_id, principal)


def answer_call(call: DeliveryCall, outcome: HasVerdict | None) -> CallAnswer:
    """The whole call: admission, then the receipt of the handler's ``outcome`` (``None`` only
    when the call is not admitted, since then no handler ran)."""
    admitted = admit_call(call)
    if not isinstance(admitted, Admitted):
        return admitted
    if outcome is None:
        raise ValueError("an admitted call needs the handler's outcome")
    return receipt_for(admitted.principal, call.message_id, outcome)


def same_acknowledgement(first: Receipt, retry: Receipt) -> bool:
    """A retry after a lost reply acknowledges what the first call did (S-GRPC-05): both
    acknowledge, for the same message and principal."""
    return (
        first.kind in ACKNOWLEDGING
        and retry.kind in ACKNOWLEDGING
        and (first.message_id, first.principal) == (retry.message_id, retry.principal)
    )
