#!/usr/bin/env python3
"""Measure how often each coverage target is reached by one ``ci`` run, over many random seeds.

    scripts/reach.py run   [--pairs memory/store,...] [--seeds 50] [--parallel 2] [--workers 1]
    scripts/reach.py table [--pairs ...]              # the markdown table of docs/ci-gate.md

Each seed is one real ``conformance run --profile ci --seed S --report ...`` (a process of its own,
without the example database, so every run stands alone, as a fresh CI job does). The reports go
to ``.ratchet/reach/<backend>-<suite>/<seed>.json``; ``run`` adds seeds until each pair has
``--seeds`` of them (so an interrupted measurement resumes), ``table`` reads them all.

A target's reach is the share of runs in which it was reached (it is a gap in the others). With
``n`` runs and none missed, the one-sided 95% bound on the miss rate is about ``3/n`` (the rule of
three); the table says how many runs stand behind each figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

EMBEDDED = (
    "memory/store",
    "memory/commit",
    "fakeredis/store",
    "fakeredis/commit",
    "memory/saga",
    "sqlite/saga",
    "fakeredis/transport",
    # make conformance runs the durability suites on them too (few examples: reopen per example)
    "memory/durability",
    "fakeredis/durability",
    "memory/saga-durability",
    "sqlite/saga-durability",
)
ROOT = Path(".ratchet/reach")


def _dir(pair: str) -> Path:
    backend, suite = pair.split("/")
    return ROOT / f"{backend}-{suite}"


def _conformance() -> str:
    here = Path(sys.executable).parent / "conformance"
    return str(here) if here.exists() else "conformance"


def _one(pair: str, seed: int, workers: int, nice: int) -> tuple[str, int, int]:
    backend, suite = pair.split("/")
    out = _dir(pair)
    command = [
        "nice",
        "-n",
        str(nice),
        _conformance(),
        "run",
        "--backend",
        backend,
        "--suite",
        suite,
        "--profile",
        "ci",
        "--seed",
        str(seed),
        "--no-database",
        "--quiet",
        "--failures",
        str(out / "failures"),
        "--report",
        str(out / f"{seed}.json.part"),
    ]
    if workers != 1:
        command += ["--workers", str(workers)]
    code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    part = out / f"{seed}.json.part"
    if part.exists():
        part.rename(out / f"{seed}.json")
    return pair, seed, code


def _run(args: argparse.Namespace) -> int:
    todo: list[tuple[str, int]] = []
    draw = random.SystemRandom()
    for pair in args.pairs:
        _dir(pair).mkdir(parents=True, exist_ok=True)
        have = len(list(_dir(pair).glob("*.json")))
        todo += [(pair, draw.randrange(2**32)) for _ in range(max(0, args.seeds - have))]
    draw.shuffle(todo)  # the pairs interleaved, so a partial measurement covers all of them
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = [pool.submit(_one, pair, seed, args.workers, args.nice) for pair, seed in todo]
        for future in concurrent.futures.as_completed(futures):
            pair, seed, code = future.result()
            print(f"{pair} seed {seed}: exit {code}", flush=True)
    return 0


@dataclasses.dataclass
class Measured:
    runs: int = 0
    targets: set[str] = dataclasses.field(default_factory=set)
    missed: Counter[str] = dataclasses.field(default_factory=Counter)
    verdicts: Counter[str] = dataclasses.field(default_factory=Counter)
    examples: int = 0  # over the runs that counted examples per target
    counted_runs: int = 0
    reaching: Counter[str] = dataclasses.field(default_factory=Counter)
    lowest: dict[str, float] = dataclasses.field(default_factory=dict)  # per target, its worst run's share

    def weakest(self) -> tuple[str, float, float, float] | None:
        """(target, share of examples reaching it, predicted chance a run misses it, the same
        from its worst run's share: examples are not quite independent draws)."""
        if not self.counted_runs or not self.examples or not self.targets:
            return None
        per_run = self.examples / self.counted_runs
        shares = {t: self.reaching[t] / self.examples for t in self.targets}
        target = min(shares, key=lambda t: shares[t])
        worst = min(self.lowest.get(t, 0.0) for t in self.targets)
        return target, shares[target], (1 - shares[target]) ** per_run, (1 - worst) ** per_run

    def any_gap(self) -> float | None:
        """The predicted chance that a run misses some target: the sum over the targets of
        ``(1 - share) ^ examples`` (a union bound, from the shares over all runs)."""
        if not self.counted_runs or not self.examples:
            return None
        per_run = self.examples / self.counted_runs
        return sum((1 - self.reaching[t] / self.examples) ** per_run for t in self.targets)


def measure(pair: str) -> Measured:
    """What the stored reports say about one pair."""
    demanded = _demanded(pair)
    m = Measured()
    for path in sorted(_dir(pair).glob("*.json")):
        report = json.loads(path.read_text())
        for result in report["results"]:
            m.runs += 1
            m.verdicts[result["verdict"]] += 1
            coverage = result["coverage"]
            gaps = {g["target"] for g in coverage["gaps"]}
            m.missed.update(gaps)
            # The demanded targets: the gaps and, of what was reached, what a run demands
            # (every demanded target is in some run's reached set or gaps).
            m.targets |= gaps | set(coverage.get("demanded") or set(coverage["reached"]) & demanded)
            counts = coverage.get("examples_reaching")
            if counts is not None and result["verdict"] in ("pass", "coverage-gap"):
                m.counted_runs += 1
                m.examples += result["examples"]
                m.reaching.update(counts)
                for target in set(coverage.get("demanded") or ()) | set(counts):
                    share = counts.get(target, 0) / max(1, result["examples"])
                    m.lowest[target] = min(m.lowest.get(target, 1.0), share)
    return m


def _demanded(pair: str) -> set[str]:
    """The coverage targets of the pair (as the runner computes them on an empty run)."""
    from conformance._faults import fault_targets
    from conformance._machine import SuiteStats
    from conformance._suites import FAMILIES, load_suites

    backend_name, suite_name = pair.split("/")
    suite = load_suites()[suite_name]
    FAMILIES[suite.family].backends()[backend_name]
    stats = SuiteStats()
    targets = set(suite.coverage_targets(stats))
    kinds, _ = fault_targets(suite.fault_kinds, stats.details)
    return targets | set(kinds)


def _table(args: argparse.Namespace) -> int:
    print(
        "| backend / suite | runs | targets | runs that missed a target | weakest target per example"
        " | its predicted miss per run | the same from its worst run | predicted runs with a gap |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|")
    for pair in args.pairs:
        m = measure(pair)
        if m.runs == 0:
            continue
        missed = ", ".join(f"{t} {n}/{m.runs}" for t, n in m.missed.most_common()) or "none"
        weakest = m.weakest()
        if weakest is None:
            weak, predicted, worst = "-", "-", "-"
        else:
            weak = f"{weakest[0]} ({weakest[1]:.3f} of examples)"
            predicted, worst = f"{weakest[2]:.1e}", f"{weakest[3]:.1e}"
        gap = m.any_gap()
        union = "-" if gap is None else f"{min(gap, 1.0):.1e}"
        cells = (pair, m.runs, len(m.targets), missed, weak, predicted, worst, union)
        print("| " + " | ".join(map(str, cells)) + " |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "table"):
        sub = commands.add_parser(name)
        sub.add_argument("--pairs", type=lambda v: v.split(","), default=list(EMBEDDED))
        if name == "run":
            sub.add_argument("--seeds", type=int, default=50)
            sub.add_argument("--parallel", type=int, default=2)
            sub.add_argument("--workers", type=int, default=1)
            sub.add_argument("--nice", type=int, default=15)
    args = parser.parse_args()
    os.makedirs(ROOT, exist_ok=True)
    return _run(args) if args.command == "run" else _table(args)


if __name__ == "__main__":
    sys.exit(main())
