#!/usr/bin/env python3
"""Measure how often each coverage target is reached by one ``ci`` run, over many random seeds.

    scripts/reach.py run   [--pairs memory/store,...] [--seeds 50] [--parallel 2] [--full]
    scripts/reach.py table [--pairs ...]              # the markdown table of docs/ci-gate.md

Each seed is one real ``conformance run --profile ci --seed S --report ...`` (a process of its own,
without the example database, so every run stands alone, as a fresh CI job does). The reports go
to ``.ratchet/reach/<backend>-<suite>/<seed>.json``; ``run`` adds seeds until each pair has
``--seeds`` of them (so an interrupted measurement resumes), ``table`` reads them all.

With ``--stop-when-covered`` (the default; ``--full`` runs every example) a run stops as soon as
every demanded target was reached: with a fixed seed and no database, Hypothesis's examples come
in a fixed order (the settings, ``max_examples`` included, are the ci run's), so the examples
before the stop are the ci run's own, and whether the ci run reaches a target is decided by them.
Each report gives the example that first reached each target (``first_reached_in_example``); a
target the run missed ran through every example. The same seed with and without the stop gives
the same first-reaching examples (docs/ci-gate.md, checked on memory/store, memory/commit and
sqlite/saga). One process runs every measured suite of a backend for a seed, one after the other,
each as its own ci run would (the reports are split per pair).

A target's reach is the share of runs in which it was reached (it is a gap in the others). With
``n`` runs and none missed, the one-sided 95% bound on the miss rate is about ``3/n`` (the rule of
three); the table says how many runs stand behind each figure. The prediction beside it treats the
examples up to a target's first hit as independent tries: per-example rate ``hits / tries`` over
the runs (a run that reached it at example ``k`` tried ``k`` times, a run that missed it every
example), and a run of ``N`` examples misses it with ``(1 - rate) ^ N``. Hypothesis's first
examples are its smallest, so first hits come late and this errs on the side of a miss.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import random
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
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


def _one(backend: str, suites: list[str], seed: int, nice: int, stop: bool) -> tuple[str, int, int]:
    """One seed's run of every suite of one backend in one process (each pair is judged alone,
    with the run's seed, as in a ci run of it; one start-up instead of one per suite). Its
    report is split into one file per pair."""
    scratch = ROOT / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    part = scratch / f"{backend}-{seed}.json"
    command = [
        "nice",
        "-n",
        str(nice),
        _conformance(),
        "run",
        "--backend",
        backend,
        "--suite",
        ",".join(suites),
        "--profile",
        "ci",
        "--seed",
        str(seed),
        "--no-database",
        "--quiet",
        "--failures",
        str(ROOT / "failures"),
        "--report",
        str(part),
    ]
    # One process, as a ci run: ``--workers`` runs other seeds' examples (docs/ci-gate.md).
    if stop:
        command.append("--stop-when-covered")
    code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    _split(part)
    return backend, seed, code


def _split(part: Path) -> None:
    """One file per pair (``<seed>.json``) from a run's report; what did not finish is left out."""
    if not part.exists():
        return
    report = json.loads(part.read_text())
    for result in report["results"]:
        if result["verdict"] in ("interrupted", "not-run"):
            continue
        out = _dir(f"{result['backend']}/{result['suite']}")
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{result['seed']}.json").write_text(json.dumps({**report, "results": [result]}, indent=1))
    part.unlink()


#: Suites whose ``server-crash`` kills the backend's real server (SIGKILL, restart on the same data).
CRASH_SUITES = frozenset({"durability", "saga-durability"})


def _server(backend: str) -> str | None:
    """The real service ``backend`` runs on, None for an embedded one."""
    from conformance.backends import COMMIT_BACKENDS, SAGA_BACKENDS, TRANSPORT_BACKENDS

    for specs in (COMMIT_BACKENDS, SAGA_BACKENDS, TRANSPORT_BACKENDS):
        spec = specs.get(backend)
        if spec is not None and spec.service is not None:
            return spec.service
    return None


class _Servers:
    """Runs on one real server share it, but a run with a crash suite has it alone: with
    ``--parallel 2`` one seed's saga-durability killed PostgreSQL under another seed's saga suite
    (its pooled sessions ended "terminating connection due to unexpected postmaster exit", a BEGIN
    refused as ``ROLLED_BACK``), a verdict of neither run (docs/ci-gate.md, "Not judged")."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._users: Counter[str] = Counter()
        self._alone: set[str] = set()  # servers a crash run holds, or waits for
        self._waiting: Counter[str] = Counter()  # crash runs waiting: no new run starts beside

    @contextlib.contextmanager
    def held(self, server: str | None, *, kills: bool) -> Iterator[None]:
        if server is None:
            yield
            return
        with self._changed:
            if kills:
                self._waiting[server] += 1
                self._changed.wait_for(lambda: self._users[server] == 0 and server not in self._alone)
                self._waiting[server] -= 1
                self._alone.add(server)
            else:
                self._changed.wait_for(lambda: server not in self._alone and not self._waiting[server])
            self._users[server] += 1
        try:
            yield
        finally:
            with self._changed:
                self._users[server] -= 1
                if kills:
                    self._alone.discard(server)
                self._changed.notify_all()


def _run(args: argparse.Namespace) -> int:
    need: dict[str, list[tuple[str, int]]] = {}
    for pair in args.pairs:
        _dir(pair).mkdir(parents=True, exist_ok=True)
        backend, suite = pair.split("/")
        need.setdefault(backend, []).append(
            (suite, max(0, args.seeds - len(list(_dir(pair).glob("*.json")))))
        )
    draw = random.SystemRandom()
    todo: list[tuple[str, list[str], int]] = []
    for backend, suites in need.items():
        for i in range(max(n for _, n in suites)):
            todo.append((backend, [s for s, n in suites if n > i], draw.randrange(2**32)))
    draw.shuffle(todo)  # the backends interleaved, so a partial measurement covers all of them
    servers = _Servers()

    def one(backend: str, suites: list[str], seed: int) -> tuple[str, int, int]:
        with servers.held(_server(backend), kills=any(s in CRASH_SUITES for s in suites)):
            return _one(backend, suites, seed, args.nice, not args.full)

    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        futures = [pool.submit(one, b, suites, seed) for b, suites, seed in todo]
        for future in concurrent.futures.as_completed(futures):
            backend, seed, code = future.result()
            print(f"{backend} seed {seed}: exit {code}", flush=True)
    return 0


@dataclasses.dataclass
class Measured:
    runs: int = 0
    targets: set[str] = dataclasses.field(default_factory=set)
    missed: Counter[str] = dataclasses.field(default_factory=Counter)
    verdicts: Counter[str] = dataclasses.field(default_factory=Counter)
    stopped: int = 0  # runs that stopped once every target was reached
    planned: int = 0  # the ci run's examples (max_examples), the largest any run asked for
    #: Over the runs that give first hits (pass or coverage gap): per target, the runs that
    #: reached it, the examples tried up to its first hit (all of a run's for a miss), and the
    #: latest first hit.
    judged: int = 0
    hits: Counter[str] = dataclasses.field(default_factory=Counter)
    tries: Counter[str] = dataclasses.field(default_factory=Counter)
    latest: dict[str, int] = dataclasses.field(default_factory=dict)

    def rate(self, target: str) -> float:
        """Per-example chance of a first hit, from the first hits (geometric: hits / tries)."""
        return self.hits[target] / max(1, self.tries[target])

    def predicted_miss(self, target: str) -> float:
        return float((1 - self.rate(target)) ** self.planned)

    def weakest(self) -> str | None:
        """The target with the highest predicted chance of a miss per run."""
        if not self.judged or not self.targets:
            return None
        return max(sorted(self.targets), key=self.predicted_miss)

    def any_gap(self) -> float | None:
        """The predicted chance that a run misses some target: the sum over the targets (a union
        bound)."""
        if not self.judged:
            return None
        return sum(self.predicted_miss(t) for t in self.targets)


def measure(pair: str) -> Measured:
    """What the stored reports say about one pair."""
    demanded = _demanded(pair)
    m = Measured()
    for path in sorted(_dir(pair).glob("*.json")):
        report = json.loads(path.read_text())
        for result in report["results"]:
            m.runs += 1
            m.verdicts[result["verdict"]] += 1
            m.stopped += bool(result.get("stopped_when_covered"))
            m.planned = max(m.planned, result.get("examples_target") or 0)
            coverage = result["coverage"]
            gaps = {g["target"] for g in coverage["gaps"]}
            m.missed.update(gaps)
            # The demanded targets: the gaps and, of what was reached, what a run demands
            # (every demanded target is in some run's reached set or gaps).
            wanted = gaps | set(coverage.get("demanded") or set(coverage["reached"]) & demanded)
            m.targets |= wanted
            first = coverage.get("first_reached_in_example")
            if first is None or result["verdict"] not in ("pass", "coverage-gap"):
                continue
            m.judged += 1
            for target in wanted:
                if target in first:
                    m.hits[target] += 1
                    m.tries[target] += first[target]
                    m.latest[target] = max(m.latest.get(target, 0), first[target])
                else:
                    m.tries[target] += result["examples"]
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
        "| backend / suite | runs (stopped when covered) | examples per ci run | targets"
        " | runs that missed a target | latest first hit over the runs | weakest target by first hits"
        " | its predicted miss per run | predicted runs with a gap |"
    )
    print("|---|---:|---:|---:|---|---|---|---:|---:|")
    for pair in args.pairs:
        m = measure(pair)
        if m.runs == 0:
            continue
        missed = ", ".join(f"{t} {n}/{m.runs}" for t, n in m.missed.most_common()) or "none"
        latest = "-"
        if m.latest:
            target = max(sorted(m.latest), key=lambda t: m.latest[t])
            latest = f"{target}: example {m.latest[target]}"
        weakest = m.weakest()
        if weakest is None:
            weak, predicted = "-", "-"
        else:
            weak = f"{weakest} (1 in {1 / max(m.rate(weakest), 1e-9):.1f} examples)"
            predicted = f"{m.predicted_miss(weakest):.1e}"
        gap = m.any_gap()
        union = "-" if gap is None else f"{min(gap, 1.0):.1e}"
        errors = sum(n for v, n in m.verdicts.items() if v not in ("pass", "coverage-gap"))
        runs = f"{m.runs} ({m.stopped}" + (f"; {errors} not judged: error or violation)" if errors else ")")
        cells = (pair, runs, m.planned, len(m.targets), missed, latest, weak, predicted, union)
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
            sub.add_argument("--nice", type=int, default=15)
            sub.add_argument("--full", action="store_true", help="every example, not up to full coverage")
    args = parser.parse_args()
    os.makedirs(ROOT, exist_ok=True)
    for part in sorted((ROOT / "scratch").glob("*.json")):  # runs a stopped measurement left
        _split(part)
    return _run(args) if args.command == "run" else _table(args)


if __name__ == "__main__":
    sys.exit(main())
