"""Canonical encoding, digests and derived identities (S-CAT-01, S-ID-01, S-ID-02)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    Canon,
    DecodeError,
    Phase,
    canonical_document,
    command_id_for,
    decode,
    definition_digest,
    derive_id,
    effect_id_for,
    encode,
    result_message_id_for,
    saga_id_for,
)
from tests.model.saga.builders import artifact, step, three_steps

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(st.characters(codec="utf-8")),
    st.binary(),
)
canon_values: st.SearchStrategy[Canon] = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=12
)


@given(canon_values)
def test_s_cat_01_encoding_round_trips(value: Canon) -> None:
    assert decode(encode(value)) == value
    # bool and int must not collapse into each other
    assert type(decode(encode(value))) is type(value)


@given(canon_values, canon_values)
def test_s_cat_01_encoding_is_injective(a: Canon, b: Canon) -> None:
    if encode(a) == encode(b):
        assert type(a) is type(b) and a == b


def test_s_cat_01_encoding_examples() -> None:
    assert encode(None) == b"N"
    assert encode(True) == b"T"
    assert encode(1) == b"I1;"
    assert encode(-12) == b"I-12;"
    assert encode("ab") == b"S2:ab"
    assert encode("é") == b"S2:\xc3\xa9"
    assert encode(b"\x00") == b"B1:\x00"
    assert encode((1, None)) == b"L2:I1;N"


@pytest.mark.parametrize("bad", [b"", b"X", b"I01;", b"I-0;", b"S3:ab", b"L1:", b"NN", b"I1"])
def test_s_cat_01_decode_refuses_non_canonical_bytes(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(bad)


def test_s_cat_01_digest_is_sha256_of_the_canonical_document() -> None:
    art = three_steps()
    assert definition_digest(art) == hashlib.sha256(canonical_document(art)).hexdigest()
    assert definition_digest(three_steps()) == definition_digest(art)


def test_s_cat_01_every_seal_field_changes_the_digest() -> None:
    base = artifact([step("a", "svc-a"), step("b", "svc-b")])
    variants = [
        artifact([step("a", "svc-a"), step("b", "svc-b")], version=2),
        artifact([step("a", "svc-a"), step("b", "svc-b")], tenant="t2"),
        artifact([step("b", "svc-b"), step("a", "svc-a")]),  # order is part of the seal
        artifact([step("a", "svc-b"), step("b", "svc-b")]),
        artifact([step("a", "svc-a", compensation="other"), step("b", "svc-b")]),
        artifact([step("a", "svc-a", timeout_ms=7), step("b", "svc-b")]),
        artifact([step("a", "svc-a", max_attempts=9), step("b", "svc-b")]),
        artifact([step("a", "svc-a", resolve_budget=9), step("b", "svc-b")]),
    ]
    digests = {definition_digest(v) for v in variants} | {definition_digest(base)}
    assert len(digests) == len(variants) + 1


@given(st.text(min_size=1, max_size=5), st.integers(0, 3), st.integers(1, 5), st.integers(1, 5))
def test_s_id_01_effect_id_is_stable_across_attempts(
    saga: str, step_index: int, attempt_a: int, attempt_b: int
) -> None:
    effect = effect_id_for(saga, step_index, Phase.EXECUTE)
    assert effect == effect_id_for(saga, step_index, Phase.EXECUTE)
    assert effect != effect_id_for(saga, step_index, Phase.COMPENSATE)
    assert effect != effect_id_for(saga, step_index + 1, Phase.EXECUTE)
    same_command = command_id_for(effect, attempt_a) == command_id_for(effect, attempt_b)
    assert same_command == (attempt_a == attempt_b)


def test_s_id_02_ids_are_derived_and_distinct() -> None:
    saga = saga_id_for("t1", "checkout", "order-1")
    assert saga == saga_id_for("t1", "checkout", "order-1")
    assert saga != saga_id_for("t1", "checkout", "order-2")
    command = command_id_for(effect_id_for(saga, 0, Phase.EXECUTE), 1)
    message = result_message_id_for(command)
    assert message == result_message_id_for(command)
    assert len({saga, command, message}) == 3
    assert saga.startswith("saga-") and command.startswith("cmd-") and message.startswith("res-")
    assert derive_id("x", "a", "b") != derive_id("x", "ab")
