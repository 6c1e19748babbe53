"""A *correct* store whose writes sometimes end uncertainly: the harness must not blame it.

``UncertainStore`` wraps the in-memory store. Every 5th write applies and then reports
OUTCOME_UNKNOWN (a timed-out conditional write that did go through); every 7th fails with
UNAVAILABLE before it reaches the store. Both are legal answers (C-ERR-01): the harness settles
each one by reading the key back, and the committer converges by re-reading. A positive control for
the harness's uncertain-outcome handling (tests/conformance/test_examples.py)::

    conformance run --store examples.uncertain_store:uncertain_store
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from impls.api import MembershipDirectory
from impls.memory import MemoryMessageStore
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommittedMessage,
    FrozenDeliveryInput,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveResult,
    StoreErrorKind,
)

T = TypeVar("T")


class UncertainStore(MemoryMessageStore):
    def __init__(self, namespace: str, membership: MembershipDirectory) -> None:
        super().__init__(namespace, membership)
        self._writes = 0

    async def _uncertain(self, write: Callable[[], Awaitable[T]]) -> T:
        self._writes += 1
        if self._writes % 7 == 0:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the server did not answer")
        result = await write()
        if self._writes % 5 == 0:
            raise MessageStoreError(StoreErrorKind.OUTCOME_UNKNOWN, "the conditional write timed out")
        return result

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        return await self._uncertain(
            lambda: super(UncertainStore, self).reserve(request, delivery, candidate)
        )

    async def put_record(self, intent: CommitIntent) -> None:
        await self._uncertain(lambda: super(UncertainStore, self).put_record(intent))

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        await self._uncertain(lambda: super(UncertainStore, self).mark_outbox_published(intent, publication))

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        return await self._uncertain(
            lambda: super(UncertainStore, self).mark_published_and_committed(intent, publication)
        )

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        return await self._uncertain(lambda: super(UncertainStore, self).mark_committed(intent))


async def uncertain_store(namespace: str, membership: MembershipDirectory) -> UncertainStore:
    return UncertainStore(namespace, membership)
