"""Deliberately broken ``Outbox``es, each wrong in exactly one way the contract forbids.

They subclass the in-memory outbox (``impls.memory``) and change ``publish`` only. The commit suite
runs them beside the correct in-memory store::

    conformance run --store impls.memory:open_store \\
        --outbox examples.broken_outboxes:republish_appends_new_entry --suite commit

===========================  ===========  ======================================================
factory                      rule broken  the bug
===========================  ===========  ======================================================
republish_appends_new_entry  C-POST-07    a re-publish of a key appends a new entry and answers
                                          with it instead of the key's first entry
one_entry_for_every_key      C-POST-07    every key is answered with the outbox's first entry,
                                          so one entry stands for several commits
republish_appends_silently   C-POST-07    a re-publish appends a second entry for the key but
                                          answers with the first: only the outbox's listing
                                          (``ListableOutbox.entries``) shows it
lists_one_page               C-POST-07    its listing stops after a first page (MAX_SCAN_ITEMS entries)
                                          (a reader that never asks for the next page)
===========================  ===========  ======================================================

``BROKEN_OUTBOXES`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

from impls.api import OutboxEntry
from impls.memory import MemoryOutbox
from model.commit import MAX_SCAN_ITEMS, CommitIntent, MessageStoreError, OutboxPublication, StoreErrorKind


class RepublishAppendsNewEntry(MemoryOutbox):
    """C-POST-07: not idempotent per ``CommitKey``; every publish is a new entry."""

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed", intent.key)
        async with self._lock:
            if intent.key in self._published:  # a re-publish: should answer with the first entry
                self._last_entry += 1
                return OutboxPublication(self.stream, f"{self._last_entry}-0")
        return await super().publish(intent)


class OneEntryForEveryKey(MemoryOutbox):
    """C-POST-07: answers every key with the first entry ever appended."""

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed", intent.key)
        async with self._lock:
            if self._published:
                return next(iter(self._published.values()))
        return await super().publish(intent)


class RepublishAppendsSilently(MemoryOutbox):
    """C-POST-07: a re-publish appends another entry a consumer will read, and hides it."""

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed", intent.key)
        async with self._lock:
            first = self._published.get(intent.key)
            if first is not None:
                self._last_entry += 1
                self._entries.append(
                    OutboxEntry(intent.key, OutboxPublication(self.stream, f"{self._last_entry}-0"))
                )
                return first
        return await super().publish(intent)


class ListsOnePage(MemoryOutbox):
    """C-POST-07: ``entries()`` answers the first page of a paged read and never asks for the next."""

    async def entries(self) -> list[OutboxEntry]:
        return (await super().entries())[:MAX_SCAN_ITEMS]


async def republish_appends_new_entry(namespace: str) -> MemoryOutbox:
    return RepublishAppendsNewEntry(namespace)


async def one_entry_for_every_key(namespace: str) -> MemoryOutbox:
    return OneEntryForEveryKey(namespace)


async def republish_appends_silently(namespace: str) -> MemoryOutbox:
    return RepublishAppendsSilently(namespace)


async def lists_one_page(namespace: str) -> MemoryOutbox:
    return ListsOnePage(namespace)


BROKEN_OUTBOXES: dict[str, str] = {
    "republish_appends_new_entry": "C-POST-07",
    "one_entry_for_every_key": "C-POST-07",
    "republish_appends_silently": "C-POST-07",
    "lists_one_page": "C-POST-07",
}
