"""Reads at quiescence settle (C-PRE-06): an uncertain answer is retried, bounded.

At quiescence every fault is disarmed and readiness answered, so a read that stays UNAVAILABLE or
OUTCOME_UNKNOWN means readiness vouched for a backend that cannot serve. Without this, a store
that answers every history read UNAVAILABLE passes: an uncertain read is excused mid-run (a fault
may explain it). Behind a fault proxy the retries back off as ``StoreOracle.load_real``'s do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from model.commit import MessageStoreError

T = TypeVar("T")


def uncertain(result: object) -> bool:
    return isinstance(result, MessageStoreError) and result.kind.is_uncertain


async def retry_uncertain(
    call: Callable[[], Awaitable[T | MessageStoreError]],
    first: T | MessageStoreError,
    attempts: int,
    backoff: bool,
    outage: Callable[[], Awaitable[None]] | None,
) -> T | MessageStoreError:
    """``first``, or the first answer of up to ``attempts - 1`` more calls that is not uncertain."""
    result = first
    for attempt in range(1, attempts):
        if not uncertain(result):
            break
        if backoff:
            await asyncio.sleep(min(0.05 * 2**attempt, 2.0))
        if outage is not None:
            await outage()
        result = await call()
    return result


def never_settled(op: str, last: MessageStoreError, attempts: int) -> str:
    return (
        f"{op} stayed {last.kind.name} at quiescence ({attempts} tries, nothing armed) after "
        f"readiness answered: {str(last)[:120]!r}"
    )
