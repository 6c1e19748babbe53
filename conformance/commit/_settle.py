"""Reads at quiescence settle (C-PRE-06): an uncertain answer is retried, bounded.

At quiescence every fault is disarmed and readiness answered, so a read that stays UNAVAILABLE or
OUTCOME_UNKNOWN means readiness vouched for a backend that cannot serve. Without this, a store
that answers every history read UNAVAILABLE passes: an uncertain read is excused mid-run (a fault
may explain it). Behind a fault proxy the retries back off as ``StoreOracle.load_real``'s do.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from model.commit import CommitError, MessageStoreError, StoreErrorKind

T = TypeVar("T")
_Call = TypeVar("_Call", bound=Callable[..., Awaitable[Any]])


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


def own_crash(error: CommitError) -> str | None:
    """C-ERR-02: what a committer's ``CommitError`` hides when it wraps an exception that nothing
    below it raised; None when its causes are store or outbox failures (or there are none).

    The suites' store, outbox and membership directory raise only contract errors (a store raising
    anything else is C-ERR-01 at once), so a ``TypeError`` under a RECOVERABLE is the committer's
    own crash, dressed as "retry later": a retry meets the same bug. Mutation testing found that
    such a crash after any failed call passed as an excused RECOVERABLE (docs/sensitivity.md).
    """
    seen: set[int] = set()
    cause = error.__cause__  # an explicit ``raise ... from``: what the committer says it wraps
    while isinstance(cause, CommitError) and id(cause) not in seen:
        seen.add(id(cause))
        cause = cause.__cause__
    # A MessageStoreError is the store boundary: what a store wraps below it is the store's own.
    if cause is None or isinstance(cause, MessageStoreError | CommitError):
        return None
    found = f"{type(cause).__name__}: {cause!r}"
    return f"the committer answered {error.kind.value} over its own {found}"[:300]


def gave_up_unsettled(failures: list[StoreErrorKind] | None, attempts: int, what: str) -> str | None:
    """C-POST-08: a lost or uncertain answer is settled by re-reading the fact source.

    ``failures``: the store and outbox errors a committer holding ``attempts`` was given in one whole
    call (None when unknown: interleaved workers). A RECOVERABLE when the only failure was uncertain
    hands the uncertainty back instead of re-reading: mutation testing found a retry budget spent at
    the first failure passing as an excused RECOVERABLE (docs/sensitivity.md)."""
    if failures is None or len(failures) != 1 or not failures[0].is_uncertain or attempts < 2:
        return None
    return (
        f"{what} gave up (RECOVERABLE) after a single {failures[0].name} answer with {attempts} "
        "attempts: an uncertain answer is settled by re-reading the store"
    )


def records_failures(method: _Call) -> _Call:
    """For the oracle's ``write`` and ``read``: every ``MessageStoreError`` a caller is given,
    injected or the backend's own, goes to the oracle's ``failed_calls`` (``gave_up_unsettled``)."""

    @functools.wraps(method)
    async def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except MessageStoreError as error:
            self.failed_calls.append(error.kind)
            raise

    return cast(_Call, recorded)
