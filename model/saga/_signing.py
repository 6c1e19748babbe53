"""Signed envelopes on a shared log: HMAC-SHA256 under rotatable keys (S-STREAM-05, S-STREAM-09).

A stream carries no transport identity of its own (anyone who may ``XADD`` may write anything),
so the principal of an entry is proved by its signature: each key belongs to one producer, and
an entry verifies only under a key of the producer it names. The signed text is the canonical
encoding of ``("ratchet.transport.signature/1", key_id, producer, body)`` (``_canonical``), so key
id and producer cannot be swapped without breaking the signature. HMAC is pure computation; the
model does it itself and compares in constant time.

A key is ``SIGNING`` (the producer's current key; exactly one per producer), ``VERIFY_ONLY`` (the
previous key after a rotation: entries already on the log still verify) or ``RETIRED`` (verifies
nothing). Rotation and retirement only move keys forward along that order.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._canonical import encode

_SIGNATURE_TAG = "ratchet.transport.signature/1"


class KeyState(enum.Enum):
    SIGNING = "signing"
    VERIFY_ONLY = "verify_only"
    RETIRED = "retired"


_KEY_RANK = {KeyState.SIGNING: 0, KeyState.VERIFY_ONLY: 1, KeyState.RETIRED: 2}


@attrs.frozen
class SigningKey:
    key_id: str
    producer: str
    secret: bytes = attrs.field(repr=False)
    state: KeyState


@attrs.frozen
class KeyRing:
    keys: Mapping[str, SigningKey] = attrs.field(factory=dict)

    def signing_key(self, producer: str) -> SigningKey | None:
        return next(
            (k for k in self.keys.values() if k.producer == producer and k.state is KeyState.SIGNING), None
        )


@attrs.frozen
class SignedEnvelope:
    """What travels: the body, the producer it claims, and (when signed) key id and signature."""

    body: bytes
    producer: str
    key_id: str | None
    signature: str | None


class SignatureProblem(enum.Enum):
    UNSIGNED = "unsigned"
    UNKNOWN_KEY = "unknown_key"
    RETIRED_KEY = "retired_key"
    WRONG_PRODUCER = "wrong_producer"
    BAD_SIGNATURE = "bad_signature"


@attrs.frozen
class Authentic:
    producer: str
    key_id: str


@attrs.frozen
class EnvelopeRefused:
    """Refused before any handler: dead-lettered, claims nothing (S-STREAM-05, S-DLV-03)."""

    problem: SignatureProblem


Verification: TypeAlias = Authentic | EnvelopeRefused


def signature_for(secret: bytes, key_id: str, producer: str, body: bytes) -> str:
    """Lower-case hex HMAC-SHA256 of the canonical signed text."""
    text = encode((_SIGNATURE_TAG, key_id, producer, body))
    return hmac.new(secret, text, hashlib.sha256).hexdigest()


def sign(ring: KeyRing, producer: str, body: bytes) -> SignedEnvelope | None:
    """``body`` signed with the producer's signing key; ``None`` when it has none."""
    key = ring.signing_key(producer)
    if key is None:
        return None
    return SignedEnvelope(body, producer, key.key_id, signature_for(key.secret, key.key_id, producer, body))


def verify(ring: KeyRing, envelope: SignedEnvelope) -> Verification:
    """Authentic only under a known, unretired key of the named producer with a matching
    signature; anything else is refused before the handler (S-STREAM-05)."""
    if envelope.key_id is None or envelope.signature is None:
        return EnvelopeRefused(SignatureProblem.UNSIGNED)
    key = ring.keys.get(envelope.key_id)
    if key is None:
        return EnvelopeRefused(SignatureProblem.UNKNOWN_KEY)
    if key.state is KeyState.RETIRED:
        return EnvelopeRefused(SignatureProblem.RETIRED_KEY)
    if key.producer != envelope.producer:
        return EnvelopeRefused(SignatureProblem.WRONG_PRODUCER)
    expected = signature_for(key.secret, key.key_id, envelope.producer, envelope.body)
    if not hmac.compare_digest(expected, envelope.signature):
        return EnvelopeRefused(SignatureProblem.BAD_SIGNATURE)
    return Authentic(envelope.producer, key.key_id)


def add_key(ring: KeyRing, key: SigningKey) -> KeyRing:
    """A key joins the ring; an id already present keeps its first value (keys are immutable)."""
    if key.key_id in ring.keys:
        return ring
    return attrs.evolve(ring, keys={**ring.keys, key.key_id: key})


def rotate(ring: KeyRing, producer: str, key_id: str, secret: bytes) -> KeyRing:
    """``key_id`` becomes the producer's signing key; the previous one stays for verification,
    so entries already on the log still verify (S-STREAM-09). A used id changes nothing."""
    if key_id in ring.keys:
        return ring
    keys = {
        k: attrs.evolve(v, state=KeyState.VERIFY_ONLY)
        if v.producer == producer and v.state is KeyState.SIGNING
        else v
        for k, v in ring.keys.items()
    }
    keys[key_id] = SigningKey(key_id, producer, secret, KeyState.SIGNING)
    return attrs.evolve(ring, keys=keys)


def retire(ring: KeyRing, key_id: str) -> KeyRing:
    """A verify-only key stops verifying (S-STREAM-09); the signing key and unknown ids stay."""
    key = ring.keys.get(key_id)
    if key is None or key.state is not KeyState.VERIFY_ONLY:
        return ring
    return attrs.evolve(ring, keys={**ring.keys, key_id: attrs.evolve(key, state=KeyState.RETIRED)})


def key_moves_forward(before: KeyRing, after: KeyRing) -> bool:
    """No key went back (retired to verifying, verifying to signing) or changed its secret."""
    return all(
        k in after.keys
        and after.keys[k].secret == v.secret
        and _KEY_RANK[after.keys[k].state] >= _KEY_RANK[v.state]
        for k, v in before.keys.items()
    )
