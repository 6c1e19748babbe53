"""The ``conformance`` command: ``run``, ``replay``, ``faults`` (and subcommands others register).

Exit codes: 0 pass; 1 a contract violation or a coverage gap (``replay``: the violation still
reproduces); 2 a usage or environment error, printed as one line (unreachable server, bad factory
path, unreadable failure file).

Subcommands live in ``SUBCOMMANDS``; another module adds one with ``register_subcommand`` (the bench
issue adds ``bench`` this way) and is imported from ``SUBCOMMAND_MODULES`` when present.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from conformance._faults import FAULT_KINDS, FAULT_POINTS, FaultFilter
from conformance._suites import FAMILIES, BackendUnderTest, Suite, load_suites, suite_named
from conformance._violations import HarnessEnvironmentError

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2

# Modules that add subcommands when imported; absent ones are skipped.
SUBCOMMAND_MODULES = ("conformance.bench",)


@attrs.frozen
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


SUBCOMMANDS: dict[str, Subcommand] = {}


def register_subcommand(command: Subcommand) -> Subcommand:
    SUBCOMMANDS[command.name] = command
    return command


class UsageError(Exception):
    """A bad command line or environment: printed as one line, exit code 2."""


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


# --- run ---------------------------------------------------------------------------------------


def _configure_run(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--backend", type=_csv, help="named backends, comma-separated, or all (default: memory)"
    )
    where.add_argument(
        "--store",
        metavar="MODULE:FACTORY",
        help="a third-party backend factory: a store (commit suites) or a saga backend (saga suite)",
    )
    parser.add_argument(
        "--outbox", metavar="MODULE:FACTORY", help="outbox factory for --store (default: in-memory)"
    )
    parser.add_argument(
        "--name", default=None, help="the backend's name in reports for --store (default: custom)"
    )
    parser.add_argument(
        "--suite", type=_csv, default=None, help="suites, comma-separated (default: store,commit)"
    )
    parser.add_argument("--profile", default="ci", help="ci (default) or deep")
    parser.add_argument("--examples", type=int, default=None, help="examples per backend and suite")
    parser.add_argument("--steps", type=int, default=None, help="steps per example, at most")
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: random, reported)")
    parser.add_argument(
        "--faults", type=_csv, default=None, help="only these fault kinds/points; -name drops one"
    )
    parser.add_argument("--junit", type=Path, default=None, help="write JUnit XML here")
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    parser.add_argument(
        "--metrics", type=Path, default=None, help="write the run's OpenMetrics here (steps, faults, latency)"
    )
    parser.add_argument(
        "--failures", type=Path, default=Path(".ratchet/failures"), help="failure files go here"
    )
    parser.add_argument(
        "--database",
        type=Path,
        default=Path(".ratchet/examples"),
        help="Hypothesis example database directory",
    )
    parser.add_argument("--no-database", action="store_true", help="run without the example database")
    parser.add_argument(
        "--no-coverage-gate", action="store_true", help="report coverage gaps without failing"
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress")


def _pairs(args: argparse.Namespace) -> list[tuple[BackendUnderTest, Suite]]:
    load_suites()
    suite_names = args.suite or ["store", "commit"]
    if "all" in suite_names:
        suite_names = list(load_suites())  # every registered suite, on the backends each family knows
    try:
        suites = [suite_named(name) for name in suite_names]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    pairs: list[tuple[BackendUnderTest, Suite]] = []
    if args.store:
        for suite in suites:
            try:
                family = FAMILIES[suite.family]
                custom = family.custom_backend(args.name or "custom", args.store, args.outbox)
            except ValueError as exc:
                raise UsageError(f"--outbox with suite {suite.name}: {exc}") from None
            pairs.append((custom, suite))
        return pairs
    names = args.backend or ["memory"]
    if "all" in names:
        names = list(dict.fromkeys(b for s in suites for b in FAMILIES[s.family].backends()))
    for name in names:
        matched = False
        for suite in suites:
            backend = FAMILIES[suite.family].backends().get(name)
            if backend is not None:
                pairs.append((backend, suite))
                matched = True
        if not matched:
            known = sorted({b for s in suites for b in FAMILIES[s.family].backends()})
            raise UsageError(
                f"unknown backend {name!r} for suites {','.join(suite_names)}; known: {', '.join(known)}"
            )
    return pairs


def _run(args: argparse.Namespace) -> int:
    from conformance._metrics import latency_summary, write_openmetrics
    from conformance._progress import Progress
    from conformance._runner import RunOptions, probe_service, run_matrix

    pairs = _pairs(args)
    try:
        faults = FaultFilter.parse(args.faults)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for backend in {b.name: b for b, _ in pairs}.values():
        if backend.service is not None:
            try:
                probe_service(backend.service)
            except HarnessEnvironmentError as exc:
                raise UsageError(
                    f"backend {backend.name}: {exc} (start it with: scripts/services up {backend.service})"
                ) from None
        for role in backend.factories:
            try:
                backend.factory(role)
            except ValueError as exc:
                raise UsageError(f"backend {backend.name}: bad {role} factory: {exc}") from None
    options = RunOptions(
        profile=args.profile,
        examples=args.examples,
        steps=args.steps,
        seed=args.seed,
        faults=faults,
        failure_dir=args.failures,
        database_dir=None if args.no_database else args.database,
        coverage_gate=not args.no_coverage_gate,
    )
    if args.profile not in ("ci", "deep"):
        raise UsageError(f"unknown profile {args.profile!r}; known: ci, deep")
    report = run_matrix(pairs, options, None if args.quiet else Progress())
    print(report.summary_table())
    latency = latency_summary(report)  # p50/p99 per backend method (conformance/_metrics.py)
    if latency:
        print(latency)
    details = report.details()
    if details:
        print()
        print(details)
    if args.junit is not None:
        report.write_junit(args.junit)
    if args.report is not None:
        report.write_json(args.report)
    if args.metrics is not None:
        write_openmetrics(report, args.metrics)
    return report.exit_code


# --- replay ------------------------------------------------------------------------------------


def _configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="a failure file written by `conformance run`")
    parser.add_argument(
        "--store",
        metavar="MODULE:FACTORY",
        help="replay against this store (commit suites) or saga backend (saga suite) factory instead",
    )
    parser.add_argument("--outbox", metavar="MODULE:FACTORY", help="and this outbox factory")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print each step and the failing step's calls"
    )


def _replay(args: argparse.Namespace) -> int:
    from conformance._failures import FailureFile
    from conformance._replay import replay
    from conformance._runner import probe_service

    try:
        failure = FailureFile.read(args.file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        family = FAMILIES[suite_named(failure.suite).family]
        overrides = {role: str(path) for role, path in family.overrides(args.store, args.outbox).items()}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"replaying {args.file}: {failure.suite} on {failure.backend}, {len(failure.program)} steps")
    print(f"recorded: {failure.rule_id}: {failure.message}")
    try:
        from conformance._replay import backend_for

        backend = backend_for(failure, overrides)
        if backend.service is not None and not overrides:
            probe_service(backend.service)
        result = replay(
            failure,
            overrides=overrides,
            on_step=(lambda i, text: print(f"  {i:2d}. {text}")) if args.verbose else None,
        )
    except (ValueError, HarnessEnvironmentError) as exc:
        raise UsageError(str(exc)) from None
    if args.verbose and result.trace:
        print("calls in the failing step:")
        for line in result.trace:
            print(f"    {line}")
    print(result.describe())
    return result.exit_code


# --- faults ------------------------------------------------------------------------------------


def _configure_faults(parser: argparse.ArgumentParser) -> None:
    del parser


def _faults(args: argparse.Namespace) -> int:
    load_suites()
    print("Fault points (a worker is killed there; `arm_crash(point=...)` in programs):")
    for point in sorted(FAULT_POINTS.values(), key=lambda p: (p.suite_family, p.name)):
        print(f"  {point.name:<14} [{point.suite_family}] {point.description}")
    print()
    print("Fault kinds (summary-table columns; `--faults` names):")
    width = max(len(name) for name in FAULT_KINDS)
    for kind in FAULT_KINDS.values():
        print(f"  {kind.name:<{width}}  {kind.description}")
    print()
    print("Suites:")
    for suite in load_suites().values():
        kinds = ", ".join(k.name for k in suite.fault_kinds)
        backends = ", ".join(FAMILIES[suite.family].backends())
        print(f"  {suite.name:<8} {suite.description}")
        print(f"           faults: {kinds}")
        print(f"           backends: {backends}")
    return EXIT_OK


register_subcommand(Subcommand("run", "run conformance suites against backends", _configure_run, _run))
register_subcommand(
    Subcommand("replay", "re-run a failure file's program, without Hypothesis", _configure_replay, _replay)
)
register_subcommand(
    Subcommand("faults", "print the fault catalog and the suites", _configure_faults, _faults)
)


def build_parser() -> argparse.ArgumentParser:
    for module in SUBCOMMAND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Ratchet: a fault-injecting conformance harness for commit and saga backends.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS.values():
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # MODULE:FACTORY names a module of the project being tested, as `python -m` would find it.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    # Injected faults make the runtime log what it is built to survive (a recovery that left a
    # commit unfinished); the report says what matters, so only errors reach stderr.
    logging.basicConfig(level=logging.ERROR, format="%(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except UsageError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("conformance: interrupted", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    # Run as a script this file is ``__main__``, a second copy beside ``conformance.cli``, where
    # ``register_subcommand`` puts ``bench``; so hand over to the imported module's ``main``.
    from conformance.cli import main as imported_main

    sys.exit(imported_main())
