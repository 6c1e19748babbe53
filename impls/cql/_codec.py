"""Rows of the CQL backend to and from contract values. Anything undecodable is CORRUPT.

The intent body (record facts beyond the key, plus the frozen delivery input) is one blob column,
so COMMITTED can drop it with a single ``intent = null``. The blob is a version byte followed by
length-prefixed fields in a fixed order; equal intents always encode to equal bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator

import attrs

from impls.api import OutboxEntry
from impls.cql._bridge import Row
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
    is_well_formed_identity,
)

_INTENT_VERSION = 1
_LENGTH = struct.Struct(">I")
_INT = struct.Struct(">q")


class _Corrupt(Exception):
    """Raised inside the decoders; leaves this module as MessageStoreError(CORRUPT)."""


def _corrupt(what: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(StoreErrorKind.CORRUPT, f"stored {what} cannot be decoded", key)


# --- the intent blob ---------------------------------------------------------------------------


def _encode_text(out: list[bytes], value: str) -> None:
    data = value.encode("utf-8")
    out.append(_LENGTH.pack(len(data)))
    out.append(data)


def _encode_optional_text(out: list[bytes], value: str | None) -> None:
    out.append(b"\x00" if value is None else b"\x01")
    if value is not None:
        _encode_text(out, value)


def _encode_int(out: list[bytes], value: int) -> None:
    out.append(_INT.pack(value))


def _encode_texts(out: list[bytes], values: tuple[str, ...]) -> None:
    out.append(_LENGTH.pack(len(values)))
    for value in values:
        _encode_text(out, value)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def take(self, size: int) -> bytes:
        end = self._at + size
        if end > len(self._data):
            raise _Corrupt
        chunk = self._data[self._at : end]
        self._at = end
        return chunk

    def flag(self) -> bool:
        byte = self.take(1)
        if byte not in (b"\x00", b"\x01"):
            raise _Corrupt
        return byte == b"\x01"

    def length(self) -> int:
        (value,) = _LENGTH.unpack(self.take(_LENGTH.size))
        return int(value)

    def blob(self) -> bytes:
        return self.take(self.length())

    def text(self) -> str:
        return self.blob().decode("utf-8")

    def optional_text(self) -> str | None:
        return self.text() if self.flag() else None

    def integer(self) -> int:
        (value,) = _INT.unpack(self.take(_INT.size))
        return int(value)

    def texts(self) -> tuple[str, ...]:
        return tuple(self.text() for _ in range(self.length()))

    def finish(self) -> None:
        if self._at != len(self._data):
            raise _Corrupt


def intent_body_to_blob(intent: CommitIntent) -> bytes:
    """The intent's record and delivery facts; key, identity and coordinates are columns."""
    record, delivery, content = intent.record, intent.delivery, intent.record.content
    out = [bytes([_INTENT_VERSION])]
    _encode_text(out, record.device)
    _encode_text(out, content.message_type.value)
    _encode_optional_text(out, content.custom_type)
    out.append(_LENGTH.pack(len(content.body)))
    out.append(content.body)
    _encode_texts(out, record.mentions)
    out.append(b"\x00" if record.reply_to is None else b"\x01")
    if record.reply_to is not None:
        _encode_int(out, record.reply_to)
    _encode_text(out, delivery.conversation)
    _encode_texts(out, delivery.recipients)
    _encode_int(out, delivery.membership_version)
    _encode_int(out, delivery.retention_ms)
    return b"".join(out)


def _intent_from_blob(
    key: CommitKey,
    identity: bytes,
    conversation: ConversationId,
    coordinates: MessageCoordinates,
    blob: bytes,
) -> CommitIntent:
    reader = _Reader(blob)
    if reader.take(1) != bytes([_INTENT_VERSION]):
        raise _Corrupt
    device = reader.text()
    message_type = MessageType(reader.text())
    custom_type = reader.optional_text()
    body = reader.blob()
    mentions = reader.texts()
    reply_to = reader.integer() if reader.flag() else None
    delivery = FrozenDeliveryInput(
        conversation=reader.text(),
        recipients=reader.texts(),
        membership_version=reader.integer(),
        retention_ms=reader.integer(),
    )
    reader.finish()
    record = MessageRecord(
        key=key,
        conversation=conversation,
        device=device,
        content=MessageContent(message_type, body, custom_type),
        mentions=mentions,
        reply_to=reply_to,
    )
    return CommitIntent(key, identity, coordinates, record, delivery)


# --- typed cells -------------------------------------------------------------------------------


def _cell(row: Row, name: str, kind: type[object]) -> object:
    value = row.get(name)
    if not isinstance(value, kind):
        raise _Corrupt
    return value


def _text(row: Row, name: str) -> str:
    value = _cell(row, name, str)
    assert isinstance(value, str)
    return value


def _optional_text(row: Row, name: str) -> str | None:
    return None if row.get(name) is None else _text(row, name)


def _int(row: Row, name: str) -> int:
    value = row.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Corrupt
    return value


def _optional_int(row: Row, name: str) -> int | None:
    return None if row.get(name) is None else _int(row, name)


def _blob(row: Row, name: str) -> bytes:
    value = row.get(name)
    if value is None:  # the driver returns an empty blob as b"" but a never-written one as None
        raise _Corrupt
    if not isinstance(value, bytes):
        raise _Corrupt
    return value


# --- commit rows -------------------------------------------------------------------------------


@attrs.frozen
class StoredCommit:
    """One decoded commit row. ``intent`` is None exactly when the stage is COMMITTED."""

    key: CommitKey
    stage: CommitStage
    identity: bytes
    conversation: ConversationId
    coordinates: MessageCoordinates
    intent: CommitIntent | None
    publication: OutboxPublication | None
    reserve_token: uuid.UUID | None

    def committed_message(self) -> CommittedMessage:
        assert self.publication is not None
        return CommittedMessage(self.key, self.conversation, self.coordinates, self.publication)

    def loaded(self) -> LoadedCommit:
        if self.stage is CommitStage.COMMITTED:
            return LoadedCommitted(self.committed_message())
        assert self.intent is not None
        return LoadedInFlight(self.intent, self.stage, self.publication)


def intent_to_row(intent: CommitIntent, reserve_token: uuid.UUID) -> dict[str, object]:
    """The columns ``reserve`` writes for a new commit (stage RESERVED)."""
    return {
        "stage": CommitStage.RESERVED.value,
        "identity": intent.identity,
        "conversation": intent.conversation,
        "message_seq": intent.coordinates.message_seq,
        "conversation_seq": intent.coordinates.conversation_seq,
        "accepted_at_ms": intent.coordinates.accepted_at_ms,
        "intent": intent_body_to_blob(intent),
        "reserve_token": reserve_token,
    }


def _publication(row: Row) -> OutboxPublication | None:
    stream, entry = _optional_text(row, "pub_stream"), _optional_text(row, "pub_entry")
    if stream is None and entry is None:
        return None
    if stream is None or entry is None:
        raise _Corrupt
    return OutboxPublication(stream, entry)


def commit_from_row(key: CommitKey, row: Row) -> StoredCommit | None:
    """The commit stored in ``row``; None for a row that holds no commit (a sequence row)."""
    if row.get("stage") is None:
        return None
    try:
        stage = CommitStage(_int(row, "stage"))
        identity = _blob(row, "identity")
        if not is_well_formed_identity(identity):
            raise _Corrupt
        conversation = _text(row, "conversation")
        coordinates = MessageCoordinates(
            message_seq=_int(row, "message_seq"),
            conversation_seq=_int(row, "conversation_seq"),
            accepted_at_ms=_int(row, "accepted_at_ms"),
        )
        publication = _publication(row)
        token = row.get("reserve_token")
        if token is not None and not isinstance(token, uuid.UUID):
            raise _Corrupt
        intent: CommitIntent | None = None
        if stage is not CommitStage.COMMITTED:
            intent = _intent_from_blob(key, identity, conversation, coordinates, _blob(row, "intent"))
        if (publication is None) != (stage.rank < CommitStage.OUTBOXED.rank):
            raise _Corrupt
    except (_Corrupt, ValueError, TypeError, struct.error, UnicodeDecodeError):
        raise _corrupt("commit", key) from None
    return StoredCommit(key, stage, identity, conversation, coordinates, intent, publication, token)


def intent_from_row(key: CommitKey, row: Row) -> CommitIntent | None:
    """The in-flight intent of a commit row; None for a committed or absent commit."""
    stored = commit_from_row(key, row)
    return None if stored is None else stored.intent


def sequence_from_row(row: Row | None) -> int:
    """The last number a sequence row allocated (0 when it was never written)."""
    if row is None or row.get("next_seq") is None:
        return 0
    try:
        value = _int(row, "next_seq")
    except _Corrupt:
        raise _corrupt("sequence") from None
    if value < 0:
        raise _corrupt("sequence")
    return value


# --- history rows ------------------------------------------------------------------------------


def history_entry_to_row(intent: CommitIntent) -> dict[str, object]:
    """The history columns ``put_record`` writes from the intent's record (C-PRE-04)."""
    content = intent.record.content
    return {
        "message_seq": intent.coordinates.message_seq,
        "accepted_at_ms": intent.coordinates.accepted_at_ms,
        "sender": intent.key.sender,
        "message_type": content.message_type.value,
        "custom_type": content.custom_type,
        "body": content.body,
        "reply_to": intent.record.reply_to,
    }


@attrs.frozen
class StoredHistory:
    entry: HistoryEntry
    expires_at_ms: int | None

    def live_at(self, as_of_ms: int) -> bool:
        return self.expires_at_ms is None or self.expires_at_ms > as_of_ms


def expiry_from_row(row: Row) -> tuple[int, int | None]:
    """(conversation_seq, expires_at_ms) of a history row."""
    try:
        return _int(row, "conversation_seq"), _optional_int(row, "expires_at_ms")
    except _Corrupt:
        raise _corrupt("history entry") from None


def history_entry_from_row(row: Row) -> StoredHistory:
    try:
        body = row.get("body")
        if body is None:  # CQL hands back an empty blob as None
            body = b""
        if not isinstance(body, bytes):
            raise _Corrupt
        entry = HistoryEntry(
            coordinates=MessageCoordinates(
                message_seq=_int(row, "message_seq"),
                conversation_seq=_int(row, "conversation_seq"),
                accepted_at_ms=_int(row, "accepted_at_ms"),
            ),
            sender=_text(row, "sender"),
            message_type=MessageType(_text(row, "message_type")),
            custom_type=_optional_text(row, "custom_type"),
            body=body,
            reply_to=_optional_int(row, "reply_to"),
        )
        return StoredHistory(entry, _optional_int(row, "expires_at_ms"))
    except (_Corrupt, ValueError):
        raise _corrupt("history entry") from None


# --- recovery hints and the outbox ------------------------------------------------------------


def hint_key_from_row(row: Row) -> tuple[int, CommitKey]:
    """(accepted_at_ms, key) of a recovery hint."""
    try:
        key = CommitKey(_text(row, "tenant"), _text(row, "sender"), _text(row, "cmid"))
        return _int(row, "accepted_at_ms"), key
    except _Corrupt:
        raise _corrupt("recovery hint") from None


def outbox_event_to_row(intent: CommitIntent) -> dict[str, object]:
    """What the outbox keeps of a published commit: coordinates and the frozen message facts."""
    return {
        "conversation": intent.conversation,
        "message_seq": intent.coordinates.message_seq,
        "conversation_seq": intent.coordinates.conversation_seq,
        "event": intent_body_to_blob(intent),
    }


def publication_from_row(stream: str, row: Row, key: CommitKey) -> OutboxPublication:
    entry_id = row.get("entry_id")
    if not isinstance(entry_id, uuid.UUID):
        raise _corrupt("publication", key)
    return OutboxPublication(stream, str(entry_id))


def outbox_entry_from_row(stream: str, row: Row) -> OutboxEntry:
    """One row of ``Statement.OUTBOX_ENTRIES``: the commit key and its publication."""
    try:
        key = CommitKey(_text(row, "tenant"), _text(row, "sender"), _text(row, "cmid"))
    except _Corrupt:
        raise _corrupt("outbox entry") from None
    return OutboxEntry(key, publication_from_row(stream, row, key))


def rows_by_clustering(rows: tuple[Row, ...]) -> Iterator[tuple[tuple[str, str], Row]]:
    """(sender, cmid) and row, for a multi-row ledger read."""
    for row in rows:
        try:
            yield (_text(row, "sender"), _text(row, "cmid")), row
        except _Corrupt:
            raise _corrupt("commit row") from None
