"""The Redis store's hash codec: values of ``model.commit`` to hash fields and back.

Commit hash, current format (field names are one byte to keep the committed form small)::

    s  stage digit: 1 RESERVED, 2 RECORDED, 3 OUTBOXED (absent: the compact COMMITTED form)
    i  durable request identity (QIMD digest; QIMC only in the legacy format)
    v  conversation id
    c  coordinates packed as ``<message_seq>:<conversation_seq>:<accepted_at_ms>``
    p  publication stream            e  publication entry id        (from OUTBOXED on)
    r  record without body (JSON)    b  body (raw bytes)
    d  frozen delivery input (JSON)  t  reserve token              (in flight only)
    f  intent fingerprint: SHA-256 of ``r``, ``b`` and ``d`` (``intent_encoding``; in flight only)

The stage-transition scripts compare the caller's intent with the reserved one by identity,
coordinates, conversation and fingerprint (C-POST-03), so a transition sends 32 bytes instead of
the record, body and delivery input; ``put_record`` copies the stored body into history. An
in-flight hash written before fingerprints existed has no ``f``: the script then asks for the
full intent (``need-intent``) and compares ``r b d`` byte for byte, as it used to.

At COMMITTED the script deletes the key and writes back the compact form (C-PRE-10)::

    i  identity    v  conversation
    c  ``<message_seq>:<conversation_seq>:<accepted_at_ms>:<entry id>``
    p  publication stream, only when it is not ``DEFAULT_STREAM`` (the outbox's one stream)

With every value at most 64 bytes Redis keeps the hash ``listpack``-encoded; a hash that ever held
a longer value stays ``hashtable`` even after HDEL, so the key is re-created, never trimmed. The
stage field goes too: only a committed commit is ever compact. ``MEMORY USAGE`` counts the
listpack, the key name and fixed overhead, so it grows with namespace and id lengths: on Redis 7.0
with a 10-character namespace, 168 B for ids ``t1``/``alice``/``m-1``/``c1`` and 248 B for
11/13/13-character tenant/sender/conversation ids and a UUID client message id (an 80-byte key
name); ``conformance bench`` measures both. The compact form of the first release (``c`` with
three parts, the entry id in ``e`` and the stream always in ``p``) is still read.

The pre-upgrade full format (``LEGACY_*``), still read: a committed hash holding the whole record
and the QIMC full identity (C-PRE-07) under long field names. It is never written any more.

Anything that does not decode raises ``MessageStoreError(CORRUPT)``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs

from model.commit import (
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryEntry,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageContent,
    MessageCoordinates,
    MessageRecord,
    MessageStoreError,
    MessageType,
    OutboxPublication,
    StoreErrorKind,
)

# --- current format field names ---
STAGE = b"s"
IDENTITY = b"i"
CONVERSATION = b"v"
COORDINATES = b"c"
STREAM = b"p"
ENTRY_ID = b"e"
RECORD = b"r"
BODY = b"b"
DELIVERY = b"d"
TOKEN = b"t"
FINGERPRINT = b"f"

# The outbox's one stream per namespace (``RedisOutbox.stream``); the compact form omits it.
DEFAULT_STREAM = "outbox"

# --- history data hash: one field of each kind per conversation sequence ---
HISTORY_META = b"m"  # m<seq>: the entry without its body (JSON)
HISTORY_BODY = b"b"  # b<seq>: the body, raw
HISTORY_EXPIRY = b"x"  # x<seq>: accepted_at_ms + retention_ms, written at COMMITTED

# --- pre-upgrade full format field names ---
LEGACY_STAGE = b"stage"
LEGACY_COMMITTED = b"committed"
LEGACY_IDENTITY = b"identity"
LEGACY_CONVERSATION = b"conversation"
LEGACY_MESSAGE_SEQ = b"message_seq"
LEGACY_CONVERSATION_SEQ = b"conversation_seq"
LEGACY_ACCEPTED_AT = b"accepted_at_ms"
LEGACY_STREAM = b"stream"
LEGACY_ENTRY_ID = b"entry_id"
# The legacy hash also held device, message_type, custom_type, body, mentions, reply_to,
# recipients, membership_version and retention_ms; a committed replay never needs them.


def text(value: str) -> bytes:
    """Caller strings to bytes; never fails, so a malformed value cannot escape as UnicodeError."""
    return value.encode("utf-8", "surrogatepass")


def _str(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


@contextmanager
def decoding(what: str) -> Iterator[None]:
    """Turn any decoding failure into CORRUPT, without the stored bytes in the detail."""
    try:
        yield
    except MessageStoreError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        raise MessageStoreError(StoreErrorKind.CORRUPT, f"stored {what} cannot be decoded") from None


# One encoder for every stored JSON value: ``json.dumps`` with options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _canonical_json(value: object) -> bytes:
    return _CANONICAL.encode(value).encode()


def _typed(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise TypeError("unexpected type")
    return value


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else _typed(value, kind)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(_typed(item, str) for item in _typed(value, list))


# --- coordinates and publication -----------------------------------------------------------


def coordinates_to_field(coordinates: MessageCoordinates) -> bytes:
    return f"{coordinates.message_seq}:{coordinates.conversation_seq}:{coordinates.accepted_at_ms}".encode()


def coordinates_from_field(raw: bytes) -> MessageCoordinates:
    # try/except, not ``decoding``: every reserve and load decodes coordinates.
    try:
        message_seq, conversation_seq, accepted_at = raw.split(b":")
        return MessageCoordinates(int(message_seq), int(conversation_seq), int(accepted_at))
    except (ValueError, TypeError, AttributeError):
        raise MessageStoreError(StoreErrorKind.CORRUPT, "stored coordinates cannot be decoded") from None


def committed_coordinates_to_field(coordinates: MessageCoordinates, entry_id: bytes) -> bytes:
    """The compact form's ``c``: the coordinates with the publication entry id appended."""
    return coordinates_to_field(coordinates) + b":" + entry_id


def split_committed_coordinates(raw: bytes) -> tuple[bytes, bytes | None]:
    """A compact ``c`` to (coordinates field, entry id); no entry id in the first release's form."""
    parts = raw.split(b":", 3)
    if len(parts) == 4:
        return b":".join(parts[:3]), parts[3]
    return raw, None


def publication_to_fields(publication: OutboxPublication) -> tuple[bytes, bytes]:
    return text(publication.stream), text(publication.entry_id)


def publication_from_fields(stream: bytes, entry_id: bytes) -> OutboxPublication:
    with decoding("publication"):
        return OutboxPublication(_str(stream), _str(entry_id))


def pack_publication(publication: OutboxPublication) -> bytes:
    """One script argument or reply part: ``<len(entry)>:<entry><stream>`` (either may hold ``:``)."""
    stream, entry_id = publication_to_fields(publication)
    return b"%d:%s%s" % (len(entry_id), entry_id, stream)


def unpack_publication(raw: bytes) -> OutboxPublication:
    with decoding("publication"):
        length, colon, rest = raw.partition(b":")
        size = int(length)
        if not colon or size > len(rest):
            raise ValueError("not a packed publication")
        return publication_from_fields(rest[size:], rest[:size])


def stage_reached(
    raw: bytes, sent: OutboxPublication | None = None
) -> tuple[CommitStage, OutboxPublication | None]:
    """A transition script's answer: the stage digit, then the durable publication if any (when it
    is the one ``sent``, that very object: the script refuses any other once one is durable)."""
    try:
        stage = CommitStage(int(raw[:1]))
    except ValueError:
        raise MessageStoreError(StoreErrorKind.CORRUPT, "stored commit cannot be decoded") from None
    if len(raw) == 1:
        return stage, None
    if sent is not None and raw[1:] == pack_publication(sent):
        return stage, sent
    return stage, unpack_publication(raw[1:])


# --- record and delivery ---------------------------------------------------------------------


def record_to_field(record: MessageRecord) -> bytes:
    """Everything of the record but the body, which is stored raw beside it."""
    content = record.content
    return _canonical_json(
        {
            "k": list(record.key.sort_key()),
            "v": record.conversation,
            "dv": record.device,
            "ty": content.message_type.value,
            "ct": content.custom_type,
            "mn": list(record.mentions),
            "rp": record.reply_to,
        }
    )


def record_from_fields(raw: bytes, body: bytes) -> MessageRecord:
    with decoding("record"):
        data = json.loads(raw)
        tenant, sender, cmid = _strings(data["k"])
        return MessageRecord(
            key=CommitKey(tenant, sender, cmid),
            conversation=_typed(data["v"], str),
            device=_typed(data["dv"], str),
            content=MessageContent(MessageType(data["ty"]), bytes(body), _optional(data["ct"], str)),
            mentions=_strings(data["mn"]),
            reply_to=_optional(data["rp"], int),
        )


def delivery_to_field(delivery: FrozenDeliveryInput) -> bytes:
    return _canonical_json(
        {
            "v": delivery.conversation,
            "rc": list(delivery.recipients),
            "mv": delivery.membership_version,
            "rt": delivery.retention_ms,
        }
    )


def delivery_from_field(raw: bytes) -> FrozenDeliveryInput:
    with decoding("delivery input"):
        data = json.loads(raw)
        return FrozenDeliveryInput(
            conversation=_typed(data["v"], str),
            recipients=_strings(data["rc"]),
            membership_version=_typed(data["mv"], int),
            retention_ms=_typed(data["rt"], int),
        )


@attrs.frozen
class IntentEncoding:
    """The stored encodings of an intent's record and delivery input, and their fingerprint."""

    record: bytes
    delivery: bytes
    fingerprint: bytes


@functools.lru_cache(maxsize=256)
def intent_encoding(record: MessageRecord, delivery: FrozenDeliveryInput) -> IntentEncoding:
    """Encoded once per intent: reserve, each transition and publish of one commit share it.

    The values are frozen, so the cache can never hand back a stale encoding; a hit costs hashing
    the record and delivery input (their fields' hashes are cached by Python), far less than the
    JSON. The fingerprint is length-prefixed so no two (record, body, delivery) triples collide.
    """
    record_field = record_to_field(record)
    delivery_field = delivery_to_field(delivery)
    body = record.content.body
    digest = hashlib.sha256(b"RFP1\x00")
    for part in (record_field, body, delivery_field):
        digest.update(b"%d:" % len(part))
        digest.update(part)
    return IntentEncoding(record_field, delivery_field, digest.digest())


# --- a stored commit, either format ------------------------------------------------------------


@attrs.frozen
class StoredCommit:
    """A commit hash decoded: what ``model.commit.CommitEntry`` holds, plus the reserve token."""

    stage: CommitStage
    identity: bytes
    conversation: ConversationId
    coordinates: MessageCoordinates
    intent: CommitIntent | None  # None at COMMITTED (C-PRE-10)
    publication: OutboxPublication | None
    token: bytes | None

    def message(self, key: CommitKey) -> CommittedMessage:
        if self.publication is None:
            raise MessageStoreError(StoreErrorKind.CORRUPT, "committed without a publication", key)
        return CommittedMessage(key, self.conversation, self.coordinates, self.publication)

    def loaded(self, key: CommitKey) -> LoadedCommit:
        if self.stage is CommitStage.COMMITTED:
            return LoadedCommitted(self.message(key))
        assert self.intent is not None  # commit_from_hash guarantees it for in-flight stages
        return LoadedInFlight(self.intent, self.stage, self.publication)


def commit_from_hash(key: CommitKey, fields: Mapping[bytes, bytes]) -> StoredCommit | None:
    """Decode a commit hash in the current or the legacy format; ``None`` for an absent key."""
    if not fields:
        return None
    if LEGACY_STAGE in fields:
        return _legacy_from_hash(fields)
    with decoding("commit"):
        if STAGE in fields:
            stage = CommitStage(int(fields[STAGE]))
            if stage is CommitStage.COMMITTED:
                raise ValueError("a committed commit is stored in the compact form")
        elif RECORD in fields:
            raise ValueError("an in-flight commit without a stage")
        else:
            stage = CommitStage.COMMITTED
        coordinates_raw, stream, entry_id = fields[COORDINATES], fields.get(STREAM), fields.get(ENTRY_ID)
        if stage is CommitStage.COMMITTED:
            coordinates_raw, packed_entry = split_committed_coordinates(coordinates_raw)
            if packed_entry is not None:
                if entry_id is not None:
                    raise ValueError("two entry ids")
                entry_id = packed_entry
            if entry_id is not None and stream is None:
                stream = text(DEFAULT_STREAM)
        coordinates = coordinates_from_field(coordinates_raw)
        if (stream is None) != (entry_id is None):
            raise ValueError("half a publication")
        publication = None
        if stream is not None and entry_id is not None:
            publication = publication_from_fields(stream, entry_id)
        if (publication is None) != (stage.rank < CommitStage.OUTBOXED.rank):
            raise ValueError("publication and stage disagree")
        intent = None
        if stage is not CommitStage.COMMITTED:
            intent = CommitIntent(
                key=key,
                identity=bytes(fields[IDENTITY]),
                coordinates=coordinates,
                record=record_from_fields(fields[RECORD], fields[BODY]),
                delivery=delivery_from_field(fields[DELIVERY]),
            )
        return StoredCommit(
            stage=stage,
            identity=bytes(fields[IDENTITY]),
            conversation=_str(fields[CONVERSATION]),
            coordinates=coordinates,
            intent=intent,
            publication=publication,
            token=fields.get(TOKEN),
        )


def _legacy_from_hash(fields: Mapping[bytes, bytes]) -> StoredCommit:
    with decoding("legacy commit"):
        if fields[LEGACY_STAGE] != LEGACY_COMMITTED:
            raise ValueError("the legacy format only ever held committed messages")
        return StoredCommit(
            stage=CommitStage.COMMITTED,
            identity=bytes(fields[LEGACY_IDENTITY]),
            conversation=_str(fields[LEGACY_CONVERSATION]),
            coordinates=MessageCoordinates(
                int(fields[LEGACY_MESSAGE_SEQ]),
                int(fields[LEGACY_CONVERSATION_SEQ]),
                int(fields[LEGACY_ACCEPTED_AT]),
            ),
            intent=None,
            publication=publication_from_fields(fields[LEGACY_STREAM], fields[LEGACY_ENTRY_ID]),
            token=None,
        )


def hash_from_reply(flat: list[Any]) -> dict[bytes, bytes]:
    """An HGETALL reply as a flat list (as scripts return it) to a mapping."""
    with decoding("commit"):
        if len(flat) % 2:
            raise ValueError("odd field list")
        return {bytes(flat[n]): bytes(flat[n + 1]) for n in range(0, len(flat), 2)}


# --- history ------------------------------------------------------------------------------


def history_meta_to_field(intent: CommitIntent) -> bytes:
    """The history entry of ``intent`` except its body (stored raw as ``b<seq>``)."""
    content = intent.record.content
    return _canonical_json(
        {
            "c": coordinates_to_field(intent.coordinates).decode(),
            "s": intent.key.sender,
            "ty": content.message_type.value,
            "ct": content.custom_type,
            "rp": intent.record.reply_to,
        }
    )


def history_entry_from_fields(meta: bytes, body: bytes) -> HistoryEntry:
    with decoding("history entry"):
        data = json.loads(meta)
        return HistoryEntry(
            coordinates=coordinates_from_field(_typed(data["c"], str).encode()),
            sender=_typed(data["s"], str),
            message_type=MessageType(data["ty"]),
            custom_type=_optional(data["ct"], str),
            body=bytes(body),
            reply_to=_optional(data["rp"], int),
        )


# --- outbox ---------------------------------------------------------------------------------


def outbox_event_fields(intent: CommitIntent) -> list[bytes]:
    """The stream entry a publication appends, as field/value pairs: the frozen intent's record
    (key and conversation included), body, delivery input (recipients) and coordinates, in the
    same encodings as the commit hash, so nothing is encoded twice."""
    encoding = intent_encoding(intent.record, intent.delivery)
    return [
        COORDINATES, coordinates_to_field(intent.coordinates),
        RECORD, encoding.record,
        BODY, intent.record.content.body,
        DELIVERY, encoding.delivery,
    ]  # fmt: skip


def outbox_entry_key(fields: Mapping[bytes, bytes]) -> CommitKey:
    """The commit key a stream entry publishes: from its record (``r``; ``record`` in the entries
    of the first release, which also carried it alone under ``key``)."""
    with decoding("outbox entry"):
        raw = fields.get(RECORD) or fields[b"record"]
        tenant, sender, cmid = _strings(json.loads(raw)["k"])
        return CommitKey(tenant, sender, cmid)
