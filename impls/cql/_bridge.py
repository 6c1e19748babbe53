"""From cassandra-driver's ``ResponseFuture`` to an awaitable.

``Session.execute_async`` returns at once; the driver later runs our callback or errback on its own
I/O thread (libev), never on the asyncio loop. The callbacks therefore only hand the outcome over
with ``loop.call_soon_threadsafe``; everything else happens on the loop. A cancelled awaiter does
not cancel the request (the driver cannot), it only stops listening.

The driver ships no type information, so this module is also where its objects get types: a row is
a ``Mapping[str, object]`` (the sessions use ``dict_factory``) and a page is a ``Page``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

Row = Mapping[str, object]


@attrs.frozen
class Page:
    """The rows of one response, and where the next page starts (None: this was the last)."""

    rows: tuple[Row, ...]
    paging_state: bytes | None


def _post(
    loop: asyncio.AbstractEventLoop,
    waiter: asyncio.Future[Page],
    page: Page | None,
    error: BaseException | None,
) -> None:
    # Driver thread. A reply can outlive its loop (a test that ended, a cancelled task's loop).
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_deliver, waiter, page, error)


def _deliver(waiter: asyncio.Future[Page], page: Page | None, error: BaseException | None) -> None:
    # Runs on the asyncio loop. The awaiter may have been cancelled meanwhile.
    if waiter.done():
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        assert page is not None
        waiter.set_result(page)


async def execute(
    session: Any,
    statement: Any,
    *,
    timeout: float,
    paging_state: bytes | None = None,
) -> Page:
    """Run one statement and wait for its first page without blocking the event loop.

    Driver exceptions are raised as they are; ``impls.cql._boundary.translate`` is the caller's job.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[Page] = loop.create_future()
    response = session.execute_async(statement, timeout=timeout, paging_state=paging_state)

    def on_result(_rows: object) -> None:
        # Driver thread. The ResultSet is complete once a callback runs, so result() does not block.
        try:
            result = response.result()
            rows: Sequence[Row] = result.current_rows or ()
            page = Page(tuple(rows), result.paging_state)
        except BaseException as exc:  # handed to the loop; the driver would swallow it
            _post(loop, waiter, None, exc)
            return
        _post(loop, waiter, page, None)

    def on_error(exc: BaseException) -> None:
        _post(loop, waiter, None, exc)

    response.add_callbacks(on_result, on_error)
    return await waiter
