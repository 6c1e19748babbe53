"""``conformance bench``: how fast the harness runs and what a commit costs, measured in one run.

Theory of operation
-------------------
Sections, each figure the median of several runs with min/max and quartiles (``_figures.Spread``):

1. harness throughput (``_throughput``): real conformance runs of each suite on each backend, with
   the backend behind a timing seam (``_seam``) that splits wall time into "inside the backend"
   and "Hypothesis + harness + model";
2. commit cost (``_commit_cost``): store calls and server round trips per fresh commit, replayed
   commit and resume from each durable stage; commits per second on one connection;
3. the raw floor (``_floor``): a trivial request on each server, measured alternately with the
   commit rate, and Ratchet's rate as a share of it;
4. the Redis commit-hash footprint (``_redis_footprint``) against the contract's 552 B;
5. saga harness throughput (``_saga_throughput``): the ``saga`` suite on each saga backend, behind
   the saga timing seam (``_saga_seam``: time inside the ``SagaBackend`` port);
6. saga unit cost (``_saga_cost``): transactions, port calls and SQL statements per start (the
   orchestrator) and per command (a participant), fresh and replayed;
7. saga units per second on one connection, alternated with the raw SQL floor of the same driver
   (``_saga_floor``), and Ratchet's rate as a share of it. No target is set for sagas.

``_bench`` runs the sections (``_section.Section``: the commit side, the saga side through
``_saga_bench``, the transports through ``_transport_bench``) and checks the targets;
``_table`` prints and writes JSON. A backend whose server is down is reported as unavailable.
Benchmarks are not tests: nothing here asserts a timing; tests/conformance/test_bench.py and
test_saga_bench.py only check that every figure is produced.

Public API: ``run_bench(BenchOptions.preset(quick=True))`` -> ``BenchReport``; ``render`` and
``to_json`` turn it into the table and the JSON document.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from conformance.cli import Subcommand, UsageError, register_subcommand

if TYPE_CHECKING:
    from bench._bench import BenchOptions, BenchReport, run_bench
    from bench._table import render, to_json, write_json


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="3 short runs per figure (under two minutes)")
    parser.add_argument(
        "--backend",
        type=_csv,
        default=None,
        help="comma-separated commit and saga backends (default: every registered one, "
        "conformance/backends.py)",
    )
    parser.add_argument(
        "--suite",
        type=_csv,
        default=None,
        help="store,commit: the commit sections; saga: the saga sections (default: store,commit)",
    )
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default: 5, quick: 3)")
    parser.add_argument("--examples", type=int, default=None, help="examples per throughput run")
    parser.add_argument("--steps", type=int, default=None, help="steps per example, at most")
    parser.add_argument("--seed", type=int, default=None, help="first Hypothesis seed (default: 0)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write every figure here")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 on a missed target, unavailable backend or failed run"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--workers",
        type=_csv,
        default=None,
        metavar="N,M",
        help="only the scaling section: steps/s at each worker count, as 1,2 (bench/_scaling.py)",
    )


def options_from(args: argparse.Namespace) -> BenchOptions:
    from bench._bench import BenchOptions

    options = BenchOptions.preset(quick=args.quick)
    if args.backend is not None:
        options = attrs.evolve(options, backends=args.backend)
    if args.suite is not None:
        options = attrs.evolve(options, suites=args.suite)
    if args.runs is not None:
        if args.runs < 1:
            raise UsageError("--runs must be at least 1")
        options = attrs.evolve(options, runs=args.runs)
    if args.examples is not None:
        options = attrs.evolve(options, examples=args.examples)
    if args.steps is not None:
        options = attrs.evolve(options, steps=args.steps)
    if args.seed is not None:
        options = attrs.evolve(options, seed=args.seed)
    return options


def _run(args: argparse.Namespace) -> int:
    from bench._bench import run_bench
    from bench._table import render, write_json

    options = options_from(args)

    def progress(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)

    if args.workers is not None:
        return _run_scaling(args, options, None if args.quiet else progress)

    try:
        report = run_bench(options, None if args.quiet else progress)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(render(report))
    if args.json is not None:
        write_json(report, args.json)
        print(f"\nJSON: {args.json}")
    return report.exit_code(args.strict)


def _run_scaling(args: argparse.Namespace, options: BenchOptions, progress: Any) -> int:
    import json

    from bench._scaling import run_scaling

    try:
        counts = [int(n) for n in args.workers]
        if not counts or min(counts) < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"--workers {','.join(args.workers)}: worker counts, as 1,2") from None
    backends = args.backend if args.backend is not None else ("memory", "redis")
    suites = [s for s in options.suites if s in ("store", "commit")] or ["store", "commit"]
    try:
        scaling = run_scaling(
            backends,
            counts,
            suites=suites,
            runs=options.runs,
            examples=args.examples or 200,
            steps=args.steps or 40,
            seed=options.seed,
            say=progress,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(scaling.render())
    if args.json is not None:
        args.json.write_text(json.dumps({"scaling": scaling.to_json()}, indent=2) + "\n")
        print(f"\nJSON: {args.json}")
    return 2 if scaling.unavailable and args.strict else 0


BENCH = register_subcommand(
    Subcommand(
        "bench",
        "measure harness throughput, commit and saga unit cost, raw floors, Redis footprint",
        _configure,
        _run,
    )
)


_EXPORTS = {
    "BenchOptions": "bench._bench",
    "BenchReport": "bench._bench",
    "run_bench": "bench._bench",
    "render": "bench._table",
    "to_json": "bench._table",
    "write_json": "bench._table",
}

__all__ = [
    "BENCH",
    "BenchOptions",
    "BenchReport",
    "options_from",
    "render",
    "run_bench",
    "to_json",
    "write_json",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
