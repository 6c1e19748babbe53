"""Durable request identity (C-PRE-03, C-PRE-07).

The canonical encoding is a sequence of length-prefixed fields (4-byte big-endian length, then the
bytes), so no choice of field values can make two different requests encode alike.

* ``QIMD`` + SHA-256 over ``b"QIMD\\x00" + encoding``: the compact digest written today. The header
  in the hash input separates this digest from any other SHA-256 of the same bytes.
* ``QIMC`` + encoding: the pre-upgrade full identity, still read and compared byte for byte.
"""

from __future__ import annotations

import hashlib

from model.commit._values import AuthenticatedSend

DIGEST_HEADER = b"QIMD"
LEGACY_HEADER = b"QIMC"
_DOMAIN = DIGEST_HEADER + b"\x00"


def _field(data: bytes) -> bytes:
    """post: len(__return__) == len(data) + 4 and __return__[4:] == data"""
    return len(data).to_bytes(4, "big") + data


def _text(value: str) -> bytes:
    return _field(value.encode("utf-8"))


def canonical_identity(request: AuthenticatedSend) -> bytes:
    """Every identity field, in a fixed order, length-prefixed.

    Absent optional values are encoded with a presence byte so that ``None`` differs from ``""``.
    """
    content = request.content
    parts = [
        _text(request.tenant),
        _text(request.sender),
        _text(request.client_message_id),
        _text(request.device),
        _text(request.conversation),
        _text(content.message_type.value),
        _field(b"\x00") if content.custom_type is None else _field(b"\x01" + content.custom_type.encode()),
        _field(content.body),
        _field(len(request.mentions).to_bytes(4, "big")),
        *(_text(m) for m in request.mentions),
        _field(b"\x00") if request.reply_to is None else _field(b"\x01" + str(request.reply_to).encode()),
    ]
    return b"".join(parts)


def reserve_identity_digest(request: AuthenticatedSend) -> bytes:
    """``QIMD`` header followed by the domain-separated SHA-256 of the canonical identity.

    post: __return__[:4] == b"QIMD" and len(__return__) == 36
    """
    return DIGEST_HEADER + hashlib.sha256(_DOMAIN + canonical_identity(request)).digest()


def legacy_full_identity(request: AuthenticatedSend) -> bytes:
    """The pre-upgrade stored form: ``QIMC`` followed by the full canonical identity."""
    return LEGACY_HEADER + canonical_identity(request)


def identity_matches(stored: bytes, request: AuthenticatedSend) -> bool:
    """Whether a durable identity names exactly this request (C-PRE-03, C-PRE-07).

    An identity with neither header matches nothing: a corrupt identity must never replay an ACK.
    """
    if stored.startswith(DIGEST_HEADER):
        return stored == reserve_identity_digest(request)
    if stored.startswith(LEGACY_HEADER):
        return stored == legacy_full_identity(request)
    return False


def is_well_formed_identity(stored: bytes) -> bool:
    if stored.startswith(DIGEST_HEADER):
        return len(stored) == len(DIGEST_HEADER) + 32
    return stored.startswith(LEGACY_HEADER)
