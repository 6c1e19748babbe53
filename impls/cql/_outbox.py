"""``CqlOutbox``: delivery events in an outbox table, one publication per commit key.

``publish`` is ``INSERT ... IF NOT EXISTS`` keyed by the ``CommitKey`` with a fresh timeuuid as
the entry id. When the row already exists the insert does not apply and Cassandra returns the
stored row, whose entry id is *the* publication: publishing again (after a crash at M-COMMIT-04,
or concurrently) always answers with the first one, so two different publications can never both
look committed. An LWT whose outcome is unknown is settled by a SERIAL read of the row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from cassandra import ConsistencyLevel

from impls.api import OutboxEntry
from impls.cql import _namespaces
from impls.cql._boundary import Operation, translate
from impls.cql._bridge import Page, execute
from impls.cql._codec import outbox_entry_from_row, outbox_event_to_row, publication_from_row
from impls.cql._schema import Statement
from impls.cql._session import CqlSettings, Keyspace, open_keyspace
from model.commit import CommitIntent, CommitKey, MessageStoreError, OutboxPublication, StoreErrorKind

_PUBLISH_ROUNDS = 4


class CqlOutbox:
    """An ``Outbox`` on one namespace; ``stream`` names it in every publication."""

    def __init__(self, namespace: str, settings: CqlSettings | None = None) -> None:
        self._namespace = namespace
        self._settings = settings if settings is not None else CqlSettings()
        self._closed = False
        self.stream = f"ratchet-outbox/{namespace}"
        self.round_trips = 0

    async def _keyspace(self) -> Keyspace:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the outbox is closed")
        return await open_keyspace(self._settings)

    async def _run(
        self,
        keyspace: Keyspace,
        which: Statement,
        params: Sequence[object],
        operation: Operation,
        key: CommitKey | None = None,
        *,
        serial: bool = False,
        paging_state: bytes | None = None,
    ) -> Page:
        bound = keyspace.statement(which).bind(tuple(params))
        if serial:
            bound.consistency_level = ConsistencyLevel.SERIAL
        self.round_trips += 1
        try:
            return await execute(
                keyspace.session, bound, timeout=self._settings.request_timeout_s, paging_state=paging_state
            )
        except Exception as exc:
            raise translate(exc, operation, key) from None

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        """Durably publish ``intent``'s delivery event once; repeats return the first publication."""
        key = intent.key
        keyspace = await self._keyspace()
        row_key = (self._namespace, key.tenant, key.sender, key.client_message_id)
        event = outbox_event_to_row(intent)
        for _ in range(_PUBLISH_ROUNDS):
            entry_id = uuid.uuid1()  # a timeuuid: entries sort by creation time
            try:
                page = await self._run(
                    keyspace,
                    Statement.PUBLISH,
                    (
                        *row_key,
                        entry_id,
                        event["conversation"],
                        event["message_seq"],
                        event["conversation_seq"],
                        event["event"],
                    ),
                    Operation.CONDITIONAL_WRITE,
                    key,
                )
            except MessageStoreError as exc:
                if exc.kind is not StoreErrorKind.OUTCOME_UNKNOWN:
                    raise
                settled = await self._settle(keyspace, row_key, key)
                if settled is not None:
                    return settled
                continue  # the SERIAL read saw nothing, so that insert can no longer apply
            row = page.rows[0] if page.rows else None
            if row is None:
                raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database gave no answer", key)
            if row.get("[applied]") is True:
                return OutboxPublication(self.stream, str(entry_id))
            return publication_from_row(self.stream, row, key)  # the first publication stands
        raise MessageStoreError(StoreErrorKind.OUTCOME_UNKNOWN, "the publication could not be settled", key)

    async def _settle(
        self, keyspace: Keyspace, row_key: tuple[str, str, str, str], key: CommitKey
    ) -> OutboxPublication | None:
        try:
            page = await self._run(
                keyspace, Statement.READ_PUBLICATION, row_key, Operation.READ, key, serial=True
            )
        except MessageStoreError:
            raise MessageStoreError(
                StoreErrorKind.OUTCOME_UNKNOWN, "the publication could not be settled", key
            ) from None
        return publication_from_row(self.stream, page.rows[0], key) if page.rows else None

    async def entries(self) -> list[OutboxEntry]:
        """``ListableOutbox``: every row of the namespace's outbox, in entry-id (time) order.

        The table is keyed by commit key, so it cannot hold two entries for one; listing still
        shows a consumer's view. One partition, read page by page."""
        keyspace = await self._keyspace()
        found: list[OutboxEntry] = []
        paging: bytes | None = None
        while True:
            page = await self._run(
                keyspace, Statement.OUTBOX_ENTRIES, (self._namespace,), Operation.READ, paging_state=paging
            )
            found.extend(outbox_entry_from_row(self.stream, row) for row in page.rows)
            paging = page.paging_state
            if paging is None:
                break
        found.sort(key=lambda entry: uuid.UUID(entry.publication.entry_id).time)
        return found

    async def readiness(self) -> None:
        """A real query on every call; UNAVAILABLE when the server does not answer."""
        keyspace = await self._keyspace()
        await self._run(keyspace, Statement.READINESS, (), Operation.READ)

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: the whole namespace, as ``CqlMessageStore`` drops it."""
        await _namespaces.drop(await self._runner(), self._namespace, _namespaces.Written())

    async def namespaces(self) -> list[str]:
        return await _namespaces.namespaces(await self._runner())

    async def _runner(self) -> _namespaces.Run:
        keyspace = await self._keyspace()

        async def run(which: Statement, params: Sequence[object], paging: bytes | None) -> Page:
            return await self._run(keyspace, which, params, Operation.WRITE, paging_state=paging)

        return run

    async def close(self) -> None:
        self._closed = True
