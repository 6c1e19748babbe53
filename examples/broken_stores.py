"""Deliberately broken ``MessageStore``s, each wrong in exactly one way the contract forbids.

They subclass the in-memory store (``impls.memory``) and change one method, so every other answer
is correct and the only thing the harness can find is the planted bug. Each factory is a
``StoreFactory`` (``async (namespace, membership) -> MessageStore``) usable on the command line::

    conformance run --store examples.broken_stores:repeat_consumes_sequence --suite store

=============================  ===========  =====================================================
factory                        rule broken  the bug
=============================  ===========  =====================================================
repeat_consumes_sequence       C-POST-01    a repeated reserve allocates a new sequence number
conflict_replays_ack           C-PRE-03     a conflicting request gets the old key's result back
non_atomic_commit              C-POST-05    the atomic commit writes before it checks the
                                            publication, leaving COMMITTED behind on a refusal
history_without_authorization  C-PRE-05     history_page never asks who is reading
forgets_history_expiry         C-POST-05    commit does not register the history expiry
loses_recovery_candidate       C-POST-02    put_record drops the key from the recovery scan
=============================  ===========  =====================================================

``BROKEN_STORES`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

import attrs

from impls.api import MembershipDirectory
from impls.memory import MemoryMessageStore
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitStage,
    CommittedMessage,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveCreated,
    ReserveResult,
    StoreErrorKind,
)


class RepeatConsumesSequence(MemoryMessageStore):
    """C-POST-01: a repeat returns the stored coordinates but bumps the counters anyway."""

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        result = await super().reserve(request, delivery, candidate)
        if not isinstance(result, ReserveCreated):
            async with self._step():
                ref = (request.tenant, request.conversation)
                self._message_seq[request.tenant] = self._message_seq.get(request.tenant, 0) + 1
                self._conversation_seq[ref] = self._conversation_seq.get(ref, 0) + 1
        return result


class ConflictReplaysAck(MemoryMessageStore):
    """C-PRE-03: compares only the key, so a different request under it replays the old result."""

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        try:
            return await super().reserve(request, delivery, candidate)
        except MessageStoreError as error:
            if error.kind is not StoreErrorKind.IDENTITY_CONFLICT:
                raise
            async with self._step():
                stored = self._commits[request.commit_key]
            return _as_reserve_result(stored.loaded(request.commit_key))

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        try:
            return await super().load_commit_for_request(request)
        except MessageStoreError as error:
            if error.kind is not StoreErrorKind.IDENTITY_CONFLICT:
                raise
            async with self._step():
                return self._commits[request.commit_key].loaded(request.commit_key)


class NonAtomicCommit(MemoryMessageStore):
    """C-POST-05: writes COMMITTED and the publication first, checks the stored publication after.

    A refusal (PUBLICATION_MISMATCH) is reported correctly, but the write has already happened.
    """

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        async with self._step():
            stored = self._locate(intent)
            if stored.stage is CommitStage.RESERVED:
                raise MessageStoreError(StoreErrorKind.MISSING_EVIDENCE, "no durable record yet", intent.key)
            previous = stored.publication
            if stored.stage is CommitStage.COMMITTED:
                stored = attrs.evolve(stored, publication=publication)
                self._commits[intent.key] = stored
            else:
                stored = self._complete(intent.key, stored, publication)
            if previous is not None and previous != publication:  # checked too late
                raise MessageStoreError(
                    StoreErrorKind.PUBLICATION_MISMATCH,
                    "a different publication is already durable",
                    intent.key,
                )
            return stored.message(intent.key)


class HistoryWithoutAuthorization(MemoryMessageStore):
    """C-PRE-05: reads the page for anyone who asks."""

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        try:
            return await super().history_page(query)
        except MessageStoreError as error:
            if error.kind is not StoreErrorKind.NOT_A_MEMBER:
                raise
        # Ask again as somebody who is a member: the page the intruder should never have seen.
        members = await self._membership.members(query.tenant, query.conversation)
        if not members:
            raise MessageStoreError(StoreErrorKind.NOT_A_MEMBER, "nobody is a member")
        return await super().history_page(attrs.evolve(query, actor=sorted(members)[0]))


class ForgetsHistoryExpiry(MemoryMessageStore):
    """C-POST-05: entering COMMITTED never registers the history expiry, so nothing ever expires."""

    def _complete(self, key, stored, publication):  # type: ignore[no-untyped-def]
        committed = attrs.evolve(stored, stage=CommitStage.COMMITTED, intent=None, publication=publication)
        self._commits[key] = committed
        self._recovery.pop(key, None)
        return committed


class LosesRecoveryCandidate(MemoryMessageStore):
    """C-POST-02: drops the recovery candidate at RECORDED instead of at COMMITTED."""

    async def put_record(self, intent: CommitIntent) -> None:
        await super().put_record(intent)
        async with self._step():
            self._recovery.pop(intent.key, None)


def _as_reserve_result(loaded: LoadedCommit) -> ReserveResult:
    from model.commit import LoadedCommitted, ReserveCommitted, ReserveInFlight

    if isinstance(loaded, LoadedCommitted):
        return ReserveCommitted(loaded.message)
    return ReserveInFlight(loaded.intent, loaded.stage, loaded.publication)


async def repeat_consumes_sequence(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return RepeatConsumesSequence(namespace, membership)


async def conflict_replays_ack(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return ConflictReplaysAck(namespace, membership)


async def non_atomic_commit(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return NonAtomicCommit(namespace, membership)


async def history_without_authorization(
    namespace: str, membership: MembershipDirectory
) -> MemoryMessageStore:
    return HistoryWithoutAuthorization(namespace, membership)


async def forgets_history_expiry(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return ForgetsHistoryExpiry(namespace, membership)


async def loses_recovery_candidate(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    return LosesRecoveryCandidate(namespace, membership)


BROKEN_STORES: dict[str, str] = {
    "repeat_consumes_sequence": "C-POST-01",
    "conflict_replays_ack": "C-PRE-03",
    "non_atomic_commit": "C-POST-05",
    "history_without_authorization": "C-PRE-05",
    "forgets_history_expiry": "C-POST-05",
    "loses_recovery_candidate": "C-POST-02",
}
