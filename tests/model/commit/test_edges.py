"""C-ERR-04 at the contract's edges: every integer is a signed 64-bit value, so the largest legal
value is accepted and one past it is INVALID_ARGUMENT with nothing written."""

from __future__ import annotations

import attrs
import pytest

from model.commit import (
    MAX_INT64,
    AuthenticatedSend,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryQuery,
    MessageContent,
    MessageStoreError,
    MessageType,
    ReserveCreated,
    StoreErrorKind,
    StoreState,
    history_page,
    reserve,
)
from tests.model.commit.strategies import candidate_for, delivery_for

SEND = AuthenticatedSend("t1", "alice", "d1", "c1", "m1", MessageContent(MessageType.TEXT, b"hi"))


def _reserve(send: AuthenticatedSend, delivery: FrozenDeliveryInput, accepted_at_ms: int = 1) -> object:
    state, outcome = reserve(StoreState(), send, delivery, candidate_for(send, accepted_at_ms))
    if isinstance(outcome, MessageStoreError):
        assert state == StoreState()
    return outcome


@pytest.mark.parametrize(
    ("send", "retention", "accepted_at", "version", "legal"),
    [
        (attrs.evolve(SEND, reply_to=MAX_INT64), 1000, 1, 1, True),
        (attrs.evolve(SEND, reply_to=MAX_INT64 + 1), 1000, 1, 1, False),
        (SEND, 1000, MAX_INT64 - 1000, 1, True),
        (SEND, 1000, MAX_INT64 - 999, 1, False),
        (SEND, MAX_INT64 - 1, 1, 1, True),
        (SEND, MAX_INT64, 1, 1, False),
        (SEND, 1000, -1, 1, False),
        (SEND, 1000, 1, MAX_INT64, True),
        (SEND, 1000, 1, MAX_INT64 + 1, False),
        (attrs.evolve(SEND, client_message_id="x" * 64), 1000, 1, 1, True),
        (attrs.evolve(SEND, client_message_id="x" * 65), 1000, 1, 1, False),
        (attrs.evolve(SEND, client_message_id="m\u00e9"), 1000, 1, 1, False),
    ],
)
def test_integers_and_ids_at_their_edges(
    send: AuthenticatedSend, retention: int, accepted_at: int, version: int, legal: bool
) -> None:
    delivery = attrs.evolve(delivery_for(send, retention), membership_version=version)
    outcome = _reserve(send, delivery, accepted_at)
    if legal:
        assert isinstance(outcome, ReserveCreated)
    else:
        assert isinstance(outcome, MessageStoreError) and outcome.kind is StoreErrorKind.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("anchor", "as_of", "legal"),
    [(MAX_INT64, 1, True), (MAX_INT64 + 1, 1, False), (None, MAX_INT64, True), (None, MAX_INT64 + 1, False)],
)
def test_history_anchor_and_as_of_at_their_edges(anchor: int | None, as_of: int, legal: bool) -> None:
    query = HistoryQuery("t1", "c1", "alice", HistoryDirection.BEFORE, anchor, 10, 1000, as_of)
    outcome = history_page(StoreState(), query, frozenset({"alice"}))
    assert isinstance(outcome, MessageStoreError) is not legal
