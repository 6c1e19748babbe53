"""The ports of the commit runtime: what a store, an outbox and the world around them must offer.

Every backend implements ``MessageStore``; the committer is written against these protocols only,
and the conformance harness drives any object that satisfies them (docs/backend-authors.md).
Only ``MessageStoreError`` may leave a ``MessageStore`` method (C-ERR-01).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import attrs

from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    MessageRecord,
    OutboxPublication,
    ReserveCandidate,
    ReserveResult,
    StoreCapabilities,
    TenantId,
    TimestampMillis,
    UserId,
)
from model.saga import STORED_ROW_KINDS


@runtime_checkable
class MessageStore(Protocol):
    """The commit fact source (seed 000). Each method cites its rules in docs/commit-contract.md."""

    @property
    def capabilities(self) -> StoreCapabilities: ...

    async def reserve(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> ReserveResult: ...

    async def put_record(self, intent: CommitIntent) -> None: ...

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None: ...

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage: ...

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage: ...

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None: ...

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None: ...

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]: ...

    async def history_page(self, query: HistoryQuery) -> HistoryPage: ...

    async def readiness(self) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class Outbox(Protocol):
    """Publishes a committed message's delivery event and returns a durable acknowledgement.

    ``publish`` is idempotent per ``CommitKey``: publishing the same intent again returns the first
    publication, so a committer that died at M-COMMIT-04 cannot make two publications look
    committed. Errors leave as ``MessageStoreError`` (UNAVAILABLE / OUTCOME_UNKNOWN).
    """

    async def publish(self, intent: CommitIntent) -> OutboxPublication: ...

    async def readiness(self) -> None: ...

    async def close(self) -> None: ...


@attrs.frozen
class OutboxEntry:
    """One entry an outbox holds: the commit it publishes and the publication that names it."""

    key: CommitKey
    publication: OutboxPublication


@runtime_checkable
class ListableOutbox(Protocol):
    """An ``Outbox`` that can also list every entry it holds, in the order they were appended.

    Optional: the committer never lists. It is how an auditor (and the conformance harness) sees
    what a consumer of the outbox would see, e.g. a second entry for one commit key that a
    re-publish did not admit to (C-POST-07). Errors leave as ``MessageStoreError``.
    """

    async def entries(self) -> list[OutboxEntry]: ...


@runtime_checkable
class NamespaceOwner(Protocol):
    """Optional: a ``MessageStore`` or ``Outbox`` that can remove its namespace, and list those present.

    Isolation is by namespace, never by FLUSHDB or TRUNCATE (docs/backend-authors.md), so without
    this every example would leave its keys and rows behind for good. ``drop_namespace`` removes
    everything stored under this object's namespace — store and outbox data alike, whichever of the
    two is asked — and is idempotent; ``close`` still follows. ``namespaces`` lists the namespaces
    that hold data on this object's server or tables (``conformance clean`` drops the harness's
    leftovers with it). Errors leave as ``MessageStoreError``.
    """

    async def drop_namespace(self) -> None: ...

    async def namespaces(self) -> list[str]: ...


@runtime_checkable
class DeclaresInternals(Protocol):
    """Optional: the text a store's internals are made of, which must never cross its boundary.

    ``internal_text`` holds fragments of the backend's own vocabulary — key prefixes, table and
    keyspace names, script and statement fragments, its driver's exception names — that an error's
    ``detail`` may never contain (C-ERR-01). The conformance harness scans every
    ``MessageStoreError`` it sees for these, for the namespace and for the common drivers' own text.
    """

    @property
    def internal_text(self) -> frozenset[str]: ...


@runtime_checkable
class StoreInspector(Protocol):
    """Optional: one commit key's stored form, read and written raw, bypassing the store's codec.

    ``read_raw`` returns the fields the backend holds for the key's commit record as it holds them
    (a Redis hash: field name -> bytes; a CQL or SQL row: column -> the column's value; the memory
    store: attribute -> value), or None when there is none. ``write_raw`` replaces that record
    wholesale with ``fields``, values of the same types, and nothing else. The conformance harness
    uses it to compare the stored form with the model and to plant malformed data, which every read
    of the key must then refuse with ``MessageStoreError(CORRUPT)`` (docs/backend-authors.md).
    """

    async def read_raw(self, key: CommitKey) -> dict[str, object] | None: ...

    async def write_raw(self, key: CommitKey, fields: Mapping[str, object]) -> None: ...


#: The stored row kinds of a saga backend a ``SagaInspector`` reads and writes (S-TX-03).
SAGA_ROW_KINDS = STORED_ROW_KINDS


@runtime_checkable
class SagaInspector(Protocol):
    """Optional: a saga backend's stored rows of one kind, read and written raw, past its codec.

    ``kind`` is one of ``SAGA_ROW_KINDS``. ``read_raw`` returns every stored row of that kind in
    the backend's namespace as ``(key, fields)``: ``key`` the row's primary key as stored (in the
    order of the contract's identity: a saga id, ``(saga_id, revision)``, ...), ``fields`` the other
    columns, named as the contract's row fields where one column holds one field (``status``,
    ``step_index``, ``transport``, ``due_ms``, ``action``, ...), with their values as stored.
    ``write_raw`` replaces those fields of the row with ``key``, values of any type the column
    takes (None included), as a torn page or a bad restore would. ``decodes`` says whether a
    read decodes the stored form at all: False for a backend whose rows are the runtime's own
    values held in-process (the memory backend), where nothing can fail to decode and only the
    stored form's comparison with the model applies. The saga suite plants malformed rows through
    it, which every read of the row must refuse with ``SagaBackendError(CORRUPT)`` (S-TX-03).
    """

    decodes: bool

    def read_raw(self, kind: str) -> list[tuple[tuple[object, ...], dict[str, object]]]: ...

    def write_raw(self, kind: str, key: tuple[object, ...], fields: Mapping[str, object]) -> None: ...


@runtime_checkable
class LegacyImport(Protocol):
    """Optional: write one committed message in the store's pre-upgrade form (C-PRE-07, C-PRE-10).

    ``identity`` is the legacy full identity (``QIMC`` + the canonical encoding,
    ``model.commit.legacy_full_identity``), ``record`` and ``delivery`` the whole pre-upgrade
    record; the store writes them as its code before the upgrade did (the Redis store: the full
    hash with its long field names) and raises its sequence counters to the message's numbers. The
    conformance harness hands a store such data and then reads and retries the key, so the
    byte-for-byte legacy comparison is exercised by the suites. Errors leave as ``MessageStoreError``.
    """

    async def import_legacy(
        self, message: CommittedMessage, identity: bytes, record: MessageRecord, delivery: FrozenDeliveryInput
    ) -> None: ...


@runtime_checkable
class MembershipDirectory(Protocol):
    """Current conversation membership: sender admission and history authorization (C-PRE-05)."""

    async def members(self, tenant: TenantId, conversation: ConversationId) -> frozenset[UserId]: ...

    async def version(self, tenant: TenantId, conversation: ConversationId) -> int: ...


class Clock(Protocol):
    def now_ms(self) -> TimestampMillis: ...


class SystemClock:
    """Wall-clock milliseconds, for production use; the harness injects a manual clock."""

    def now_ms(self) -> TimestampMillis:
        return time.time_ns() // 1_000_000


class InMemoryMembership:
    """A membership directory held in a dict, used by tests, examples and the harness."""

    def __init__(self) -> None:
        self._members: dict[tuple[TenantId, ConversationId], frozenset[UserId]] = {}
        self._versions: dict[tuple[TenantId, ConversationId], int] = {}

    def set_members(self, tenant: TenantId, conversation: ConversationId, members: frozenset[UserId]) -> None:
        ref = (tenant, conversation)
        self._members[ref] = frozenset(members)
        self._versions[ref] = self._versions.get(ref, 0) + 1

    def snapshot(self, tenant: TenantId, conversation: ConversationId) -> frozenset[UserId]:
        return self._members.get((tenant, conversation), frozenset())

    async def members(self, tenant: TenantId, conversation: ConversationId) -> frozenset[UserId]:
        return self.snapshot(tenant, conversation)

    async def version(self, tenant: TenantId, conversation: ConversationId) -> int:
        return self._versions.get((tenant, conversation), 0)


class StoreFactory(Protocol):
    """Opens a fresh, isolated store for one namespace (a key prefix or partition component).

    Two namespaces never see each other's data, so examples need no FLUSHDB or TRUNCATE.
    """

    async def __call__(self, namespace: str, membership: MembershipDirectory) -> MessageStore: ...


class OutboxFactory(Protocol):
    async def __call__(self, namespace: str) -> Outbox: ...
