"""The harness's own metrics: what a run did and how long the backend took, per method.

``SuiteStats.latency`` (``conformance/_latency.py``) is a fixed-bucket histogram of backend call
latency per method, fed by the suites' backend timers: recording is a bisect and two additions,
so it costs the run next to nothing. At the end of a run ``write_openmetrics`` renders the report
as OpenMetrics (steps, examples, faults by kind, elapsed time, the latency histograms) with
prometheus-client's OpenMetrics writer, and ``latency_summary`` is the p50/p99 per method the
summary prints — what a CI owner looks at when a gate slows down.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest

from conformance._latency import LATENCY_BOUNDS
from conformance._report import Report

# -- OpenMetrics of a run --------------------------------------------------------------------


@attrs.frozen(eq=False)  # registered by identity
class _RunCollector:
    report: Report

    def collect(self) -> Iterator[Metric]:
        results = self.report.results
        labels = ["backend", "suite"]
        steps = CounterMetricFamily("ratchet_run_steps", "Program steps run.", labels=labels)
        examples = CounterMetricFamily("ratchet_run_examples", "Examples run.", labels=labels)
        elapsed = GaugeMetricFamily("ratchet_run_elapsed_seconds", "Wall time of the run.", labels=labels)
        faults = CounterMetricFamily(
            "ratchet_run_faults", "Faults injected, by kind.", labels=[*labels, "kind"]
        )
        calls = HistogramMetricFamily(
            "ratchet_backend_call_seconds", "Backend call latency, by method.", labels=[*labels, "method"]
        )
        for r in results:
            key = [r.backend, r.suite]
            steps.add_metric(key, r.stats.steps)
            examples.add_metric(key, r.stats.examples)
            elapsed.add_metric(key, r.elapsed_s)
            for kind, n in sorted(r.stats.faults.items()):
                faults.add_metric([*key, kind], n)
            latency = r.stats.latency
            for method in sorted(latency.buckets):
                cumulative, running = [], 0
                for bound, n in zip([*LATENCY_BOUNDS, float("inf")], latency.buckets[method], strict=True):
                    running += n
                    cumulative.append((_bound(bound), running))
                calls.add_metric([*key, method], cumulative, latency.sums[method])
        yield from (steps, examples, elapsed, faults, calls)


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


def openmetrics(report: Report) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RunCollector(report))
    text: bytes = generate_latest(registry)  # type: ignore[no-untyped-call]
    return text


def write_openmetrics(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(openmetrics(report))


# -- the summary's latency lines -----------------------------------------------------------------


def duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g}us"
    return f"{seconds * 1e3:.3g}ms" if seconds < 1 else f"{seconds:.3g}s"


def latency_summary(report: Report, width: int = 100, methods: int = 8) -> str:
    """p50/p99 latency of the ``methods`` that took the most backend time, per backend and suite,
    in lines of at most ``width`` columns."""
    out: list[str] = []
    for r in report.results:
        latency = r.stats.latency
        busiest: Sequence[str] = sorted(latency.sums, key=lambda m: -latency.sums[m])[:methods]
        if not busiest:
            continue
        cells = [
            f"{m} {duration(latency.quantile(m, 0.5))}/{duration(latency.quantile(m, 0.99))}" for m in busiest
        ]
        line = f"  {r.backend}/{r.suite}:"
        for cell in cells:
            if len(line) + 2 + len(cell) > width:
                out.append(line)
                line = "   "
            line += f"  {cell}"
        out.append(line)
    if not out:
        return ""
    return "\n".join(["backend latency p50/p99 of the methods taking the most backend time:", *out])
