"""Stores wrong in the ways issue 15's checks look for: each is a shipped store with one line changed.

=========================  =========  =========  ====================================================
factory                    service    rule       the bug
=========================  =========  =========  ====================================================
leaks_script_text          (none)     C-ERR-01   a conflict's detail carries the Redis command and
                                                 the raw key member it read (no namespace in it:
                                                 the namespace-only scan passed it)
noop_readiness             redis      C-PRE-06   ``readiness`` returns at once and never reaches
                                                 the server (caught with the server partitioned)
reply_in_32_bits           (none)     C-ERR-01   keeps ``reply_to`` in a 32-bit field: a legal reply
                                                 id of 2**63-1 overflows (``struct.error`` escapes)
seq_read_unguarded         (none)     C-ERR-01   a fast path reads the message sequence number
                                                 with ``int()`` outside the codec's guard: a
                                                 corrupted commit hash raises ``ValueError``
                                                 instead of CORRUPT
=========================  =========  =========  ====================================================

Run one::

    conformance run --store examples.edge_stores:leaks_script_text --suite store
    conformance run --store examples.edge_stores:noop_readiness --service redis --suite store

``EDGE_STORES`` maps each factory to ``(service or None, suite, rule)``.
"""

from __future__ import annotations

import struct

from impls.api import MembershipDirectory
from impls.memory import MemoryMessageStore
from impls.redis import RedisMessageStore, fakeredis_client, redis_client
from impls.redis._keys import member
from model.commit import (
    AuthenticatedSend,
    CommitKey,
    ConversationId,
    FrozenDeliveryInput,
    LoadedCommit,
    MessageStoreError,
    ReserveCandidate,
    ReserveResult,
    StoreErrorKind,
)


class LeaksScriptText(RedisMessageStore):
    """C-ERR-01: the conflict names the command it ran and the raw member of the key it read."""

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        try:
            return await super().reserve(request, delivery, candidate)
        except MessageStoreError as error:
            if error.kind is not StoreErrorKind.IDENTITY_CONFLICT:
                raise
            raw = member(request.commit_key)
            raise MessageStoreError(
                error.kind, f"HGET {raw!r} identity: another request owns this key", error.key
            ) from None


class NoopReadiness(RedisMessageStore):
    """C-PRE-06: ready without asking anyone."""

    async def readiness(self) -> None:
        return None


class ReplyIn32Bits(MemoryMessageStore):
    """C-ERR-01: a reply id packed into 32 bits, as a store with an INT column would."""

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        if request.reply_to is not None:
            struct.pack(">i", request.reply_to)  # the column's width
        return await super().reserve(request, delivery, candidate)


class SeqReadUnguarded(RedisMessageStore):
    """C-ERR-01: a corrupted coordinates field escapes as ``ValueError`` (the caught form is CORRUPT)."""

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        raw = await self.read_raw(key)
        coordinates = raw.get("c") if raw is not None else None
        if isinstance(coordinates, bytes):
            int(coordinates.split(b":")[0])  # the message sequence number, decoded by hand
        return await super().load_commit(key, conversation_id)


async def seq_read_unguarded(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return SeqReadUnguarded(fakeredis_client(), namespace, membership)


async def leaks_script_text(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return LeaksScriptText(fakeredis_client(), namespace, membership)


async def noop_readiness(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> RedisMessageStore:
    return NoopReadiness(redis_client(endpoint), namespace, membership)


async def reply_in_32_bits(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return ReplyIn32Bits(namespace, membership)


EDGE_STORES: dict[str, tuple[str | None, str, str]] = {
    "reply_in_32_bits": (None, "store", "C-ERR-01"),
    "seq_read_unguarded": (None, "store", "C-ERR-01"),
    "leaks_script_text": (None, "store", "C-ERR-01"),
    "noop_readiness": ("redis", "store", "C-PRE-06"),
}
