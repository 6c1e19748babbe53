"""What the commit benchmarks send: requests with a 100-byte body, ids of a stated length, and the
backends they send them to.

Two id sets: ``short`` (the harness's vocabulary: ``t1``/``alice``/``m-1``) and ``uuid`` (what a
production client sends: a UUID client message id, longer tenant, sender and conversation ids). A
Redis hash's MEMORY USAGE includes its key name, which holds the namespace and the key's ids, so the
footprint figures name the lengths they were measured with.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs

from conformance.backends import BackendSpec, outbox_factory, store_factory
from impls.api import InMemoryMembership, MessageStore, Outbox
from impls.commit import FaultHook
from model.commit import AuthenticatedSend, CommitKey, FaultPoint, MessageContent, MessageType

BODY_BYTES = 100
DEVICE = "d1"


@attrs.frozen
class Ids:
    label: str
    tenant: str
    sender: str
    conversation: str
    uuid_message_ids: bool

    def client_message_id(self, n: int) -> str:
        return str(uuid.uuid4()) if self.uuid_message_ids else f"m-{n}"

    def lengths(self, namespace: str) -> dict[str, int]:
        """Characters of each name that ends up in a commit key (and in the Redis key name)."""
        return {
            "namespace": len(namespace),
            "tenant": len(self.tenant),
            "sender": len(self.sender),
            "conversation": len(self.conversation),
            "client_message_id": len(self.client_message_id(1)),
        }


SHORT_IDS = Ids("short", "t1", "alice", "c1", uuid_message_ids=False)
UUID_IDS = Ids("uuid", "tenant-0001", "user-00000001", "conv-00000001", uuid_message_ids=True)


class Killed(BaseException):
    """A committer dies at a fault point: a BaseException, which the committer lets through."""


def kill_at(point: FaultPoint | None) -> FaultHook:
    """A fault hook that kills the committer at ``point`` (None: never)."""

    async def hook(reached: FaultPoint, key: CommitKey) -> None:
        if reached is point:
            raise Killed(reached.value)

    return hook


def new_namespace() -> str:
    """Unique per run (nothing is ever flushed), letters and digits only: valid on every backend."""
    return f"bn{secrets.token_hex(4)}"


def request(ids: Ids, n: int, body_bytes: int = BODY_BYTES) -> AuthenticatedSend:
    return AuthenticatedSend(
        tenant=ids.tenant,
        sender=ids.sender,
        device=DEVICE,
        conversation=ids.conversation,
        client_message_id=ids.client_message_id(n),
        content=MessageContent(MessageType.TEXT, b"B" * body_bytes),
    )


def membership(ids: Ids) -> InMemoryMembership:
    directory = InMemoryMembership()
    directory.set_members(ids.tenant, ids.conversation, frozenset({ids.sender, "bob", "carol"}))
    return directory


@asynccontextmanager
async def opened(
    spec: BackendSpec, namespace: str, directory: InMemoryMembership
) -> AsyncIterator[tuple[MessageStore, Outbox]]:
    """A store and an outbox of ``spec`` on ``namespace``, closed afterwards.

    On real Redis both share one client, so a sequential commit loop talks over one connection
    (redis-py opens a second connection only when the first is busy).
    """
    if spec.name == "redis":
        from impls.redis import RedisMessageStore, RedisOutbox, redis_client

        client = redis_client()
        store: MessageStore = RedisMessageStore(client, namespace, directory)
        outbox: Outbox = RedisOutbox(client, namespace)
    else:
        store = await store_factory(spec)(namespace, directory)
        outbox = await outbox_factory(spec)(namespace)
    try:
        yield store, outbox
    finally:
        try:
            await outbox.close()
        finally:
            await store.close()
