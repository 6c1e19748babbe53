"""Stream entry fields <-> ``SignedEnvelope`` (the model's vocabulary), and nothing else.

An entry is a flat hash: ``body`` (the runtime's canonical envelope blob), ``producer`` (the
principal it claims), and when signed ``kid`` and ``sig`` (S-STREAM-05). Dead letters carry the
original fields plus ``source`` (the entry id), ``group`` and ``reason``. Nobody else knows these
names.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.saga import SignedEnvelope

BODY, PRODUCER, KEY_ID, SIGNATURE = b"body", b"producer", b"kid", b"sig"
SOURCE, GROUP, REASON = b"source", b"group", b"reason"


def to_fields(envelope: SignedEnvelope) -> dict[bytes, bytes]:
    fields = {BODY: envelope.body, PRODUCER: envelope.producer.encode()}
    if envelope.key_id is not None and envelope.signature is not None:
        fields[KEY_ID] = envelope.key_id.encode()
        fields[SIGNATURE] = envelope.signature.encode()
    return fields


def from_fields(fields: Mapping[bytes, bytes]) -> SignedEnvelope | None:
    """``None`` for an entry that is no envelope at all (no body or producer, bad text)."""
    body, producer = fields.get(BODY), fields.get(PRODUCER)
    if body is None or producer is None:
        return None
    try:
        key_id = fields[KEY_ID].decode() if KEY_ID in fields else None
        signature = fields[SIGNATURE].decode() if SIGNATURE in fields else None
        return SignedEnvelope(body, producer.decode(), key_id, signature)
    except UnicodeDecodeError:
        return None
