"""Backend call latency per method: a fixed-bucket histogram, cheap enough to feed on every call.

``SuiteStats.latency`` holds one; the suites' backend timers feed it (``conformance/saga/_timing.py``,
the commit oracle's store calls). ``conformance/_metrics.py`` renders it as OpenMetrics and as the
summary's p50/p99 lines.
"""

from __future__ import annotations

import bisect

import attrs

#: Upper bounds in seconds, 1-2.5-5 per decade from 1 µs to 10 s; ``+Inf`` beyond.
LATENCY_BOUNDS: tuple[float, ...] = (
    1e-06, 2.5e-06, 5e-06, 1e-05, 2.5e-05, 5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


@attrs.define
class CallLatencies:
    """Per method: non-cumulative bucket counts (``+Inf`` last), the count and the sum."""

    buckets: dict[str, list[int]] = attrs.field(factory=dict)
    sums: dict[str, float] = attrs.field(factory=dict)

    def observe(self, method: str, seconds: float) -> None:
        counts = self.buckets.get(method)
        if counts is None:
            counts = self.buckets[method] = [0] * (len(LATENCY_BOUNDS) + 1)
            self.sums[method] = 0.0
        counts[bisect.bisect_left(LATENCY_BOUNDS, seconds)] += 1
        self.sums[method] += seconds

    def absorb(self, other: CallLatencies) -> None:
        """Add ``other``'s observations (another worker's share of the same suite)."""
        for method, counts in other.buckets.items():
            mine = self.buckets.setdefault(method, [0] * (len(LATENCY_BOUNDS) + 1))
            for index, n in enumerate(counts):
                mine[index] += n
            self.sums[method] = self.sums.get(method, 0.0) + other.sums.get(method, 0.0)

    def count(self, method: str) -> int:
        return sum(self.buckets.get(method, ()))

    def quantile(self, method: str, q: float) -> float:
        """As PromQL's ``histogram_quantile``: linear inside the bucket holding rank ``q``."""
        counts = self.buckets.get(method)
        total = sum(counts) if counts else 0
        if not counts or total == 0:
            return 0.0
        rank, seen = q * total, 0
        for index, n in enumerate(counts):
            if seen + n >= rank and n:
                if index == len(LATENCY_BOUNDS):
                    return LATENCY_BOUNDS[-1]  # beyond the last bound: its bound, as PromQL does
                low = LATENCY_BOUNDS[index - 1] if index else 0.0
                return low + (LATENCY_BOUNDS[index] - low) * (rank - seen) / n
            seen += n
        return LATENCY_BOUNDS[-1]
