"""Value types: every noun of the commit contract, frozen.

Types check Python shapes only (str, bytes, int). Whether a value is *acceptable* to the contract
(a well-formed client message id, a body under the size limit) is a contract outcome, decided by
:mod:`model.commit._validation`, so that an invalid request can be represented and answered with a
typed error instead of blowing up at construction.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

TenantId = str
UserId = str
DeviceId = str
ConversationId = str
ClientMessageId = str
TimestampMillis = int


def _canonical_mentions(mentions: Iterable[UserId]) -> tuple[UserId, ...]:
    # Mentions are a set in the contract; one canonical order makes equality and digests agree.
    return tuple(sorted(set(mentions)))


def _canonical_recipients(recipients: Iterable[UserId]) -> tuple[UserId, ...]:
    return tuple(sorted(set(recipients)))


class MessageType(enum.Enum):
    TEXT = "text"
    IMAGE = "image"
    FILE = "file"
    CUSTOM = "custom"


class CommitStage(enum.Enum):
    """Durable stage of one commit. Ordered: absent < RESERVED < RECORDED < OUTBOXED < COMMITTED."""

    RESERVED = 1
    RECORDED = 2
    OUTBOXED = 3
    COMMITTED = 4

    @property
    def rank(self) -> int:
        return self.value


ABSENT_RANK = 0


class HistoryDirection(enum.Enum):
    """Which side of the anchor a history page reads."""

    BEFORE = "before"  # older than the anchor, newest first
    AFTER = "after"  # newer than the anchor, oldest first


@attrs.frozen
class CommitKey:
    """The idempotency key: one client message of one sender in one tenant."""

    tenant: TenantId
    sender: UserId
    client_message_id: ClientMessageId

    def sort_key(self) -> tuple[str, str, str]:
        return (self.tenant, self.sender, self.client_message_id)


@attrs.frozen
class MessageContent:
    message_type: MessageType
    body: bytes
    custom_type: str | None = None


@attrs.frozen
class AuthenticatedSend:
    """A send request whose tenant, sender and device the gateway has already authenticated."""

    tenant: TenantId
    sender: UserId
    device: DeviceId
    conversation: ConversationId
    client_message_id: ClientMessageId
    content: MessageContent
    mentions: tuple[UserId, ...] = attrs.field(default=(), converter=_canonical_mentions)
    reply_to: int | None = None  # conversation sequence number of the message replied to

    @property
    def commit_key(self) -> CommitKey:
        return CommitKey(self.tenant, self.sender, self.client_message_id)


@attrs.frozen
class FrozenDeliveryInput:
    """Delivery facts fixed before reserve; recovery never swaps in current membership (C-PRE-02)."""

    conversation: ConversationId
    recipients: tuple[UserId, ...] = attrs.field(converter=_canonical_recipients)
    membership_version: int
    retention_ms: int  # history expiry is registered at commit as accepted_at_ms + retention_ms


@attrs.frozen
class MessageRecord:
    """The canonical message body fact; ``put_record`` writes exactly this (C-PRE-04)."""

    key: CommitKey
    conversation: ConversationId
    device: DeviceId
    content: MessageContent
    mentions: tuple[UserId, ...]
    reply_to: int | None

    @classmethod
    def from_send(cls, request: AuthenticatedSend) -> MessageRecord:
        return cls(
            key=request.commit_key,
            conversation=request.conversation,
            device=request.device,
            content=request.content,
            mentions=request.mentions,
            reply_to=request.reply_to,
        )


@attrs.frozen
class ReserveCandidate:
    """What the caller proposes for a *new* commit; ignored when the key already exists."""

    record: MessageRecord
    accepted_at_ms: TimestampMillis


@attrs.frozen
class MessageCoordinates:
    """Where a message sits: tenant-wide message number and per-conversation sequence."""

    message_seq: int
    conversation_seq: int
    accepted_at_ms: TimestampMillis


@attrs.frozen
class CommitIntent:
    """Everything recovery needs, persisted by reserve on its own (C-POST-02)."""

    key: CommitKey
    identity: bytes  # durable request identity: QIMD digest (or a legacy QIMC full identity)
    coordinates: MessageCoordinates
    record: MessageRecord
    delivery: FrozenDeliveryInput

    @property
    def conversation(self) -> ConversationId:
        return self.record.conversation


@attrs.frozen
class OutboxPublication:
    """The outbox's durable acknowledgement of one publication."""

    stream: str
    entry_id: str


@attrs.frozen
class CommittedMessage:
    """The one and only basis of a SEND_ACK (C-POST-10)."""

    key: CommitKey
    conversation: ConversationId
    coordinates: MessageCoordinates
    publication: OutboxPublication


@attrs.frozen
class ReserveCreated:
    """reserve made a new commit at RESERVED with fresh coordinates."""

    intent: CommitIntent


@attrs.frozen
class ReserveInFlight:
    """reserve found the same request part-way; continue from ``stage``."""

    intent: CommitIntent
    stage: CommitStage
    publication: OutboxPublication | None


@attrs.frozen
class ReserveCommitted:
    """reserve found the same request committed; only the ACK coordinates remain."""

    message: CommittedMessage


ReserveResult = ReserveCreated | ReserveInFlight | ReserveCommitted


@attrs.frozen
class LoadedInFlight:
    intent: CommitIntent
    stage: CommitStage
    publication: OutboxPublication | None


@attrs.frozen
class LoadedCommitted:
    message: CommittedMessage


LoadedCommit = LoadedInFlight | LoadedCommitted


@attrs.frozen
class HistoryQuery:
    """One page request. ``as_of_ms`` is the reader's clock: entries expired by then are gone."""

    tenant: TenantId
    conversation: ConversationId
    actor: UserId
    direction: HistoryDirection
    anchor: int | None  # conversation_seq; None = from the newest (BEFORE) or oldest (AFTER)
    limit: int
    max_bytes: int
    as_of_ms: TimestampMillis


@attrs.frozen
class HistoryEntry:
    coordinates: MessageCoordinates
    sender: UserId
    message_type: MessageType
    custom_type: str | None
    body: bytes
    reply_to: int | None


@attrs.frozen
class HistoryPage:
    """A page plus the bounds that say where holes are not loss (C-POST-11).

    ``available_through`` is the highest conversation sequence ever allocated, so a reader can tell
    a sequence that is still in flight (or expired) from one that never existed.
    """

    direction: HistoryDirection
    anchor: int | None
    limit: int
    max_bytes: int
    entries: tuple[HistoryEntry, ...]
    has_more: bool
    available_from: int | None  # lowest sequence still readable, None when nothing is
    available_through: int  # highest sequence allocated in the conversation (0 = none)
