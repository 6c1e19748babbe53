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


def measure(pair: str) -> tuple[int, int, Counter[str], Counter[str]]:
    """(runs, targets per run, misses per target, verdicts) from the stored reports."""
    runs = 0
    targets = 0
    missed: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    for path in sorted(_dir(pair).glob("*.json")):
        report = json.loads(path.read_text())
        for result in report["results"]:
            runs += 1
            verdicts[result["verdict"]] += 1
            targets = max(targets, result["coverage"]["targets"])
            for gap in result["coverage"]["gaps"]:
                missed[gap["target"]] += 1
    return runs, targets, missed, verdicts


def _table(args: argparse.Namespace) -> int:
    print("| backend / suite | runs | targets | lowest reach (target) | verdicts |")
    print("|---|---:|---:|---|---|")
    for pair in args.pairs:
        runs, targets, missed, verdicts = measure(pair)
        if runs == 0:
            continue
        if missed:
            worst = ", ".join(f"{(runs - n) / runs:.3f} ({t})" for t, n in missed.most_common())
        else:
            worst = f"1.000 (all {targets}; 95% bound on a miss ≤ {3 / runs:.3f})"
        seen = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items()))
        print(f"| {pair} | {runs} | {targets} | {worst} | {seen} |")
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
