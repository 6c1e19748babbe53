"""What the transport suite on nasaga's connector shares: names, planted entries, nasaga's
signature and trim frontier, the target and the gate's targets (machine: ``_nasaga.py``)."""

from __future__ import annotations

import hashlib
import hmac

from conformance.transport import _faults as f
from model import saga as m

GROUP, AUDIT, OWNER, STEP = "work", "audit", "p0", "reserve"
CONSUMERS = ("c1", "c2")
SECRET = b"secret-k1"
#: how -> (fault kind, nasaga's dead-letter reason)
PLANTED = {
    "unsigned": (f.UNSIGNED_ENVELOPE, "saga_stream_signature_missing"),
    "forged": (f.FORGED_ENVELOPE, "saga_stream_signature_invalid"),
    "old_key": (f.OLD_KEY_ENVELOPE, "saga_stream_signature_key_unknown"),
    "poison": (f.POISON, "saga_command_payload_undecodable"),
}
DECISIONS = {"succeed": m.Decision.SUCCEED, "reject": m.Decision.REJECT, "fail": m.Decision.TRANSIENT_FAILURE}
#: Fault kinds of the suite nasaga's connector cannot be put through, and why.
NASAGA_LACKS = {
    f.CONSUMER_KILLED.name: "poll_once has no instant between COMMIT and XACK to stop at",
    f.KEY_ROTATED.name: "a consumer's keyring is frozen in its configuration",
    **{
        k.name: "a Redis Streams backend; nasaga's gRPC transport is backend nasaga-grpc"
        for k in f.GRPC_FAULTS
    },
}


def nasaga_signature(key: bytes, stream: str, event_id: str, event: str, payload: bytes) -> str:
    """The entry signature nasaga's consumer verifies: HMAC-SHA256 over each field prefixed with
    its length as 8 big-endian bytes (stream, event id, event type, payload, "no traceparent")."""
    fields = [stream.encode(), event_id.encode(), event.encode(), payload, b"0", b""]
    message = b"".join(len(x).to_bytes(8, "big") + x for x in fields)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def nasaga_frontier(stream: m.DeliveryStream) -> int:
    """nasaga's trim frontier: per group its smallest pending entry, else its last-delivered one
    (kept, N-45); the minimum over groups. ``XTRIM MINID`` removes the entries below it."""
    return min((min(g.pending) if g.pending else g.last_delivered for g in stream.groups.values()), default=0)
