"""The CQL store's ``impls.api.StoreInspector``: a commit key's ledger row, read and replaced raw.

Harness-only (docs/backend-authors.md). ``read_raw`` is the store's own ``READ_COMMIT`` (the commit
columns of the key's row, as the driver decodes them: ints, blobs, text, a uuid); ``write_raw``
rewrites those columns of the row with one plain ``INSERT`` (a column left out is written null).
Errors leave as ``MessageStoreError`` through the store's own translation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from impls.cql._boundary import Operation, translate
from impls.cql._schema import COMMIT_COLUMNS, Statement
from model.commit import CommitKey

if TYPE_CHECKING:
    from impls.cql._bridge import Page
    from impls.cql._session import Keyspace


class CqlInspector:
    """Mixed into ``CqlMessageStore``."""

    if TYPE_CHECKING:

        async def _keyspace(self) -> Keyspace: ...

        async def _send(
            self, keyspace: Keyspace, statement: Any, operation: Operation, key: CommitKey | None
        ) -> Page: ...

        async def _run(
            self,
            keyspace: Keyspace,
            which: Statement,
            params: Sequence[object],
            operation: Operation,
            key: CommitKey,
        ) -> Page: ...

        def _row_key(self, key: CommitKey) -> tuple[str, str, str, str]: ...

    async def read_raw(self, key: CommitKey) -> dict[str, object] | None:
        keyspace = await self._keyspace()
        page = await self._run(keyspace, Statement.READ_COMMIT, self._row_key(key), Operation.READ, key)
        if not page.rows or page.rows[0].get("stage") is None:
            return None
        row = page.rows[0]
        return {column: row.get(column) for column in COMMIT_COLUMNS}

    async def write_raw(self, key: CommitKey, fields: Mapping[str, object]) -> None:
        keyspace = await self._keyspace()
        text = (
            f"INSERT INTO {keyspace.settings.keyspace}.ledger (ns, tenant, sender, cmid, "
            f"{', '.join(COMMIT_COLUMNS)}) VALUES ({', '.join('?' * (4 + len(COMMIT_COLUMNS)))})"
        )
        try:
            prepared = await asyncio.to_thread(keyspace.session.prepare, text)
        except Exception as exc:
            raise translate(exc, Operation.SETUP, key) from None
        values = (*self._row_key(key), *(fields.get(column) for column in COMMIT_COLUMNS))
        await self._send(keyspace, prepared.bind(values), Operation.WRITE, key)
