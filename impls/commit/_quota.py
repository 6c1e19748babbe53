"""Send quota: the admission check the committer runs for a *new* commit only (C-PRE-08).

A retry of a reserved key is never re-admitted: the sender was admitted when the key was reserved.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from impls.api import Clock
from model.commit import TenantId, UserId


@runtime_checkable
class Quota(Protocol):
    """Whether a sender may start one more message now. Consumes one unit when it answers True."""

    async def admit(self, tenant: TenantId, sender: UserId) -> bool: ...


class SenderQuota:
    """At most ``limit`` new messages per sender in each fixed window of ``window_ms``.

    Held in this process's memory: a per-node limit, for tests, examples and single-node use.
    """

    def __init__(self, limit: int, clock: Clock, *, window_ms: int = 60_000) -> None:
        if limit < 0 or window_ms <= 0:
            raise ValueError("limit must be >= 0 and window_ms > 0")
        self._limit = limit
        self._clock = clock
        self._window_ms = window_ms
        self._used: dict[tuple[TenantId, UserId], tuple[int, int]] = {}  # -> (window start, count)

    async def admit(self, tenant: TenantId, sender: UserId) -> bool:
        window = self._clock.now_ms() // self._window_ms
        start, used = self._used.get((tenant, sender), (window, 0))
        if start != window:
            used = 0
        if used >= self._limit:
            return False
        self._used[(tenant, sender)] = (window, used + 1)
        return True
