"""Stores without the atomic commit step, whose second step can fail: legal, and the same bug claimed atomic.

``TwoStepStore`` is the in-memory store declaring ``atomic_publish_and_commit=False`` and doing
``mark_published_and_committed`` the contract's default way (C-POST-06), as the CQL store does:
``mark_outbox_published``, then ``mark_committed``. In ``SecondStepFails`` every other combined call
loses its second step: the first step applied, then the call fails UNAVAILABLE. OUTBOXED with the
publication stays behind as the recoverable fact the contract asks for, and the harness must accept
it (a positive control, tests/conformance/test_outbox_examples.py)::

    conformance run --store examples.two_step_store:second_step_fails --suite store,commit

``ClaimsAtomicSecondStepFails`` is the same store declaring the atomic capability: on an atomic
store an uncertain commit that leaves OUTBOXED is a partial write, and the harness reports C-POST-05.
"""

from __future__ import annotations

from impls.api import MembershipDirectory
from impls.memory import MemoryMessageStore
from model.commit import (
    CommitIntent,
    CommittedMessage,
    MessageStoreError,
    OutboxPublication,
    StoreCapabilities,
    StoreErrorKind,
)


class TwoStepStore(MemoryMessageStore):
    """C-POST-06: no atomic step; ``mark_published_and_committed`` is the default two steps."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(atomic_publish_and_commit=False)

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        await self.mark_outbox_published(intent, publication)
        return await self.mark_committed(intent)


class SecondStepFails(TwoStepStore):
    """Every other combined call: the first step applies, the second never reaches the store."""

    def __init__(self, namespace: str, membership: MembershipDirectory) -> None:
        super().__init__(namespace, membership)
        self._combined = 0

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        self._combined += 1
        if self._combined % 2 == 1:
            return await super().mark_published_and_committed(intent, publication)
        await self.mark_outbox_published(intent, publication)
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "mark_committed did not answer", intent.key)


class ClaimsAtomicSecondStepFails(SecondStepFails):
    """C-POST-05: declares the atomic step but can stop half way."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(atomic_publish_and_commit=True)


async def two_step_store(namespace: str, membership: MembershipDirectory) -> TwoStepStore:
    return TwoStepStore(namespace, membership)


async def second_step_fails(namespace: str, membership: MembershipDirectory) -> SecondStepFails:
    return SecondStepFails(namespace, membership)


async def claims_atomic_second_step_fails(
    namespace: str, membership: MembershipDirectory
) -> ClaimsAtomicSecondStepFails:
    return ClaimsAtomicSecondStepFails(namespace, membership)
