"""conformance.commit._settle: reads that must settle at quiescence, and a committer's own crash."""

from __future__ import annotations

import asyncio

from conformance.commit._settle import own_crash, retry_uncertain
from model.commit import CommitError, CommitErrorKind, CommitKey, MessageStoreError, StoreErrorKind

KEY = CommitKey("t1", "alice", "m1")
DOWN = MessageStoreError(StoreErrorKind.UNAVAILABLE, "down")


def test_an_uncertain_read_is_retried_until_it_answers() -> None:
    answers: list[object] = [DOWN, "page"]

    async def call() -> object:
        return answers.pop(0)

    assert asyncio.run(retry_uncertain(call, DOWN, 5, False, None)) == "page"


def test_a_read_that_never_settles_returns_its_last_error() -> None:
    calls = 0

    async def call() -> object:
        nonlocal calls
        calls += 1
        return DOWN

    assert asyncio.run(retry_uncertain(call, DOWN, 3, False, None)) is DOWN
    assert calls == 2  # the first answer plus two more tries


def test_a_committer_error_over_its_own_crash_is_named() -> None:
    try:
        try:
            raise TypeError("'<' not supported")
        except TypeError as bug:
            raise CommitError.recoverable(KEY, "unexpected failure") from bug
    except CommitError as error:
        found = own_crash(error)
    assert found is not None and "TypeError" in found


def test_a_committer_error_over_a_store_failure_is_no_crash() -> None:
    """Not even when the store's error wraps its driver's exception: that is below the boundary."""
    try:
        try:
            try:
                raise ConnectionError("no host available")
            except ConnectionError as driver:
                raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "down") from driver
        except MessageStoreError as failure:
            raise CommitError.recoverable(KEY, "retry") from failure
    except CommitError as error:
        assert own_crash(error) is None
    assert own_crash(CommitError(CommitErrorKind.CONFLICT, "taken", KEY)) is None
