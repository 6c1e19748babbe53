"""Waiting, bounded, for a driver that reconnects after a healed wire fault (C-PRE-06).

Behind the fault proxy one reset can leave a driver reconnecting for a while (cassandra-driver
marks its only host down), so a readiness that answers UNAVAILABLE right after a healed fault is
asked again with backoff before the harness judges it; about 12 s in all, like the oracle's
read-backs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from model.commit import CommitError, CommitErrorKind


def unavailable(error: BaseException | None) -> bool:
    return isinstance(error, CommitError) and error.kind is CommitErrorKind.UNAVAILABLE


async def readiness_again(
    ready: Callable[[], Awaitable[None]],
    error: CommitError | None,
    *,
    settled: Callable[[], bool] = lambda: False,
) -> CommitError | None:
    """Ask ``ready`` again while it answers UNAVAILABLE and ``settled`` is false; the last answer
    (None: ready)."""
    for attempt in range(1, 12):
        if settled() or not unavailable(error):
            return error
        await asyncio.sleep(min(0.05 * 2**attempt, 2.0))
        try:
            await ready()
        except CommitError as again:
            error = again
            continue
        return None
    return error
