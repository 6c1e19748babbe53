"""Signed envelopes under rotatable keys (S-STREAM-05, S-STREAM-09)."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    Authentic,
    EnvelopeRefused,
    KeyRing,
    KeyState,
    SignatureProblem,
    SigningKey,
    add_key,
    key_moves_forward,
    retire,
    rotate,
    sign,
    signature_for,
    verify,
)

RING = add_key(KeyRing(), SigningKey("k1", "orchestrator", b"secret-1", KeyState.SIGNING))


def signed(body: bytes = b"body", ring: KeyRing = RING) -> object:
    envelope = sign(ring, "orchestrator", body)
    assert envelope is not None
    return envelope


def test_s_stream_05_only_a_matching_signature_of_an_unretired_key_verifies() -> None:
    envelope = sign(RING, "orchestrator", b"body")
    assert envelope is not None
    assert verify(RING, envelope) == Authentic("orchestrator", "k1")
    cases = {
        SignatureProblem.UNSIGNED: attrs.evolve(envelope, key_id=None, signature=None),
        SignatureProblem.UNKNOWN_KEY: attrs.evolve(envelope, key_id="k9"),
        SignatureProblem.WRONG_PRODUCER: attrs.evolve(envelope, producer="p0"),
        SignatureProblem.BAD_SIGNATURE: attrs.evolve(envelope, body=b"bodY"),
    }
    for problem, forged in cases.items():
        assert verify(RING, forged) == EnvelopeRefused(problem), problem
    assert sign(RING, "p0", b"body") is None  # no key, no signature


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_s_stream_05_the_signature_binds_key_producer_and_body(body: bytes, other: bytes) -> None:
    base = signature_for(b"s", "k1", "orchestrator", body)
    assert (base == signature_for(b"s", "k1", "orchestrator", other)) == (body == other)
    assert base != signature_for(b"s", "k2", "orchestrator", body)
    assert base != signature_for(b"s", "k1", "orchestratorx", body)


def test_s_stream_09_rotation_keeps_the_previous_key_for_verification_until_retired() -> None:
    old = sign(RING, "orchestrator", b"body")
    assert old is not None
    rotated = rotate(RING, "orchestrator", "k2", b"secret-2")
    assert rotated.keys["k1"].state is KeyState.VERIFY_ONLY
    assert verify(rotated, old) == Authentic("orchestrator", "k1")
    fresh = sign(rotated, "orchestrator", b"body")
    assert fresh is not None and fresh.key_id == "k2"
    retired = retire(rotated, "k1")
    assert verify(retired, old) == EnvelopeRefused(SignatureProblem.RETIRED_KEY)
    assert verify(retired, fresh) == Authentic("orchestrator", "k2")
    assert retire(retired, "k2") is retired  # the signing key cannot be retired
    assert rotate(retired, "orchestrator", "k1", b"other") is retired  # ids are never reused
    for before, after in ((RING, rotated), (rotated, retired)):
        assert key_moves_forward(before, after)
    assert not key_moves_forward(retired, rotated)
