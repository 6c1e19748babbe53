"""``conformance bench --workers 1,2``: harness steps per second at each worker count, in one run.

Real conformance runs (``run_matrix`` with ``conformance._workers.SplitRunner``) of the chosen
commit suites on each backend, the worker counts alternated run by run so a change in the
machine's load falls on all of them alike; each figure is the median of ``runs`` runs of the
merged steps over the wall time of the whole split run (process start and merge included). The
ratio is each count's median over the one-worker median. The load average before and after is
printed beside them: on a shared machine it says what the ratio could be.

One worker and two run different programs (the shares' seeds are derived from the run's), and what
a step costs moves with the program, so steps per CPU second alone cannot show what the split
costs. Beside each run of ``N > 1`` workers the same ``N`` shares (same seeds, same examples) run
one after the other in this process: ``split cpu`` is the workers' CPU over that one process's CPU
on the same programs (1.00x: the split costs nothing).
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

SCALING_TARGET = 1.8  # issue 19: two workers on a two-core machine, memory backend


@attrs.frozen
class ScalingFigure:
    backend: str
    workers: int
    steps_per_second: tuple[float, ...]  # one per run
    verdicts: tuple[str, ...]
    #: Steps per CPU second (this process and its workers): flat across worker counts when the
    #: split costs nothing, so a ratio below the worker count is the machine's, not the split's.
    steps_per_cpu_second: tuple[float, ...] = ()
    #: CPU of the workers (and parent) over the CPU of the same shares run one after the other in
    #: one process, per run: what the split itself costs, on the same programs.
    split_cpu: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.steps_per_second) if self.steps_per_second else 0.0


@attrs.frozen
class Scaling:
    figures: tuple[ScalingFigure, ...]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    cores: int
    examples: int
    steps: int
    suites: tuple[str, ...]
    unavailable: dict[str, str]

    def ratio(self, backend: str, workers: int) -> float | None:
        by = {(f.backend, f.workers): f.median for f in self.figures}
        one, many = by.get((backend, 1)), by.get((backend, workers))
        return many / one if one and many is not None else None

    def render(self) -> str:
        runs = len(self.figures[0].steps_per_second) if self.figures else 0
        lines = [
            f"harness steps/s by worker count ({','.join(self.suites)}, {self.examples} examples x "
            f"<= {self.steps} steps per suite; median of {runs} runs; {self.cores} cores)",
            f"load average before {_load(self.load_before)}, after {_load(self.load_after)}",
            f"{'backend':<10} {'workers':>7} {'steps/s':>9} {'ratio':>6} {'steps/cpu-s':>11} {'split cpu':>9}"
            "  runs (steps/s)",
        ]
        for f in self.figures:
            ratio = self.ratio(f.backend, f.workers)
            each = ", ".join(f"{v:.0f}" for v in f.steps_per_second)
            bad = [v for v in f.verdicts if v != "pass"]
            note = f"  ({len(bad)} runs not pass: {', '.join(sorted(set(bad)))})" if bad else ""
            text = "-" if ratio is None else f"{ratio:.2f}x"
            cpu = statistics.median(f.steps_per_cpu_second) if f.steps_per_cpu_second else 0.0
            split = f"{statistics.median(f.split_cpu):.2f}x" if f.split_cpu else "-"
            cells = f"{f.backend:<10} {f.workers:>7} {f.median:>9.0f} {text:>6} {cpu:>11.0f} {split:>9}"
            lines.append(f"{cells}  {each}{note}")
        for backend, why in self.unavailable.items():
            lines.append(f"{backend:<10} unavailable: {why}")
        memory = self.ratio("memory", 2)
        if memory is not None:
            verdict = "PASS" if memory >= SCALING_TARGET else "MISS"
            lines.append(f"target: memory 2 workers >= {SCALING_TARGET}x of 1: {memory:.2f}x {verdict}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "cores": self.cores,
            "load_before": list(self.load_before),
            "load_after": list(self.load_after),
            "examples": self.examples,
            "steps": self.steps,
            "suites": list(self.suites),
            "figures": [
                {
                    "backend": f.backend,
                    "workers": f.workers,
                    "steps_per_second_median": round(f.median, 1),
                    "steps_per_second": [round(v, 1) for v in f.steps_per_second],
                    "ratio": self.ratio(f.backend, f.workers),
                    "verdicts": list(f.verdicts),
                    "steps_per_cpu_second": [round(v, 1) for v in f.steps_per_cpu_second],
                    "split_cpu": [round(v, 3) for v in f.split_cpu],
                }
                for f in self.figures
            ],
            "unavailable": self.unavailable,
        }


def run_scaling(
    backends: Sequence[str],
    workers: Sequence[int],
    *,
    suites: Sequence[str] = ("store", "commit"),
    runs: int = 3,
    examples: int = 200,
    steps: int = 40,
    seed: int = 0,
    say: Callable[[str], None] | None = None,
) -> Scaling:
    from conformance import services
    from conformance._runner import RunOptions, run_matrix, run_suite
    from conformance._suites import FAMILIES, load_suites, suite_named
    from conformance._workers import Split, SplitRunner, auto_workers, part_options

    load_suites()
    chosen = [suite_named(s) for s in suites]
    unavailable: dict[str, str] = {}
    pairs_of = {}
    for name in backends:
        pairs = [
            (FAMILIES[s.family].backends()[name], s) for s in chosen if name in FAMILIES[s.family].backends()
        ]
        if not pairs:
            raise ValueError(f"no suite of {','.join(suites)} runs on backend {name!r}")
        service = pairs[0][0].service
        why = services.probe(service) if service is not None else None
        if why is not None:
            unavailable[name] = why
            continue
        pairs_of[name] = pairs
    samples: dict[tuple[str, int], list[float]] = {}
    per_cpu: dict[tuple[str, int], list[float]] = {}
    split_cpu: dict[tuple[str, int], list[float]] = {}
    verdicts: dict[tuple[str, int], list[str]] = {}
    before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ratchet-scaling-") as tmp:
        for run in range(runs):
            for name, pairs in pairs_of.items():
                for count in workers:
                    options = RunOptions(
                        examples=examples,
                        steps=steps,
                        seed=seed + run,
                        failure_dir=Path(tmp),
                        database_dir=None,
                        coverage_gate=False,
                    )
                    runner = SplitRunner(Split(count)) if count > 1 else None
                    cpu_before = _cpu_s()
                    report = run_matrix(pairs, options, None, None, runner)
                    cpu = _cpu_s() - cpu_before
                    done = sum(r.stats.steps for r in report.results)
                    wall = sum(r.elapsed_s for r in report.results)
                    rate = done / wall if wall > 0 else 0.0
                    samples.setdefault((name, count), []).append(rate)
                    per_cpu.setdefault((name, count), []).append(done / cpu if cpu > 0 else 0.0)
                    verdicts.setdefault((name, count), []).extend(r.verdict.value for r in report.results)
                    if count > 1 and done:
                        # The same shares, one after the other in this process: the same programs.
                        split = Split(count)
                        cpu_before = _cpu_s()
                        alone = sum(
                            run_suite(
                                s, b, part_options(options, s, b, split, k, seed + run), None, None
                            ).stats.steps
                            for b, s in pairs
                            for k in split.mine
                        )
                        one = _cpu_s() - cpu_before
                        if alone and one > 0:
                            split_cpu.setdefault((name, count), []).append((cpu / done) / (one / alone))
                    if say is not None:
                        say(f"scaling {name} x{count} run {run + 1}/{runs}: {rate:.0f} steps/s")
    after = os.getloadavg()
    figures = tuple(
        ScalingFigure(
            name,
            count,
            tuple(samples[(name, count)]),
            tuple(verdicts[(name, count)]),
            tuple(per_cpu[(name, count)]),
            tuple(split_cpu.get((name, count), ())),
        )
        for name in pairs_of
        for count in workers
    )
    return Scaling(figures, before, after, auto_workers(), examples, steps, tuple(suites), unavailable)


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that ended (the workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _load(values: tuple[float, float, float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)
