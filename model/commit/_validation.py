"""What the contract accepts: identifier syntax and size limits.

Both boundaries use these: the committer answers with ``CommitError`` kinds (C-PRE-01), a store with
``INVALID_ARGUMENT`` (C-ERR-04), and in both cases nothing is written.
"""

from __future__ import annotations

import re

from model.commit._values import (
    AuthenticatedSend,
    FrozenDeliveryInput,
    HistoryQuery,
    MessageContent,
    MessageType,
    ReserveCandidate,
)

MAX_ID_LENGTH = 64
MAX_BODY_BYTES = 64 * 1024
MAX_MENTIONS = 32
MAX_RECIPIENTS = 10_000
MAX_HISTORY_LIMIT = 100
MAX_HISTORY_BYTES = 1 << 20
MAX_SCAN_ITEMS = 1000
#: Every integer of the contract (sequence numbers, reply ids, timestamps, retention, the expiry
#: ``accepted_at_ms + retention_ms``, anchors, versions) is a signed 64-bit value: at most this.
MAX_INT64 = 2**63 - 1

_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A client message id is what the device made up: letters, digits and ._:- , 1 to 64 of them.
_CLIENT_MESSAGE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_CUSTOM_TYPE = re.compile(r"[a-z][a-z0-9._-]{0,63}")


def is_valid_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def is_valid_client_message_id(value: str) -> bool:
    """C-PRE-01: the syntax of a ClientMessageId.

    post: (not __return__) or (1 <= len(value) <= 64 and value.isascii() and " " not in value)
    """
    return _CLIENT_MESSAGE_ID.fullmatch(value) is not None


def content_problem(content: MessageContent) -> str | None:
    if len(content.body) > MAX_BODY_BYTES:
        return f"body is {len(content.body)} bytes, over {MAX_BODY_BYTES}"
    if content.message_type is MessageType.CUSTOM:
        if content.custom_type is None or _CUSTOM_TYPE.fullmatch(content.custom_type) is None:
            return "a custom message needs a custom_type of [a-z][a-z0-9._-]{0,63}"
    elif content.custom_type is not None:
        return "custom_type is only allowed on custom messages"
    return None


def send_problem(request: AuthenticatedSend) -> str | None:
    """Why a request is out of contract, ignoring the client message id (checked on its own)."""
    for name, value in (
        ("tenant", request.tenant),
        ("sender", request.sender),
        ("device", request.device),
        ("conversation", request.conversation),
    ):
        if not is_valid_id(value):
            return f"{name} must be 1-{MAX_ID_LENGTH} characters of [A-Za-z0-9._-]"
    if len(request.mentions) > MAX_MENTIONS:
        return f"at most {MAX_MENTIONS} mentions"
    if not all(is_valid_id(m) for m in request.mentions):
        return "a mention is not a valid user id"
    if request.reply_to is not None and not 1 <= request.reply_to <= MAX_INT64:
        return "reply_to must be a conversation sequence number, 1..2**63-1"
    return content_problem(request.content)


def request_problem(request: AuthenticatedSend) -> str | None:
    """C-PRE-01, C-ERR-04: why a store must refuse this request, or None. One home for every store."""
    if not is_valid_client_message_id(request.client_message_id):
        return "client message id is not valid"
    return send_problem(request)


def delivery_problem(request: AuthenticatedSend, delivery: FrozenDeliveryInput) -> str | None:
    if delivery.conversation != request.conversation:
        return "delivery input is for another conversation"
    if len(delivery.recipients) > MAX_RECIPIENTS:
        return f"at most {MAX_RECIPIENTS} recipients"
    if not all(is_valid_id(r) for r in delivery.recipients):
        return "a recipient is not a valid user id"
    if not (isinstance(delivery.retention_ms, int) and isinstance(delivery.membership_version, int)):
        return "retention_ms and membership_version are integers"  # C-ERR-04: 720000.0 is not one
    if not (0 < delivery.retention_ms <= MAX_INT64 and 0 <= delivery.membership_version <= MAX_INT64):
        return "retention_ms must be 1..2**63-1 and membership_version 0..2**63-1"
    return None


def candidate_problem(candidate: ReserveCandidate, delivery: FrozenDeliveryInput) -> str | None:
    """C-ERR-04: the acceptance time and the history expiry it implies are 64-bit timestamps."""
    if not isinstance(candidate.accepted_at_ms, int) or not 0 <= candidate.accepted_at_ms <= MAX_INT64:
        return "accepted_at_ms must be 0..2**63-1"
    if candidate.accepted_at_ms + delivery.retention_ms > MAX_INT64:
        return "accepted_at_ms + retention_ms (the history expiry) must be at most 2**63-1"
    return None


def history_query_problem(query: HistoryQuery) -> str | None:
    if not (is_valid_id(query.tenant) and is_valid_id(query.conversation) and is_valid_id(query.actor)):
        return "tenant, conversation and actor must be valid ids"
    if not 1 <= query.limit <= MAX_HISTORY_LIMIT:
        return f"limit must be 1..{MAX_HISTORY_LIMIT}"
    if not 1 <= query.max_bytes <= MAX_HISTORY_BYTES:
        return f"max_bytes must be 1..{MAX_HISTORY_BYTES}"
    if query.anchor is not None and not 0 <= query.anchor <= MAX_INT64:
        return "anchor must be 0..2**63-1"
    if not 0 <= query.as_of_ms <= MAX_INT64:
        return "as_of_ms must be 0..2**63-1"
    return None


def reserve_problem(
    request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
) -> str | None:
    """C-PRE-01, C-ERR-04: why a store must refuse this ``reserve``, or None (the candidate's record
    being the canonical one is checked beside it). One home for every store."""
    return (
        request_problem(request)
        or delivery_problem(request, delivery)
        or candidate_problem(candidate, delivery)
    )
