"""Pre-upgrade data, handed to a store through its optional port (``impls.api.LegacyImport``).

``legacy_commit`` gives the store one committed message in its pre-upgrade form — the full record
and the legacy ``QIMC`` identity (``model.commit.legacy_full_identity``) — on a tenant of its own
(``t8``: no other rule allocates there), and tells the model the same fact (a COMMITTED entry with
that identity and the counters at its numbers). Then the key is asked for the way clients retry it,
through the observed store: ``load_commit_for_request`` and ``reserve`` with the same request (the
original ACK, C-PRE-09) or with one identity field changed (IDENTITY_CONFLICT: the legacy identity
is compared byte for byte, C-PRE-07, C-PRE-03). The key stays in the model's world, so every later
read-back and the quiescence checks compare it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from conformance._machine import ConformanceMachine, step
from conformance.commit import _vocabulary as v
from impls.api import LegacyImport
from model.commit import (
    AuthenticatedSend,
    CommitEntry,
    CommitStage,
    CommittedMessage,
    FrozenDeliveryInput,
    MessageContent,
    MessageCoordinates,
    MessageRecord,
    MessageType,
    OutboxPublication,
    legacy_full_identity,
)

if TYPE_CHECKING:
    from conformance.commit._oracle import ObservedStore, StoreOracle

TENANT, CONVERSATION = "t8", "c8"
LEGACY_SEND = AuthenticatedSend(
    TENANT,
    "alice",
    "d1",
    CONVERSATION,
    "legacy",
    MessageContent(MessageType.TEXT, b"L" * 100),
    mentions=("bob",),
    reply_to=2,  # a reply: the pre-upgrade record and identity carry every field (C-PRE-03)
)
LEGACY_COORDINATES = MessageCoordinates(7, 3, v.T0 - v.DAY_MS)
LEGACY_PUBLICATION = OutboxPublication("legacy-stream", "1690000000000-0")
#: "next" is a new key of the legacy tenant and conversation, reserved after the import: the
#: sequences the code before the upgrade advanced go on from where it left them (its coordinates
#: are compared with the model's, whose counters the import set; a store that imports a message but
#: not its counters hands the next one numbers already taken).
LEGACY_VARIANTS = ("same", "device", "content", "mentions", "reply", "next")


def legacy_request(variant: str) -> AuthenticatedSend:
    if variant == "device":
        return attrs.evolve(LEGACY_SEND, device="d2")
    if variant == "content":
        return attrs.evolve(LEGACY_SEND, content=MessageContent(MessageType.TEXT, b"L" * 99))
    if variant == "mentions":
        return attrs.evolve(LEGACY_SEND, mentions=())
    if variant == "reply":
        return attrs.evolve(LEGACY_SEND, reply_to=None)
    if variant == "next":
        return attrs.evolve(LEGACY_SEND, client_message_id="legacy-next")
    return LEGACY_SEND


class LegacyRules(ConformanceMachine):
    """Mixed into the store machine; uses its store, oracle, clock and ``call``."""

    if TYPE_CHECKING:
        store: ObservedStore
        oracle: StoreOracle
        now: int

        def call(self, coro: Any) -> Any: ...

    def __init__(self) -> None:
        self._legacy: tuple[object, bool] | None = None
        super().__init__()
        self.context.stats.details.setdefault("legacy_import", str(self.imports_legacy()))

    def imports_legacy(self) -> bool:
        # A precondition, asked at every step: the protocol check is kept per store object.
        real = self.oracle.real
        if self._legacy is None or self._legacy[0] is not real:
            self._legacy = (real, isinstance(real, LegacyImport))
        return self._legacy[1]

    @precondition(lambda self: self.imports_legacy())
    @rule(variant=st.sampled_from(LEGACY_VARIANTS))
    @step
    def legacy_commit(self, variant: str) -> None:
        """C-PRE-07: a message committed before the upgrade (full record, QIMC identity) replays its
        ACK for the same request and is a conflict for a request that differs in one field."""
        self._legacy_commit(variant)

    @step
    def legacy_walk(self) -> None:
        """From the opening on a wire (``WireFaultRules.wire_opening``, ``directed_on_wire``), where
        a store imports legacy messages: the legacy message imported and its sender's next message
        reserved, which must continue the legacy sequences (C-PRE-07; drawn, 5 of 127 Redis
        examples on the fixed seed)."""
        if self.imports_legacy():
            self._legacy_commit("next")

    def _legacy_commit(self, variant: str) -> None:
        key = LEGACY_SEND.commit_key
        if key not in self.oracle.state.commits:
            self._import()
        request = legacy_request(variant)
        delivery = FrozenDeliveryInput(CONVERSATION, ("alice", "bob"), 1, 60_000)
        self.call(self.store.load_commit_for_request(request))
        self.call(self.store.reserve(request, delivery, v.candidate(request, self.now)))
        if variant == "next":
            self.context.reach("legacy-sequences-continued")
        self.context.reach("legacy-compared")
        self.context.reach("rule:C-PRE-07")

    def _import(self) -> None:
        oracle, key = self.oracle, LEGACY_SEND.commit_key
        # One key of the tenant reserved first, so its counters exist below the imported numbers:
        # the import must raise them (an upgrade meets counters the new code already moved).
        first = attrs.evolve(LEGACY_SEND, client_message_id="legacy-first")
        self.call(
            self.store.reserve(
                first,
                FrozenDeliveryInput(CONVERSATION, ("alice", "bob"), 1, 60_000),
                v.candidate(first, self.now),
            )
        )
        identity = legacy_full_identity(LEGACY_SEND)
        message = CommittedMessage(key, CONVERSATION, LEGACY_COORDINATES, LEGACY_PUBLICATION)
        delivery = FrozenDeliveryInput(CONVERSATION, ("alice", "bob", "carol"), 1, 60_000)
        real: Any = oracle.real
        result = self.call(
            oracle.call_real(
                "import_legacy",
                key,
                lambda: real.import_legacy(message, identity, MessageRecord.from_send(LEGACY_SEND), delivery),
            )
        )
        if result is not None:  # a MessageStoreError: the backend was unavailable; nothing to compare
            self.note(f"import_legacy failed: {result}")
            return
        state = oracle.state
        entry = CommitEntry(
            CommitStage.COMMITTED, identity, CONVERSATION, LEGACY_COORDINATES, None, LEGACY_PUBLICATION
        )
        oracle.state = attrs.evolve(
            state,
            commits={**state.commits, key: entry},
            message_seq={**state.message_seq, TENANT: LEGACY_COORDINATES.message_seq},
            conversation_seq={
                **state.conversation_seq,
                (TENANT, CONVERSATION): LEGACY_COORDINATES.conversation_seq,
            },
        )
        oracle.conversation_of[key] = CONVERSATION
        oracle.first_coordinates[key] = LEGACY_COORDINATES
        oracle.touched.add(key)
        self.note(f"imported {v.key_name(key)} in the pre-upgrade form (QIMC identity, full record)")
