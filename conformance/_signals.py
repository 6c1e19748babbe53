"""Signals: one SIGINT or SIGTERM stops a run at the next step boundary, within a second.

Theory of operation
-------------------
A handler that raised ``KeyboardInterrupt`` wherever the main thread happened to be would land
anywhere: inside Hypothesis's own bookkeeping (a ``FlakyStrategyDefinition`` traceback), inside a
scheduler worker (which treats every ``BaseException`` as a crashed worker, so the interrupt turned
into a made-up violation), or inside a backend call, and sometimes nowhere that stopped the run.
So ``SignalGuard``'s handler only *records* the signal. The machines call ``check()`` when an
example starts and before every step; it raises ``RunInterrupted`` there, between backend calls.
``RunInterrupted`` is a ``KeyboardInterrupt``, the one exception Hypothesis lets through without
saving the example as a failure or shrinking it. The runner turns it into an ``interrupted``
result (never a verdict it did not reach), the CLI writes the reports for what finished and exits
128 + the signal number (130 for SIGINT, 143 for SIGTERM).

A step that never returns (a call stuck on a dead server) would hold that up, so the first signal
also starts a watchdog thread: if the process is still running ``grace_s`` later, it calls the
guard's ``on_deadline`` (the CLI writes what the run knows) and ends the process with ``os._exit``.
A second signal does the same at once. The process-wide flag is module state on purpose: a signal
is addressed to the process, and the machines must see it without being handed anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType

HANDLED = (signal.SIGINT, signal.SIGTERM)
GRACE_S = 0.7  # the cooperative stop gets this long; the forced one must still end within 1 s

_received: int | None = None
_received_at: float | None = None


class RunInterrupted(KeyboardInterrupt):
    """Raised at a step boundary after SIGINT/SIGTERM; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal_name(signum))


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 130 (SIGINT), 143 (SIGTERM)."""
    return 128 + signum


def pending() -> int | None:
    """The signal received, if any (None outside a ``SignalGuard`` or before a signal)."""
    return _received


def received_at() -> float | None:
    """``time.monotonic()`` when the first signal arrived."""
    return _received_at


def deliver(signum: int) -> None:
    """Record a signal another process received, as if this one had: a worker process
    (``conformance._workers``) ignores the terminal's signals and is told by its parent instead."""
    global _received, _received_at
    if _received is None:
        _received, _received_at = signum, time.monotonic()


def check() -> None:
    """Raise ``RunInterrupted`` if a signal arrived: called where stopping is safe."""
    if _received is not None:
        raise RunInterrupted(_received)


class SignalGuard:
    """Installs the recording handlers for SIGINT and SIGTERM while the block runs.

    ``on_deadline(signum)`` runs on the watchdog thread when the cooperative stop took too long;
    it should write what is known and return quickly (``reporting`` serializes it with the main
    thread's own report writing, so a file is never written by both at once).
    """

    def __init__(self, *, grace_s: float = GRACE_S, exit_after: bool = False) -> None:
        self.grace_s = grace_s
        # For the command-line process: after the block, a signal ends the process at once with
        # 128 + signum (the reports are written; the interpreter's own shutdown must not turn it
        # into a KeyboardInterrupt traceback and a -2 status). In-process callers get their
        # previous handlers back instead.
        self.exit_after = exit_after
        self.on_deadline: Callable[[int], None] | None = None
        self._previous: dict[int, object] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()

    def __enter__(self) -> SignalGuard:
        global _received, _received_at
        _received = _received_at = None
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        global _received, _received_at
        self._done.set()
        for signum, previous in self._previous.items():
            signal.signal(signum, _exit_now if self.exit_after else previous)  # type: ignore[arg-type]
        self._previous.clear()
        if not self.exit_after:
            _received = _received_at = None

    @contextlib.contextmanager
    def reporting(self) -> Iterator[None]:
        """Hold while writing the final reports, so the watchdog does not write them too."""
        with self._lock:
            yield

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        global _received, _received_at
        del frame
        if _received is not None:
            self._force(signum)  # a second signal: no more waiting
            return
        _received, _received_at = signum, time.monotonic()
        threading.Thread(
            target=self._watch, args=(signum,), name="ratchet-signal-watchdog", daemon=True
        ).start()

    def _watch(self, signum: int) -> None:
        if not self._done.wait(self.grace_s):
            self._force(signum)

    def _force(self, signum: int) -> None:
        """End the process now (on the watchdog thread, or on a second signal)."""
        # If the main thread is writing its reports right now, it is about to exit by itself;
        # give it a moment, then go regardless.
        if self._lock.acquire(timeout=0.25):
            try:
                if self.on_deadline is not None and not self._done.is_set():
                    # The exit below must happen whatever the report writer ran into.
                    with contextlib.suppress(BaseException):
                        self.on_deadline(signum)
            finally:
                self._lock.release()
        if self._done.is_set():
            return
        try:
            sys.stderr.write(f"conformance: interrupted by {signal_name(signum)}\n")
            sys.stderr.flush()
        finally:
            os._exit(exit_code(signum))


def _exit_now(signum: int, frame: FrameType | None) -> None:
    del frame
    os._exit(exit_code(signum))
