"""The shapes every benchmark figure takes: a spread of runs, and a target checked against it.

A figure is never one number: each is measured ``runs`` times and reported as the median with its
min, max and quartiles (``Spread``), so a reader sees how steady it was. Targets (docs/performance.md)
are checked on the median.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import attrs

PASS, MISS, NOT_MEASURED = "PASS", "MISS", "n/a"


@attrs.frozen
class Spread:
    """The median of several runs of one figure, and how far the runs strayed from it."""

    median: float
    min: float
    max: float
    q1: float
    q3: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        if not samples:
            raise ValueError("a spread needs at least one sample")
        values = tuple(float(s) for s in samples)
        if len(values) >= 2:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        else:
            q1 = q3 = values[0]
        return cls(statistics.median(values), min(values), max(values), q1, q3, values)

    @property
    def steady(self) -> bool:
        """Every run gave the same value (call and round-trip counts should)."""
        return self.min == self.max

    def show(self, digits: int = 0, *, spread: bool = True) -> str:
        """``1234 [1180-1301]``: the median, then min-max when the runs differed."""
        median = f"{self.median:.{digits}f}"
        if not spread or self.steady:
            return median
        return f"{median} [{self.min:.{digits}f}-{self.max:.{digits}f}]"


@attrs.frozen
class TargetCheck:
    """One target of the bench and whether the measured median meets it."""

    name: str
    wanted: str
    measured: str
    verdict: str  # PASS, MISS, or n/a when the figure could not be measured (backend unavailable)


def at_least(name: str, measured: Spread | None, floor: float, unit: str = "") -> TargetCheck:
    wanted = f">= {floor:g}{unit}"
    if measured is None:
        return TargetCheck(name, wanted, "unavailable", NOT_MEASURED)
    verdict = PASS if measured.median >= floor else MISS
    return TargetCheck(name, wanted, f"{measured.show(0 if floor >= 10 else 2)}{unit}", verdict)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


class Stopwatch:
    """Counts operations for at least ``seconds`` (and at least ``minimum`` operations).

    Besides wall time it reads this process's CPU time (all threads), so a figure can say how much
    of each operation was spent computing here rather than waiting for the server.
    """

    def __init__(self, seconds: float, minimum: int = 1) -> None:
        self._seconds = seconds
        self._minimum = minimum
        self.count = 0
        self._start = time.perf_counter()
        self._cpu_start = time.process_time()
        self.elapsed = 0.0
        self.cpu = 0.0

    def running(self) -> bool:
        self.elapsed = time.perf_counter() - self._start
        self.cpu = time.process_time() - self._cpu_start
        return self.count < self._minimum or self.elapsed < self._seconds

    def tick(self) -> None:
        self.count += 1

    @property
    def per_second(self) -> float:
        return rate(self.count, self.elapsed)

    @property
    def cpu_us_per_op(self) -> float:
        return 1e6 * self.cpu / self.count if self.count else 0.0


@attrs.define
class Tally:
    """Several stopwatch slices of one operation added up: one run of an interleaved measurement."""

    count: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0

    def add(self, watch: Stopwatch) -> None:
        self.count += watch.count
        self.elapsed += watch.elapsed
        self.cpu += watch.cpu

    @property
    def per_second(self) -> float:
        return rate(self.count, self.elapsed)

    @property
    def cpu_us_per_op(self) -> float:
        return 1e6 * self.cpu / self.count if self.count else 0.0
