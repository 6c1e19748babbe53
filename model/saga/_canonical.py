"""Canonical encoding of contract values, SHA-256 digests and derived identities.

The encoding is the model's own, small enough to re-implement in any backend language:

=========  ==========================================  =========================
value      encoding                                    example
=========  ==========================================  =========================
``None``   ``N``                                       ``N``
``True``   ``T``                                       ``T``
``False``  ``F``                                       ``F``
int        ``I`` decimal ``;``                         ``I-12;``
str        ``S`` byte-length ``:`` UTF-8 bytes         ``S2:ab``
bytes      ``B`` byte-length ``:`` raw bytes           ``B1:\\x00``
tuple      ``L`` item-count ``:`` encoded items        ``L2:I1;N``
=========  ==========================================  =========================

Every form is self-delimiting, so the concatenation of encodings is unambiguous and
``decode(encode(v)) == v`` for every encodable value (S-CAT-01). Decimals are canonical
(no leading zeros, no ``-0``), so one value has exactly one encoding and equal documents
give equal digests.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import ParamSpec, TypeAlias, cast

Canon: TypeAlias = "bool | int | str | bytes | tuple[Canon, ...] | None"

P = ParamSpec("P")

#: Domain tag mixed into every derived identity so ids never collide with digests.
ID_DOMAIN = "ratchet.saga.id/1"


def encode_int(value: int) -> bytes:
    """Encode one integer.

    post: __return__.startswith(b"I") and __return__.endswith(b";")
    post: decode(__return__) == value
    """
    return b"I" + str(value).encode("ascii") + b";"


def frame(tag: bytes, body: bytes) -> bytes:
    """Prefix ``body`` with its tag and byte length (the str/bytes form).

    pre: tag in (b"S", b"B")
    post: __return__.endswith(body)
    post: len(__return__) > len(body) + 1
    """
    return tag + str(len(body)).encode("ascii") + b":" + body


def encode(value: Canon) -> bytes:
    """Encode ``value`` canonically (S-CAT-01)."""
    if value is None:
        return b"N"
    if value is True:
        return b"T"
    if value is False:
        return b"F"
    if isinstance(value, int):
        return encode_int(value)
    if isinstance(value, str):
        return frame(b"S", value.encode("utf-8"))
    if isinstance(value, bytes):
        return frame(b"B", value)
    return b"L" + str(len(value)).encode("ascii") + b":" + b"".join(encode(v) for v in value)


class DecodeError(ValueError):
    """Bytes that no ``encode`` call can produce (only raised by ``decode``)."""


def _read_decimal(data: bytes, pos: int, stop: bytes) -> tuple[int, int]:
    end = data.find(stop, pos)
    if end < 0:
        raise DecodeError(f"unterminated number at {pos}")
    text = data[pos:end].decode("ascii", errors="strict")
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdigit() or not digits.isascii():
        raise DecodeError(f"bad number {text!r}")
    if (len(digits) > 1 and digits[0] == "0") or text == "-0":
        raise DecodeError(f"non-canonical number {text!r}")
    return int(text), end + 1


def _decode_at(data: bytes, pos: int) -> tuple[Canon, int]:
    if pos >= len(data):
        raise DecodeError("truncated")
    tag = data[pos : pos + 1]
    pos += 1
    if tag == b"N":
        return None, pos
    if tag == b"T":
        return True, pos
    if tag == b"F":
        return False, pos
    if tag == b"I":
        return _read_decimal(data, pos, b";")
    if tag in (b"S", b"B", b"L"):
        size, pos = _read_decimal(data, pos, b":")
        if size < 0:
            raise DecodeError("negative length")
        if tag == b"L":
            items: list[Canon] = []
            for _ in range(size):
                item, pos = _decode_at(data, pos)
                items.append(item)
            return tuple(items), pos
        body = data[pos : pos + size]
        if len(body) != size:
            raise DecodeError("truncated body")
        return (body.decode("utf-8") if tag == b"S" else body), pos + size
    raise DecodeError(f"unknown tag {tag!r}")


def decode(data: bytes) -> Canon:
    """Inverse of ``encode``; raises ``DecodeError`` for bytes ``encode`` never produces.

    Only tests and backends auditing stored documents call it; the model itself never
    needs to decode.
    """
    value, end = _decode_at(data, 0)
    if end != len(data):
        raise DecodeError("trailing bytes")
    return value


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Canon) -> str:
    """SHA-256 of the canonical encoding of ``value``."""
    return sha256_hex(encode(value))


def derive_id(kind: str, *parts: Canon) -> str:
    """A stable identity ``<kind>-<24 hex>`` derived from ``parts`` (S-ID-01).

    Identities are functions of the contract facts they name, so every retry, replay and
    backend derives the same id for the same fact.
    """
    return f"{kind}-{digest_of((ID_DOMAIN, kind, parts))[:24]}"


#: An id function of the model (``saga_id_for``, ``command_id_for``...) remembered per arguments:
#: the harness and the runtime derive the same few ids thousands of times a run (a twentieth of a
#: memory/saga run went to hashing them again). Safe: the functions are pure, their arguments
#: immutable, and ``typed`` keeps ``1`` and ``True`` (which encode differently) apart.
def memoised_id(function: Callable[P, str]) -> Callable[P, str]:
    return cast("Callable[P, str]", functools.lru_cache(maxsize=4096, typed=True)(function))


def is_sha256_hex(text: str) -> bool:
    """True for exactly 64 lower-case hex digits.

    post: (not __return__) or len(text) == 64
    """
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
