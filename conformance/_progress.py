"""Live progress: one updating line on a terminal, a plain line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from conformance._machine import RunContext


class Progress:
    """Called by the machines as they run (``RunContext.progress``) and by the runner per suite."""

    def __init__(self, stream: TextIO | None = None, *, interval_s: float | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.interval_s = interval_s if interval_s is not None else (0.2 if self.tty else 10.0)
        self._last = time.perf_counter()
        self._dirty = False

    def __call__(self, context: RunContext) -> None:
        now = time.perf_counter()
        if now - self._last < self.interval_s:
            return
        self._last = now
        stats = context.stats
        elapsed = now - context.started
        rate = stats.steps / elapsed if elapsed > 0 else 0.0
        injected = sum(stats.faults.values())
        text = (
            f"{context.backend}/{context.suite}: {_examples(context)}, {stats.steps} steps "
            f"({rate:.0f}/s), {injected} faults, {elapsed:.0f}s{_eta(context, elapsed)}"
        )
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self._dirty = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def line(self, text: str) -> None:
        """A permanent line (a suite started or ended)."""
        if self.tty and self._dirty:
            self.stream.write("\r\x1b[2K")
            self._dirty = False
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last = time.perf_counter()


def _examples(context: RunContext) -> str:
    done = context.stats.examples
    target = context.target_examples
    return f"{done}/{target} examples" if target else f"{done} examples"


def _eta(context: RunContext, elapsed: float) -> str:
    """Time left: from the rate so far, or the budget if that ends sooner; none while shrinking."""
    if context.last_failure is not None:
        return f", shrinking {context.last_failure.violation.rule_id}"
    done, target = context.stats.examples, context.target_examples
    left = None
    if target and done > 0:
        left = max(0.0, elapsed / done * (target - done))
    if context.deadline is not None:
        budget_left = max(0.0, context.deadline - time.monotonic())
        left = budget_left if left is None else min(left, budget_left)
    return "" if left is None else f", ETA {_duration(left)}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
