"""The in-memory ``MessageStore`` and ``Outbox``: asyncio-safe, one isolated instance per call.

Written apart from ``model.commit``'s transitions on purpose: the model is the oracle the harness
checks this store against, so borrowing its transition functions would make that check vacuous.
"""

from __future__ import annotations

from impls.api import MembershipDirectory
from impls.memory._outbox import MemoryOutbox
from impls.memory._store import MemoryMessageStore


async def open_store(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    """A fresh, empty store; memory namespaces never share data, so the name is only a label."""
    return MemoryMessageStore(namespace, membership)


async def open_outbox(namespace: str) -> MemoryOutbox:
    return MemoryOutbox(namespace)


__all__ = ["MemoryMessageStore", "MemoryOutbox", "open_outbox", "open_store"]
