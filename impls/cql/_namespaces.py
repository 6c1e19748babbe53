"""Dropping one namespace, and listing the namespaces present (``impls.api.NamespaceOwner``).

Every table has ``ns`` as the first partition key column, so a namespace is a set of partitions:
``recovery`` and ``outbox`` have one each (``(ns)``), ``ledger`` one per tenant and ``history`` one
per conversation. A store knows the tenants and conversations it wrote (``Written``), so dropping
after an example is a handful of partition deletes. A store that wrote nothing (opened only to
clean up) finds them with ``SELECT DISTINCT`` over the partition keys: a full scan, which is why it
is the fallback and not the rule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import attrs

from impls.cql._bridge import Page
from impls.cql._schema import Statement

Run = Callable[[Statement, Sequence[object], bytes | None], Awaitable[Page]]


@attrs.define
class Written:
    """The partitions one store object wrote into, beyond the namespace-wide ones."""

    tenants: set[str] = attrs.field(factory=set)
    conversations: set[tuple[str, str]] = attrs.field(factory=set)

    def __bool__(self) -> bool:
        return bool(self.tenants or self.conversations)


async def drop(run: Run, namespace: str, written: Written) -> None:
    if not written:
        written = await _scan(run, namespace)
    for tenant in sorted(written.tenants):
        await run(Statement.DROP_LEDGER, (namespace, tenant), None)
    for tenant, conversation in sorted(written.conversations):
        await run(Statement.DROP_HISTORY, (namespace, tenant, conversation), None)
    await run(Statement.DROP_RECOVERY, (namespace,), None)
    await run(Statement.DROP_OUTBOX, (namespace,), None)
    written.tenants.clear()
    written.conversations.clear()


async def namespaces(run: Run) -> list[str]:
    found: set[str] = set()
    for which in (
        Statement.LEDGER_PARTITIONS,
        Statement.HISTORY_PARTITIONS,
        Statement.RECOVERY_PARTITIONS,
        Statement.OUTBOX_PARTITIONS,
    ):
        found.update(str(row["ns"]) for row in await _all(run, which))
    return sorted(found)


async def _scan(run: Run, namespace: str) -> Written:
    written = Written()
    for row in await _all(run, Statement.LEDGER_PARTITIONS):
        if row["ns"] == namespace:
            written.tenants.add(str(row["tenant"]))
    for row in await _all(run, Statement.HISTORY_PARTITIONS):
        if row["ns"] == namespace:
            written.conversations.add((str(row["tenant"]), str(row["conversation"])))
    return written


async def _all(run: Run, which: Statement) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    paging: bytes | None = None
    while True:
        page = await run(which, (), paging)
        rows.extend(dict(row) for row in page.rows)
        paging = page.paging_state
        if paging is None:
            return rows
