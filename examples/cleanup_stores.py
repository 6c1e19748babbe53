"""Stores whose cleanup port (``impls.api.NamespaceOwner``) breaks C-POST-12: each is the shipped
Redis store (on fakeredis) with one method changed.

=====================  ==========  ==============================================================
factory                rule        the bug
=====================  ==========  ==============================================================
drop_leaves_data       C-POST-12   ``drop_namespace`` unlinks the commit hashes only and returns:
                                   the recovery index and the history stay, so the namespace
                                   opened again still has commits to recover
listing_misnames       C-POST-12   ``namespaces`` lists each namespace by its key prefix
                                   (``rt:{ns}``), not by the name it was opened with, so
                                   ``conformance clean`` would never recognise the harness's own
saga_drop_keeps_rows   S-TX-04     the memory saga backend's ``drop_namespace`` returns and
                                   deletes nothing (a saga backend, ``--saga-backend``)
=====================  ==========  ==============================================================

Run one::

    conformance run --store examples.cleanup_stores:drop_leaves_data --suite store
    conformance run --saga-backend examples.cleanup_stores:saga_drop_keeps_rows --suite saga

``CLEANUP_STORES`` maps each factory to ``(suite, rule)``.
"""

from __future__ import annotations

from impls.api import MembershipDirectory
from impls.redis import RedisMessageStore, fakeredis_client
from impls.saga.memory._backend import MemorySagaBackend


class DropLeavesData(RedisMessageStore):
    """C-POST-12: the drop reports success, but only the commit hashes are gone."""

    async def drop_namespace(self) -> None:
        await self._gateway.drop_prefix(self._keys.commit_prefix)


class ListingMisnames(RedisMessageStore):
    """C-POST-12: the listing names each namespace by its key prefix."""

    async def namespaces(self) -> list[str]:
        return [f"rt:{{{namespace}}}" for namespace in await super().namespaces()]


class SagaDropKeepsRows(MemorySagaBackend):
    """S-TX-04: the drop reports success and deletes nothing."""

    def drop_namespace(self) -> None:
        return None


async def drop_leaves_data(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return DropLeavesData(fakeredis_client(), namespace, membership)


async def listing_misnames(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return ListingMisnames(fakeredis_client(), namespace, membership)


def saga_drop_keeps_rows(namespace: str) -> MemorySagaBackend:
    return SagaDropKeepsRows(namespace)


CLEANUP_STORES: dict[str, tuple[str, str]] = {
    "saga_drop_keeps_rows": ("saga", "S-TX-04"),
    "drop_leaves_data": ("store", "C-POST-12"),
    "listing_misnames": ("store", "C-POST-12"),
}
