"""The small world the commit suites play in: pools of names, and the values built from them.

Rules draw short strings from these pools (``key="t1/alice/m1"``, ``variant="device"``), never
model objects, so that a counterexample reads like a script and a failure file is plain JSON. The
functions here turn those names into the contract's values, the same way every time.
"""

from __future__ import annotations

from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryQuery,
    MessageContent,
    MessageCoordinates,
    MessageRecord,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
    reserve_identity_digest,
)

T0 = 1_700_000_000_000  # the manual clock's start, in ms

TENANTS = ("t1", "t2")
SENDERS = ("alice", "bob")
CLIENT_MESSAGE_IDS = ("m1", "m2", "m3", "m4")
CONVERSATIONS = ("c1", "c2")
KEYS = tuple(f"{t}/{s}/{m}" for t in TENANTS for s in SENDERS for m in CLIENT_MESSAGE_IDS)
STORE_KEYS = tuple(f"{t}/{s}/{m}" for t in TENANTS for s in SENDERS for m in CLIENT_MESSAGE_IDS[:2])
READERS = ("alice", "bob", "carol", "mallory")  # mallory is never a member

# Conversation -> retention: c1 expires quickly (the clock's jumps cross it), c2 does not.
RETENTION_MS = {"c1": 1_000, "c2": 3_600_000}
# The commit suite's committers for this conversation keep their own default retention (no
# ``retention_ms`` given): a deployment's default is held to C-ERR-04 too. The store machine's
# deliveries still use RETENTION_MS above.
DEFAULT_RETENTION_CONVERSATION = "c2"


def retention(conversation: str) -> dict[str, int]:
    """The committer's ``retention_ms`` argument for a conversation; none for
    ``DEFAULT_RETENTION_CONVERSATION``: the retention the committer then freezes into each delivery
    is its own default, held to C-ERR-04 like any other (a positive signed 64-bit integer, its expiry
    too; the model judges the delivery the store is given). A default of zero, below it or past
    2**63-1 was never exercised while every committer was given one."""
    if conversation == DEFAULT_RETENTION_CONVERSATION:
        return {}
    return {"retention_ms": RETENTION_MS[conversation]}


CLOCK_STEPS_MS = (1_000, 4_000, 60_000)
DAY_MS = 86_400_000

# Membership sets a rule can switch a conversation to (sender removal after reserve, and so on).
MEMBER_SETS: dict[str, frozenset[str]] = {
    "everyone": frozenset({"alice", "bob", "carol"}),
    "without-alice": frozenset({"bob", "carol"}),
    "without-bob": frozenset({"alice", "carol"}),
    "only-carol": frozenset({"carol"}),
}
INITIAL_MEMBERS = "everyone"

# How a request differs from the first one sent under its key: "same" is a true retry; every other
# variant changes exactly one identity field (C-PRE-03), so the store must answer a conflict.
VARIANTS = ("same", "conversation", "device", "content", "mentions", "reply", "type")
CONFLICT_VARIANTS = VARIANTS[1:]

# How a transition's intent differs from the reserved one (C-PRE-02, C-POST-03).
INTENT_VARIANTS = (
    "reserved",
    "other-coordinates",
    "other-record",
    "other-delivery",
    "other-conversation",  # record and delivery moved to the other conversation, identity kept
    "unknown-key",
)

PUBLICATIONS = ("p1", "p2")


def parse_key(key: str) -> CommitKey:
    tenant, sender, cmid = key.split("/")
    return CommitKey(tenant, sender, cmid)


def key_name(key: CommitKey) -> str:
    return f"{key.tenant}/{key.sender}/{key.client_message_id}"


def content_for(cmid: str, variant: str) -> MessageContent:
    """Each client message id carries a different type and size, so pages and byte limits bite."""
    if cmid == "m1":
        content = MessageContent(MessageType.TEXT, b"hello")
    elif cmid == "m2":
        content = MessageContent(MessageType.IMAGE, b"\x89PNG" + bytes(range(60)))
    elif cmid == "m4":
        content = MessageContent(MessageType.FILE, b"%PDF-1.7 " + b"x" * 120)
    else:
        content = MessageContent(MessageType.CUSTOM, b'{"poll":["yes","no"]}', "poll")
    if variant == "content":
        content = MessageContent(content.message_type, content.body + b"!", content.custom_type)
    if variant == "type":
        if content.message_type is MessageType.FILE:
            content = MessageContent(MessageType.TEXT, content.body)
        else:
            content = MessageContent(MessageType.FILE, content.body)
    return content


def home_conversation(key: CommitKey) -> str:
    """Each key is sent to one conversation (m1, m3 -> c1; m2, m4 -> c2), so a retry finds it there."""
    return "c1" if key.client_message_id in ("m1", "m3") else "c2"


def other_conversation(conversation: str) -> str:
    return "c2" if conversation == "c1" else "c1"


def conversation_for(key: CommitKey, variant: str = "same") -> str:
    home = home_conversation(key)
    return other_conversation(home) if variant == "conversation" else home


def request(key: CommitKey, variant: str = "same") -> AuthenticatedSend:
    """The request sent under ``key``: its home conversation and content, changed as ``variant`` says."""
    conversation = conversation_for(key, variant)
    return AuthenticatedSend(
        tenant=key.tenant,
        sender=key.sender,
        device="d2" if variant == "device" else "d1",
        conversation=conversation,
        client_message_id=key.client_message_id,
        content=content_for(key.client_message_id, variant),
        mentions=("carol",) if variant == "mentions" else (),
        reply_to=1 if variant == "reply" else None,
    )


def delivery(conversation: str, members: frozenset[str], version: int) -> FrozenDeliveryInput:
    return FrozenDeliveryInput(
        conversation=conversation,
        recipients=tuple(members),
        membership_version=version,
        retention_ms=RETENTION_MS[conversation],
    )


def candidate(send: AuthenticatedSend, now_ms: int) -> ReserveCandidate:
    return ReserveCandidate(MessageRecord.from_send(send), now_ms)


def publication(name: str) -> OutboxPublication:
    return OutboxPublication("ratchet-conformance", f"{name}-0")


# --- invalid inputs (C-ERR-04): each one out of contract in exactly one way ------------------

RESERVE_PROBLEMS = (
    "bad-client-message-id",
    "bad-device",
    "custom-without-type",
    "delivery-for-other-conversation",
    "candidate-not-canonical",
    "zero-retention",
)


def invalid_reserve(
    key: CommitKey, problem: str, members: frozenset[str], now_ms: int
) -> tuple[AuthenticatedSend, FrozenDeliveryInput, ReserveCandidate]:
    send = request(key)
    conversation = send.conversation
    frozen = delivery(conversation, members, 1)
    if problem == "bad-client-message-id":
        send = AuthenticatedSend(
            send.tenant, send.sender, send.device, send.conversation, "not valid!", send.content
        )
    elif problem == "bad-device":
        send = AuthenticatedSend(
            send.tenant, send.sender, "", send.conversation, send.client_message_id, send.content
        )
    elif problem == "custom-without-type":
        send = AuthenticatedSend(
            send.tenant,
            send.sender,
            send.device,
            send.conversation,
            send.client_message_id,
            MessageContent(MessageType.CUSTOM, b"x"),
        )
    elif problem == "delivery-for-other-conversation":
        frozen = delivery(other_conversation(conversation), members, 1)
    elif problem == "zero-retention":
        frozen = FrozenDeliveryInput(conversation, tuple(members), 1, 0)
    cand = candidate(send, now_ms)
    if problem == "candidate-not-canonical":
        cand = candidate(request(key, "content"), now_ms)
    return send, frozen, cand


def intent_variant(intent: CommitIntent, variant: str) -> CommitIntent:
    """The reserved intent, or one that differs from it in exactly one way."""
    if variant == "other-coordinates":
        c = intent.coordinates
        return CommitIntent(
            intent.key,
            intent.identity,
            MessageCoordinates(c.message_seq + 7, c.conversation_seq + 7, c.accepted_at_ms),
            intent.record,
            intent.delivery,
        )
    if variant == "other-record":
        record = intent.record
        changed = MessageRecord(
            record.key,
            record.conversation,
            record.device,
            content_for("m1", "content"),
            record.mentions,
            record.reply_to,
        )
        return CommitIntent(intent.key, intent.identity, intent.coordinates, changed, intent.delivery)
    if variant == "other-delivery":
        d = intent.delivery
        changed_delivery = FrozenDeliveryInput(
            d.conversation, (*d.recipients, "zed"), d.membership_version + 1, d.retention_ms
        )
        return CommitIntent(intent.key, intent.identity, intent.coordinates, intent.record, changed_delivery)
    if variant == "other-conversation":
        r, d = intent.record, intent.delivery
        elsewhere = other_conversation(r.conversation)
        moved = MessageRecord(r.key, elsewhere, r.device, r.content, r.mentions, r.reply_to)
        moved_delivery = FrozenDeliveryInput(elsewhere, d.recipients, d.membership_version, d.retention_ms)
        return CommitIntent(intent.key, intent.identity, intent.coordinates, moved, moved_delivery)
    return intent


def never_reserved_intent(key: CommitKey) -> CommitIntent:
    """A well-formed intent for a key nobody reserved (NOT_FOUND), or for ``unknown-key``."""
    send = request(key)
    return CommitIntent(
        key=key,
        identity=reserve_identity_digest(send),
        coordinates=MessageCoordinates(99, 99, T0),
        record=MessageRecord.from_send(send),
        delivery=delivery(send.conversation, MEMBER_SETS["everyone"], 1),
    )


UNKNOWN_KEY = CommitKey("t1", "alice", "never-sent")

# --- history ---------------------------------------------------------------------------------

ANCHORS = (None, 1, 2, 3, 5)
LIMITS = (1, 2, 3, 100)
BYTE_LIMITS = (1, 80, 1 << 20)
HISTORY_PROBLEMS = ("zero-limit", "limit-over-100", "zero-bytes", "negative-anchor", "bad-actor")


def history_query(
    tenant: str,
    conversation: str,
    actor: str,
    direction: str,
    anchor: int | None,
    limit: int,
    max_bytes: int,
    as_of_ms: int,
) -> HistoryQuery:
    return HistoryQuery(
        tenant=tenant,
        conversation=conversation,
        actor=actor,
        direction=HistoryDirection(direction),
        anchor=anchor,
        limit=limit,
        max_bytes=max_bytes,
        as_of_ms=as_of_ms,
    )


def invalid_history_query(problem: str, as_of_ms: int) -> HistoryQuery:
    query = history_query("t1", "c1", "alice", "before", None, 10, 1000, as_of_ms)
    if problem == "zero-limit":
        return history_query("t1", "c1", "alice", "before", None, 0, 1000, as_of_ms)
    if problem == "limit-over-100":
        return history_query("t1", "c1", "alice", "before", None, 101, 1000, as_of_ms)
    if problem == "zero-bytes":
        return history_query("t1", "c1", "alice", "before", None, 10, 0, as_of_ms)
    if problem == "negative-anchor":
        return history_query("t1", "c1", "alice", "after", -1, 10, 1000, as_of_ms)
    if problem == "bad-actor":
        return history_query("t1", "c1", "not valid!", "before", None, 10, 1000, as_of_ms)
    return query
