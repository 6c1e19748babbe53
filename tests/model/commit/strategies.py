"""Hypothesis strategies for commit-model values, drawn from small pools so collisions happen."""

from __future__ import annotations

from hypothesis import strategies as st

from model.commit import (
    AuthenticatedSend,
    FrozenDeliveryInput,
    MessageContent,
    MessageRecord,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
)

TENANTS = ("t1", "t2")
SENDERS = ("alice", "bob")
CONVERSATIONS = ("c1", "c2")
CMIDS = ("m1", "m2", "m3")

contents = st.one_of(
    st.builds(
        MessageContent,
        st.sampled_from([MessageType.TEXT, MessageType.IMAGE]),
        st.sampled_from([b"", b"hi", b"x" * 40]),
    ),
    st.builds(
        MessageContent,
        st.just(MessageType.CUSTOM),
        st.sampled_from([b"{}", b"card"]),
        st.sampled_from(["poll", "card.v2"]),
    ),
)

sends = st.builds(
    AuthenticatedSend,
    tenant=st.sampled_from(TENANTS),
    sender=st.sampled_from(SENDERS),
    device=st.sampled_from(("d1", "d2")),
    conversation=st.sampled_from(CONVERSATIONS),
    client_message_id=st.sampled_from(CMIDS),
    content=contents,
    mentions=st.lists(st.sampled_from(SENDERS), max_size=2).map(tuple),
    reply_to=st.none() | st.integers(1, 3),
)

publications = st.builds(OutboxPublication, st.just("outbox"), st.sampled_from(("1-0", "2-0", "3-0")))


def delivery_for(request: AuthenticatedSend, retention_ms: int = 1_000) -> FrozenDeliveryInput:
    return FrozenDeliveryInput(
        conversation=request.conversation,
        recipients=("alice", "bob"),
        membership_version=1,
        retention_ms=retention_ms,
    )


def candidate_for(request: AuthenticatedSend, accepted_at_ms: int) -> ReserveCandidate:
    return ReserveCandidate(MessageRecord.from_send(request), accepted_at_ms)
