"""Every backend factory the harness calls goes through ``named_factory``.

Two things happen at that door. A factory that raises is the *backend's* error, not the harness's:
the exception becomes a ``BackendFactoryError`` naming the backend, the role and the factory path
(an environment error, exit 2), instead of "the harness failed: RuntimeError". And each object a
factory returns is recorded, with the arguments it was opened with, in the list of the example
being run (``opening_into``), so that the example's namespaces can be dropped when it passes and
reopened to be dropped later (``conformance._cleanup``).

The list lives in a ``ContextVar``: the commit factories are awaited inside the example's event
loop, whose tasks copy the context, and a copy still refers to the same list.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs

from conformance._violations import HarnessEnvironmentError


class BackendFactoryError(HarnessEnvironmentError):
    """A backend's factory raised: the backend could not be opened (exit 2, no verdict)."""


@attrs.frozen(eq=False)
class Opened:
    """One object a factory returned, and how to open it again."""

    factory: Callable[..., Any]  # the undecorated factory
    args: tuple[Any, ...]
    value: Any
    kwargs: dict[str, Any] = attrs.field(factory=dict)  # e.g. the fault proxy's endpoint


_opening: contextvars.ContextVar[list[Opened] | None] = contextvars.ContextVar(
    "ratchet_opening", default=None
)


@contextlib.contextmanager
def opening_into(opened: list[Opened]) -> Iterator[list[Opened]]:
    """Record into ``opened`` every object a ``named_factory`` returns while the block runs."""
    token = _opening.set(opened)
    try:
        yield opened
    finally:
        _opening.reset(token)


def start_recording() -> list[Opened]:
    """Record from now on (for the rest of this context) into a new list, returned: an example's
    machine calls it in ``__init__`` and reads the list in ``teardown``."""
    opened: list[Opened] = []
    _opening.set(opened)
    return opened


def named_factory(factory: Callable[..., Any], label: str) -> Callable[..., Any]:
    """``factory``, with its failures named by ``label`` and what it opens recorded."""

    def failed(exc: Exception) -> BackendFactoryError:
        return BackendFactoryError(f"{label} raised {type(exc).__name__}: {exc}")

    @functools.wraps(factory)
    def opened(*args: Any, **kwargs: Any) -> Any:
        try:
            value = factory(*args, **kwargs)
        except HarnessEnvironmentError:
            raise
        except Exception as exc:
            raise failed(exc) from exc
        if inspect.isawaitable(value):
            return _awaited(value, factory, args, kwargs, failed)
        _record(factory, args, kwargs, value)
        return value

    opened.ratchet_factory = factory  # type: ignore[attr-defined]
    return opened


async def _awaited(
    pending: Awaitable[Any],
    factory: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    failed: Callable[[Exception], BackendFactoryError],
) -> Any:
    try:
        value = await pending
    except HarnessEnvironmentError:
        raise
    except Exception as exc:
        raise failed(exc) from exc
    _record(factory, args, kwargs, value)
    return value


def _record(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], value: Any) -> None:
    opened = _opening.get()
    if opened is not None:
        opened.append(Opened(factory, args, value, dict(kwargs)))
