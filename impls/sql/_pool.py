"""Idle server sessions kept per endpoint, so opening a saga namespace costs no handshake.

A backend parks its session here when it closes (rolled back, healthy) and the next backend opened
on the same endpoint takes it. Once parked, a session is the pool's: the closed backend holds a
``Detached`` in its place, so a later call on it never reaches the session of whoever took it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: Idle connections kept per endpoint; a harness example opens three namespaces at a time.
POOL_SIZE = 8

_lock = threading.Lock()
_idle: dict[str, list[Any]] = {}


def _forget_after_fork() -> None:
    """A forked process must not share the parent's idle connections (one socket, two users)."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def take_idle(endpoint: str) -> Any | None:
    with _lock:
        pool = _idle.get(endpoint)
        return pool.pop() if pool else None


def park(endpoint: str, raw: Any) -> bool:
    """Keep ``raw`` for the next backend on ``endpoint``; False when the pool is full."""
    with _lock:
        pool = _idle.setdefault(endpoint, [])
        if len(pool) >= POOL_SIZE:
            return False
        pool.append(raw)
        return True


class Detached:
    """Stands for the connection of a backend closed after its session was parked: closed for every
    engine's ``usable`` (so ``begin`` connects afresh), and closing it is a no-op."""

    closed = True
    broken = True
    open = False

    def close(self) -> None:
        pass

    def cursor(self) -> Any:
        raise ConnectionError("a closed saga backend's connection is back in the pool")
