"""Deliberately broken connectors, each wrong in exactly one way the delivery contract forbids.

They subclass the real connectors (``impls.transport``) and change one method, so everything
else is correct and the only thing the transport suite can find is the planted bug. Each is a
factory for one role of the transport family (``consumer``, ``admin`` or ``listener``)::

    conformance run --suite transport --backend fakeredis   # the real connectors
    # a broken one: tests/conformance/test_transport_examples.py passes the role override

=========================  ===========  ===========  =================================================
factory                    role         rule broken  the bug
=========================  ===========  ===========  =================================================
AckBeforeCommit            consumer     S-STREAM-04  ``XACK`` as soon as an entry is read, before the
                                                     handler's unit committed
TrimPastPending            admin        S-STREAM-07  trims below its own group's last-delivered id,
                                                     ignoring pending entries and other groups
DeadLetterWithoutAck       consumer     S-STREAM-06  copies a refused entry to the dead letters and
                                                     leaves it pending
AckWithoutDeadLetter       consumer     S-STREAM-06  acknowledges a refused entry and copies nothing
UnauthenticatedHandler     listener     S-GRPC-03    no interceptor, and the servicer takes the claimed
                                                     producer when TLS authenticated nobody
=========================  ===========  ===========  =================================================

``BROKEN_TRANSPORTS`` maps each factory to its role and the rule ID the suite must report.
"""

from __future__ import annotations

from typing import Any

import attrs
import grpc

from impls.transport import (
    DeliveryServicer,
    GrpcListener,
    InHand,
    Settled,
    StreamAdmin,
    StreamConsumer,
    parse_id,
)
from model.saga import DeliveryVerdict


class AckBeforeCommit(StreamConsumer):
    """S-STREAM-04: the entry is acknowledged the moment it is in hand."""

    def process(self, entry: InHand) -> Settled:
        acked = self._ack(entry.entry_id)
        settled = super().process(entry)
        return (
            attrs.evolve(settled, acknowledged=acked) if settled.verdict is DeliveryVerdict.ACK else settled
        )


class TrimPastPending(StreamAdmin):
    """S-STREAM-07: "everything up to what my group has read is done" -- wrong for pending entries
    and for every other group."""

    def safe_trim(self) -> int:
        infos: Any = self.client.xinfo_groups(self.names.stream)
        if not infos:
            return 0
        last = parse_id(infos[0]["last-delivered-id"])
        return self.trim_to((last[0], last[1] + 1))


class DeadLetterWithoutAck(StreamConsumer):
    """S-STREAM-06: two separate calls, and the second one forgotten."""

    def _dead_letter(
        self, entry: InHand, reason: str, outcome: object | None, principal: str | None
    ) -> Settled:
        fields = {
            b"source": entry.entry_id.encode(),
            b"group": self.group.encode(),
            b"reason": reason.encode(),
        }
        self.client.xadd(self.names.dead_letters, {**fields, **entry.fields})  # type: ignore[dict-item]
        return Settled(entry.entry_id, DeliveryVerdict.DEAD_LETTER, outcome, reason, True, principal)


class AckWithoutDeadLetter(StreamConsumer):
    """S-STREAM-06: "refused means done": acknowledged, never copied."""

    def _dead_letter(
        self, entry: InHand, reason: str, outcome: object | None, principal: str | None
    ) -> Settled:
        acked = self._ack(entry.entry_id)
        return Settled(entry.entry_id, DeliveryVerdict.DEAD_LETTER, outcome, reason, acked, principal)


class _TrustingServicer(DeliveryServicer):
    def principal(self, request: Any, context: grpc.ServicerContext) -> str | None:
        return super().principal(request, context) or str(request.producer)


def UnauthenticatedHandler(*args: Any, **kwargs: Any) -> GrpcListener:
    """S-GRPC-03: a listener without the interceptor whose servicer trusts the request's claim."""
    return attrs.evolve(GrpcListener(*args, **kwargs), servicer=_TrustingServicer, interceptors=())


BROKEN_TRANSPORTS: dict[str, tuple[str, str]] = {
    "AckBeforeCommit": ("consumer", "S-STREAM-04"),
    "TrimPastPending": ("admin", "S-STREAM-07"),
    "DeadLetterWithoutAck": ("consumer", "S-STREAM-06"),
    "AckWithoutDeadLetter": ("consumer", "S-STREAM-06"),
    "UnauthenticatedHandler": ("listener", "S-GRPC-03"),
}
