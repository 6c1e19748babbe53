"""``MemoryOutbox``: publications held in a dict, idempotent per ``CommitKey``."""

from __future__ import annotations

import asyncio

from impls.api import OutboxEntry
from model.commit import CommitIntent, CommitKey, MessageStoreError, OutboxPublication, StoreErrorKind


class MemoryOutbox:
    """An ``impls.api.Outbox`` (and ``ListableOutbox``) whose durable ack is an entry in this object.

    Publishing the same key again returns the first publication, so a committer that died at
    M-COMMIT-04 and publishes again cannot end up with two publications (C-POST-07).
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.stream = f"memory-outbox:{namespace}"
        self._lock = asyncio.Lock()
        self._closed = False
        self._published: dict[CommitKey, OutboxPublication] = {}
        self._entries: list[OutboxEntry] = []  # what a consumer would read, in append order
        self._last_entry = 0  # entry ids increase per outbox: "1-0", "2-0", ...

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed", intent.key)
        async with self._lock:
            existing = self._published.get(intent.key)
            if existing is not None:
                return existing
            self._last_entry += 1
            publication = OutboxPublication(self.stream, f"{self._last_entry}-0")
            self._published[intent.key] = publication
            self._entries.append(OutboxEntry(intent.key, publication))
            return publication

    async def entries(self) -> list[OutboxEntry]:
        """``ListableOutbox``: every entry appended, oldest first."""
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed")
        return list(self._entries)

    async def readiness(self) -> None:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed")

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: this object is the namespace's only storage."""
        async with self._lock:
            self._published.clear()
            self._entries.clear()

    async def namespaces(self) -> list[str]:
        return [self.namespace] if self._entries else []

    async def close(self) -> None:
        self._closed = True
