"""conformance._fresh: equal values, no shared objects (the identity-comparison blind spot)."""

from __future__ import annotations

from conformance._fresh import fresh
from conformance.commit import _vocabulary as v
from model.commit import CommitKey


def test_a_request_comes_back_equal_and_made_of_new_objects() -> None:
    send = v.request(v.parse_key("t1/alice/m2"), "mentions")
    copy = fresh(send)
    assert copy == send and copy is not send
    assert copy.conversation == send.conversation and copy.conversation is not send.conversation
    assert copy.content.body is not send.content.body
    assert copy.content.message_type is send.content.message_type  # an enum member stays itself
    assert copy.mentions is not send.mentions and copy.mentions[0] is not send.mentions[0]


def test_large_ints_and_containers_are_copied() -> None:
    moment = v.T0 + 5
    assert fresh(moment) == moment and fresh(moment) is not moment
    key = CommitKey("t1", "alice", "m1")
    assert fresh([key, (key, None)]) == [key, (key, None)]
    assert fresh(frozenset({"alice", "bob"})) == frozenset({"alice", "bob"})
