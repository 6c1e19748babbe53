"""``ListableOutbox.entries`` on every shipped outbox: what a consumer of the outbox would read.

One entry per commit key, in append order, each naming the key it publishes; a re-publish adds
nothing (C-POST-07). The conformance harness compares this listing with its ledger at quiescence.
"""

from __future__ import annotations

import pytest

from impls.api import ListableOutbox, MessageStore, Outbox, OutboxEntry
from model.commit import CommitIntent, MessageStoreError, ReserveCreated, StoreErrorKind
from tests.impls.test_store_contract import candidate_for, delivery_for, send


async def _recorded(store: MessageStore, cmid: str) -> CommitIntent:
    request = send(cmid)
    reserved = await store.reserve(request, delivery_for(request), candidate_for(request))
    assert isinstance(reserved, ReserveCreated)
    await store.put_record(reserved.intent)
    return reserved.intent


async def test_every_shipped_outbox_lists_one_entry_per_key_in_append_order(
    store: MessageStore, outbox: Outbox
) -> None:
    assert isinstance(outbox, ListableOutbox)
    assert await outbox.entries() == []
    first, second = await _recorded(store, "m-1"), await _recorded(store, "m-2")
    published_first = await outbox.publish(first)
    published_second = await outbox.publish(second)
    assert await outbox.publish(first) == published_first  # a re-publish appends nothing
    assert published_first != published_second
    assert await outbox.entries() == [
        OutboxEntry(first.key, published_first),
        OutboxEntry(second.key, published_second),
    ]
    committed = await store.mark_published_and_committed(first, published_first)
    assert committed.publication == (await outbox.entries())[0].publication


async def test_a_closed_outbox_cannot_be_listed(outbox: Outbox) -> None:
    assert isinstance(outbox, ListableOutbox)
    await outbox.close()
    with pytest.raises(MessageStoreError) as raised:
        await outbox.entries()
    assert raised.value.kind is StoreErrorKind.UNAVAILABLE
