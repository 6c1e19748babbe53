"""Values at the contract's edges, drawn by the store suite beside its small pools.

The store machine's pools keep programs readable; these two rules take the values the pools never
hold: identifiers of 64 characters and of 65, non-ASCII ones, empty, non-ASCII and 64 KiB bodies,
32 mentions and 33, and every 64-bit integer of the contract (reply id, acceptance time, retention
and the expiry they add up to, membership version, history anchor and as-of) at its largest legal
value and one past it (``model.commit.MAX_INT64``). A legal value must go all the way to COMMITTED
and read back exactly as the model holds it; one past the edge is INVALID_ARGUMENT with nothing
written (C-ERR-04). A backend that overflows, truncates or cannot encode the value is caught as
C-ERR-01 (a foreign exception) or as the read-back that differs (C-POST-02, C-POST-03, C-PRE-09,
C-POST-11). Each field drawn at its edges is a coverage target ``edge:<field>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import ConformanceMachine, step
from conformance.commit import _vocabulary as v
from model.commit import (
    MAX_BODY_BYTES,
    MAX_HISTORY_BYTES,
    MAX_INT64,
    MAX_MENTIONS,
    AuthenticatedSend,
    CommitKey,
    CommitStage,
    FrozenDeliveryInput,
    HistoryDirection,
    HistoryQuery,
    MessageContent,
    MessageType,
    ReserveCandidate,
)

if TYPE_CHECKING:
    from conformance.commit._oracle import ObservedStore, StoreOracle

EDGE_CONVERSATION = "c1"
_RETENTION = v.RETENTION_MS[EDGE_CONVERSATION]


def _send(cmid: str, sender: str = "alice", **changes: Any) -> AuthenticatedSend:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "sender": sender,
        "device": "d1",
        "conversation": EDGE_CONVERSATION,
        "client_message_id": cmid,
        "content": MessageContent(MessageType.TEXT, b"edge"),
        "mentions": (),
        "reply_to": None,
    }
    fields.update(changes)
    return AuthenticatedSend(**fields)


# name -> (request, retention_ms, accepted_at_ms (None: now), membership version)
Edge = tuple[AuthenticatedSend, int, int | None, int]
_MENTIONS = tuple(f"u{n:02d}" for n in range(MAX_MENTIONS + 1))
SEND_EDGES: dict[str, Callable[[int], Edge]] = {
    "cmid-64": lambda now: (_send("x" * 64), _RETENTION, None, 1),
    "cmid-65": lambda now: (_send("x" * 65), _RETENTION, None, 1),
    "cmid-non-ascii": lambda now: (_send("m\u00e9"), _RETENTION, None, 1),
    "sender-64": lambda now: (_send("e1", sender="s" * 64), _RETENTION, None, 1),
    "sender-non-ascii": lambda now: (_send("e1", sender="\u00e5lice"), _RETENTION, None, 1),
    "body-empty": lambda now: (
        _send("e2", content=MessageContent(MessageType.TEXT, b"")),
        _RETENTION,
        None,
        1,
    ),
    "body-utf8": lambda now: (
        _send("e3", content=MessageContent(MessageType.TEXT, "h\u00e9llo \u4e16\u754c \U0001f389".encode())),
        _RETENTION,
        None,
        1,
    ),
    "body-max": lambda now: (
        _send("e4", content=MessageContent(MessageType.FILE, b"\xff\x00" * (MAX_BODY_BYTES // 2))),
        _RETENTION,
        None,
        1,
    ),
    "body-over": lambda now: (
        _send("e4", content=MessageContent(MessageType.FILE, b"\xff" * (MAX_BODY_BYTES + 1))),
        _RETENTION,
        None,
        1,
    ),
    "custom-type-64": lambda now: (
        _send("e5", content=MessageContent(MessageType.CUSTOM, b"{}", "a" * 64)),
        _RETENTION,
        None,
        1,
    ),
    "mentions-max": lambda now: (_send("e6", mentions=_MENTIONS[:MAX_MENTIONS]), _RETENTION, None, 1),
    "mentions-over": lambda now: (_send("e6", mentions=_MENTIONS), _RETENTION, None, 1),
    "reply-max": lambda now: (_send("e7", reply_to=MAX_INT64), _RETENTION, None, 1),
    "reply-over": lambda now: (_send("e7", reply_to=MAX_INT64 + 1), _RETENTION, None, 1),
    "accepted-max": lambda now: (_send("e8"), _RETENTION, MAX_INT64 - _RETENTION, 1),
    "accepted-over": lambda now: (_send("e8"), _RETENTION, MAX_INT64 - _RETENTION + 1, 1),
    "retention-max": lambda now: (_send("e9"), MAX_INT64 - now, None, 1),
    "retention-over": lambda now: (_send("e9"), MAX_INT64 - now + 1, None, 1),
    "version-max": lambda now: (_send("e10"), _RETENTION, None, MAX_INT64),
    "version-over": lambda now: (_send("e10"), _RETENTION, None, MAX_INT64 + 1),
}

# name -> (anchor, limit, max_bytes, as_of_ms (None: now), direction)
HISTORY_EDGES: dict[str, tuple[int | None, int, int, int | None, str]] = {
    "anchor-max": (MAX_INT64, 100, MAX_HISTORY_BYTES, None, "before"),
    "anchor-over": (MAX_INT64 + 1, 100, MAX_HISTORY_BYTES, None, "before"),
    "as-of-max": (None, 100, MAX_HISTORY_BYTES, MAX_INT64, "after"),
    "as-of-below-max": (None, 100, MAX_HISTORY_BYTES, MAX_INT64 - 1, "after"),
    "as-of-over": (None, 100, MAX_HISTORY_BYTES, MAX_INT64 + 1, "after"),
    "bytes-1": (None, 100, 1, None, "after"),
    "bytes-0": (None, 100, 0, None, "after"),
    "bytes-max": (None, 100, MAX_HISTORY_BYTES, None, "after"),
    "bytes-over": (None, 100, MAX_HISTORY_BYTES + 1, None, "after"),
    "limit-100": (None, 100, MAX_HISTORY_BYTES, None, "before"),
    "limit-101": (None, 101, MAX_HISTORY_BYTES, None, "before"),
}

#: One coverage target per field whose edges are drawn (each value of a field reaches it): a
#: target per value would ask the fixed-seed run for thirty rare draws at once.
EDGE_FIELDS = (
    "cmid",
    "sender",
    "body",
    "custom-type",
    "mentions",
    "reply",
    "accepted",
    "retention",
    "version",
    "anchor",
    "as-of",
    "bytes",
    "limit",
)
EDGE_TARGETS = tuple(f"edge:{field}" for field in EDGE_FIELDS)


def edge_target(name: str) -> str:
    """``edge:<field>`` of an edge value's name (``reply-max`` -> ``edge:reply``)."""
    return "edge:" + next(field for field in EDGE_FIELDS if name.startswith(f"{field}-"))


def _field_of(name: str) -> str:
    return next(field for field in EDGE_FIELDS if name.startswith(f"{field}-"))


_SEND_FIELDS = tuple(dict.fromkeys(_field_of(name) for name in SEND_EDGES))


def _values_of(field: str) -> tuple[str, ...]:
    return tuple(name for name in SEND_EDGES if _field_of(name) == field)


class EdgeRules(ConformanceMachine):
    """Mixed into the store machine; uses its store, oracle, clock and ``call``."""

    if TYPE_CHECKING:
        store: ObservedStore
        oracle: StoreOracle
        now: int

        def call(self, coro: Any) -> Any: ...

    # The field first, then one of its values: every field is as likely as any other (a field
    # with one edge value, as custom-type, would otherwise come up once in twenty draws).
    edges_walked = False  # set on the example's machine by ``edge_walk``

    @rule(edge=st.sampled_from(_SEND_FIELDS).flatmap(lambda field: st.sampled_from(_values_of(field))))
    @step
    def commit_at_edge(self, edge: str) -> None:
        """C-ERR-04, C-ERR-01: a request at an edge of the contract reserved and taken to COMMITTED
        (legal), or refused with INVALID_ARGUMENT and nothing written (one past the edge)."""
        self._commit_at_edge(edge)

    @rule(past=st.booleans())
    @step
    def edge_walk(self, past: bool) -> None:
        """Every field at an edge once per example, its first value or its last (one past it, where
        it has one): the rules above draw one value at a time, and a ci run on a slow engine (80
        examples on Cassandra) may otherwise never meet a field (docs/ci-gate.md, "reach")."""
        if self.edges_walked:
            return
        self.edges_walked = True
        for field in _SEND_FIELDS:
            values = _values_of(field)
            self._commit_at_edge(values[-1 if past else 0])
        fields = tuple(dict.fromkeys(_field_of(name) for name in HISTORY_EDGES))
        for field in fields:
            values = tuple(name for name in HISTORY_EDGES if _field_of(name) == field)
            self._history_at_edge(values[-1 if past else 0])

    def _commit_at_edge(self, edge: str) -> None:
        send, retention, accepted_at, version = SEND_EDGES[edge](self.now)
        members = frozenset({"alice", "bob", "carol"})
        delivery = FrozenDeliveryInput(EDGE_CONVERSATION, tuple(sorted(members)), version, retention)
        candidate = ReserveCandidate(v.candidate(send, self.now).record, accepted_at or self.now)
        self.call(self.store.reserve(send, delivery, candidate))
        key = send.commit_key
        for _ in range(4):  # reserve -> recorded -> (outboxed ->) committed
            if not self._advance(key):
                break
        self.context.reach(edge_target(edge))

    def _advance(self, key: CommitKey) -> bool:
        entry = self.oracle.state.commits.get(key)
        intent = self.oracle.intents.get(key)
        if entry is None or intent is None or entry.stage is CommitStage.COMMITTED:
            return False
        publication = v.publication("p1")
        if entry.stage is CommitStage.RESERVED:
            self.call(self.store.put_record(intent))
        elif entry.stage is CommitStage.RECORDED:
            self.call(self.store.mark_published_and_committed(intent, publication))
        else:
            self.call(self.store.mark_committed(intent))
        return True

    @rule(edge=st.sampled_from(tuple(HISTORY_EDGES)))
    @step
    def history_at_edge(self, edge: str) -> None:
        """C-POST-11, C-ERR-04: a history page with an anchor, limit, byte limit or as-of at its
        largest legal value (or smallest), and one past it."""
        self._history_at_edge(edge)

    def _history_at_edge(self, edge: str) -> None:
        anchor, limit, max_bytes, as_of, direction = HISTORY_EDGES[edge]
        query = HistoryQuery(
            tenant="t1",
            conversation=EDGE_CONVERSATION,
            actor="carol",
            direction=HistoryDirection(direction),
            anchor=anchor,
            limit=limit,
            max_bytes=max_bytes,
            as_of_ms=self.now if as_of is None else as_of,
        )
        self.call(self.store.history_page(query))
        self.context.reach(edge_target(edge))
