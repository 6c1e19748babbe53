"""A dropped namespace reads back as empty (C-POST-12), for the commit-family machines.

``conformance._cleanup.Namespaces.passed`` drops a passing example's namespaces, opens each again
with its factory and hands the reopened object here. A store must load none of the keys the model
held, find nothing to recover a day later and show no history in any conversation the model
wrote to (``model.commit.drop_namespace``: the state of a namespace never written); a
``ListableOutbox`` must list no entry. Reads only: the namespace is empty, so a read
writes nothing a later drop would have to remove. No call here draws from Hypothesis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from conformance.commit import _vocabulary as v
from conformance.commit._oracle import StoreOracle
from impls.api import InMemoryMembership, ListableOutbox, MessageStore
from model.commit import MAX_SCAN_ITEMS, MessageStoreError, StoreErrorKind, holds_data

_OUTAGES = frozenset({StoreErrorKind.UNAVAILABLE, StoreErrorKind.OUTCOME_UNKNOWN})


class CommitCleanupJudge:
    """``conformance._cleanup.CleanupJudge`` over one example's oracle (C-POST-12; C-ERR-01 for a
    foreign exception out of a drop: the port promises ``MessageStoreError``)."""

    cleanup_rule = "C-POST-12"
    foreign_error_rule: str | None = "C-ERR-01"
    environment: tuple[type[BaseException], ...] = (MessageStoreError, asyncio.TimeoutError)

    def __init__(
        self,
        oracle: StoreOracle,
        membership: InMemoryMembership,
        now: int,
        run: Callable[[Awaitable[Any]], Any],
        reached: Callable[[str], None],
    ) -> None:
        self.oracle, self.membership, self.now, self.run = oracle, membership, now, run
        self.reached = reached

    lists_dropped = False
    may_list_nothing = False  # the memory store lists its own namespace while it holds data

    def holds_data(self, live: object) -> bool:
        """The model's state (``model.commit.holds_data``): the live object is not asked."""
        return holds_data(self.oracle.state)

    def leftovers(self, reopened: object) -> str | None:
        """An outage (UNAVAILABLE, OUTCOME_UNKNOWN) is raised: no verdict. Any other refusal of a
        read on an emptied namespace (CORRUPT: half a commit left behind) is data left."""
        try:
            found: str | None = self.run(self._leftovers(reopened))
        except MessageStoreError as error:
            if error.kind in _OUTAGES:
                raise
            return f"a read of the emptied namespace failed as {error.kind.value}"
        return found

    async def _leftovers(self, reopened: object) -> str | None:
        if isinstance(reopened, ListableOutbox):
            entries = await reopened.entries()
            if entries:
                return f"the outbox lists {len(entries)} entries"
        if not isinstance(reopened, MessageStore):
            return None
        for key in sorted(self.oracle.conversation_of, key=lambda k: k.sort_key()):
            if await reopened.load_commit(key, self.oracle.conversation_of[key]) is not None:
                return f"load_commit({key}) still finds the commit"
        recoverable = await reopened.scan_recoverable_commits(self.now + v.DAY_MS, MAX_SCAN_ITEMS)
        if recoverable:
            return f"scan_recoverable_commits still finds {len(recoverable)} commits"
        for tenant, conversation in sorted(self.oracle.state.history):
            members = sorted(self.membership.snapshot(tenant, conversation))
            if not members:
                continue
            query = v.history_query(tenant, conversation, members[0], "after", None, 100, 1 << 20, self.now)
            page = await reopened.history_page(query)
            if page.entries:
                return f"history of {tenant}/{conversation} still shows {len(page.entries)} entries"
        return None
