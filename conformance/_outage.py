"""An outage is an environment error, never a verdict; a call that never returns is one too.

Theory of operation
-------------------
Two things end a suite as ``ERROR`` (exit 2, one line naming what failed) instead of a violation:

* **An outage.** When a run fails in any way (a violation, Hypothesis's flaky-strategy complaint,
  a harness traceback), the runner first asks the backend's service whether it still answers
  (``outage_reason``: one real protocol request, conformance/services/). A server that does not
  is why the run failed: no failure file, no JUnit failure. A server the harness itself killed
  (``server-crash``) is back before the harness reads again, so it never counts.
* **The watchdog.** Every backend call the commit oracle makes, every factory, drop and close is
  awaited under a bound (``RATCHET_WATCHDOG_S``, default 20 s; a store's own timeouts are shorter).
  A call that does not return within it raises ``BackendLost``, a ``BaseException``: Hypothesis does
  not shrink it (it would only hang again), a committer does not turn it into a ``CommitError``, and
  ``RunContext.environment_error`` keeps the first such reason so that a wrapper which did catch it
  (a worker's outcome) cannot make a verdict of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Witness(Protocol):
    """Where the first lost call is kept (``RunContext``): a wrapper that catches ``BackendLost``
    cannot turn the outage into a verdict."""

    environment_error: str | None


DEFAULT_WATCHDOG_S = 20.0


class BackendLost(BaseException):
    """The backend stopped answering under the run (hung call, unreachable server): exit 2."""


def watchdog_seconds() -> float:
    raw = os.environ.get("RATCHET_WATCHDOG_S", "").strip()
    try:
        return float(raw) if raw else DEFAULT_WATCHDOG_S
    except ValueError:
        return DEFAULT_WATCHDOG_S


async def bounded(what: str, call: Awaitable[T], context: Witness | None = None) -> T:
    """Await ``call``; past the watchdog's bound, ``BackendLost`` naming ``what``."""
    limit = watchdog_seconds()
    # ``wait_for``, not ``asyncio.timeout`` in the caller's task: with the latter a frozen Redis was
    # once reported as redis-py's own "Timeout reading from socket" instead of the watchdog (a
    # fresh-clone run; alone it passed twice). The watchdog's verdict must not depend on that race.
    try:
        return await asyncio.wait_for(call, limit)
    except TimeoutError:
        raise lost(
            f"{what} did not return within {limit:g}s (watchdog; RATCHET_WATCHDOG_S)", context
        ) from None


def bounded_sync(what: str, call: Callable[[], T], context: Witness | None = None) -> T:
    """``call()`` on a helper thread, bounded like ``bounded`` (a blocking factory cannot be cancelled:
    the thread is left behind, the run ends)."""
    limit = watchdog_seconds()
    box: list[T] = []
    failure: list[BaseException] = []
    # The caller's context variables go along (the run's record of opened backends, _opened.py).
    caller = contextvars.copy_context()

    def run() -> None:
        try:
            box.append(caller.run(call))
        except BaseException as error:  # re-raised on the caller's thread
            failure.append(error)

    worker = threading.Thread(target=run, name=f"ratchet-watchdog:{what}", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise lost(_late(what, limit), context)
    if failure:
        raise failure[0]
    return box[0]


def _late(what: str, limit: float) -> str:
    return f"{what} did not return within {limit:g}s (watchdog; RATCHET_WATCHDOG_S)"


def lost(reason: str, context: Witness | None = None) -> BackendLost:
    if context is not None and context.environment_error is None:
        context.environment_error = reason
    return BackendLost(reason)


def outage_reason(service: str | None) -> str | None:
    """One line if ``service`` does not answer now (it went away under the run), else None."""
    if service is None:
        return None
    from conformance import services

    try:
        reason = services.probe(service, timeout=3.0)
    except ValueError:
        return None
    if reason is None:
        return None
    return f"{reason} (it went away during the run: an outage, not a verdict)"
