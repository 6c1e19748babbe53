"""The ``conformance`` command: ``run``, ``replay``, ``faults`` (and subcommands others register).

Exit codes: 0 pass; 1 a contract violation or a coverage gap (``replay``: the violation still
reproduces); 2 a usage or environment error, printed as one line (unreachable server, bad factory
path, unreadable failure file); 130 / 143 interrupted by SIGINT / SIGTERM (the reports of what had
finished are still written; ``conformance._signals``).

``main`` installs the signal handlers before it imports the harness (Hypothesis and the suites
take a few hundred milliseconds to import), so a Ctrl-C at any moment is an interrupt, never a
traceback; that is why the heavy imports below are inside the functions that need them.

Subcommands live in ``SUBCOMMANDS``; another module adds one with ``register_subcommand`` when it is
imported: the harness's own from ``SUBCOMMAND_MODULES``, other packages through the entry-point
group ``ratchet.subcommands`` (the ``bench`` package adds ``bench`` this way: the harness never
imports it by name).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from conformance import _signals
from conformance._selection import (
    CUSTOM_FLAGS,
    add_custom_flags,
    given_customs,
    pairs_to_run,
    with_committer_flag,
    with_control_flag,
)
from conformance._usage import (
    OneLineParser,
    check_writable_dir,
    check_writable_file,
    duration_s,
    join_dash_values,
    positive_int,
)
from conformance._usage import UsageError as UsageError  # re-exported: subcommands raise it
from conformance._violations import HarnessEnvironmentError
from conformance.backends import BACKEND_GROUPS
from impls.endpoints import SERVICE_NAMES

if TYPE_CHECKING:
    from conformance._report import Report

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2
DEFAULT_DATABASE = Path(".ratchet/examples")
# conformance._settings.PROFILES' names, spelled here so that parsing imports no Hypothesis.
PROFILE_NAMES = ("ci", "deep", "mutation")
# Flags whose values may start with "-" (a fault filter that drops one: --faults -crash).
DASH_VALUE_FLAGS = ("--faults",)

# Modules that add subcommands when imported; absent ones are skipped.
SUBCOMMAND_MODULES = ("conformance._clean_cli", "conformance._merge_cli")
# Packages beside the harness register theirs under this entry-point group (pyproject.toml).
SUBCOMMAND_ENTRY_POINTS = "ratchet.subcommands"


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


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


# --- run ---------------------------------------------------------------------------------------


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        type=_csv,
        help=f"named backends or groups ({', '.join(BACKEND_GROUPS)}), comma-separated; -name drops one "
        "(default: memory)",
    )
    add_custom_flags(parser, "test")
    parser.add_argument(
        "--outbox", metavar="MODULE:FACTORY", help="outbox factory for --store (default: in-memory)"
    )
    parser.add_argument(
        "--name", default=None, help="the backend's name in reports for a custom backend (default: custom)"
    )
    parser.add_argument(
        "--committer",
        metavar="MODULE:FACTORY",
        help="a committer for the commit suite, called as impls.commit.MessageCommitter (default: it)",
    )
    parser.add_argument(
        "--control",
        metavar="MODULE:FACTORY",
        help="a conformance.crash.ServiceControl factory for a custom backend: the durability suites "
        "then kill its server (server-crash)",
    )
    parser.add_argument(
        "--service",
        default=None,
        choices=SERVICE_NAMES,
        help="the real service a custom backend's factories reach; with an `endpoint` keyword they are "
        "opened through a fault proxy and the wire faults apply",
    )
    parser.add_argument(
        "--suite", type=_csv, default=None, help="suites, comma-separated (default: store,commit)"
    )
    parser.add_argument(
        "--profile",
        default="ci",
        choices=PROFILE_NAMES,
        help="ci (default), deep, or mutation (make mutation: no shrinking, stop at the first failed suite)",
    )
    parser.add_argument("--examples", type=positive_int, default=None, help="examples per backend and suite")
    parser.add_argument("--steps", type=positive_int, default=None, help="steps per example, at most")
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: random, reported)")
    parser.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="processes sharing each suite's examples (auto: one per core; default 1)",
    )
    parser.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="run this machine's share of a CI matrix of N (1-based); `conformance merge` joins them",
    )
    parser.add_argument(
        "--shrink-budget",
        type=duration_s,
        default=None,
        metavar="DURATION",
        help="shrink a found failure for at most this long (30s, 2m), then make it 1-minimal by replay",
    )
    parser.add_argument(
        "--time-budget",
        type=duration_s,
        default=None,
        metavar="DURATION",
        help="stop generating when spent (90s, 10m, 1h; shared by the suites), shrink what was found, report",
    )
    parser.add_argument("--stop-when-covered", action="store_true", help=argparse.SUPPRESS)  # reach.py
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
        default=None,
        help="Hypothesis example database directory (default: .ratchet/examples)",
    )
    parser.add_argument("--no-database", action="store_true", help="run without the example database")
    parser.add_argument(
        "--no-coverage-gate", action="store_true", help="report coverage gaps without failing"
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress")


def _refuse_inapplicable(args: argparse.Namespace) -> None:
    """Flags that would be silently ignored are refused: the user meant something by them."""
    given = given_customs(args)
    if args.backend and given:
        raise UsageError(f"--backend and {', '.join(given)} contradict each other; give one")
    if not given:
        for flag, value in (("--outbox", args.outbox), ("--name", args.name)):
            if value is not None:
                raise UsageError(
                    f"{flag} applies to a custom backend only (--store, --saga-backend, --streams); "
                    "named backends have their own"
                )
    if args.no_database and args.database is not None:
        raise UsageError("--no-database and --database contradict each other; give one")


def _check_outputs(args: argparse.Namespace) -> None:
    """Every place the run will write, tried before the first example."""
    check_writable_dir(args.failures, "--failures")
    if not args.no_database:
        check_writable_dir(args.database or DEFAULT_DATABASE, "--database")
    if args.report is not None:
        check_writable_file(args.report, "--report")
    if args.junit is not None:
        check_writable_file(args.junit, "--junit")
    if args.metrics is not None:
        check_writable_file(args.metrics, "--metrics")
    if args.report is not None and args.junit is not None and args.report.resolve() == args.junit.resolve():
        raise UsageError("--report and --junit name the same file")


def _run(args: argparse.Namespace) -> int:
    from conformance._faults import FaultFilter
    from conformance._journal import Journal
    from conformance._metrics import latency_summary, write_openmetrics
    from conformance._progress import Progress
    from conformance._runner import RunOptions, probe_service, run_matrix
    from conformance._workers import SplitRunner, parse_split

    _refuse_inapplicable(args)
    try:
        split = parse_split(args.workers, args.shard)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    pairs = with_control_flag(with_committer_flag(pairs_to_run(args), args.committer), args.control)
    try:
        faults = FaultFilter.parse(args.faults)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _check_outputs(args)
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
        database_dir=None if args.no_database else (args.database or DEFAULT_DATABASE),
        coverage_gate=not args.no_coverage_gate,
        time_budget_s=args.time_budget,
        shrink_budget_s=args.shrink_budget,
        stop_when_covered=args.stop_when_covered,
    )
    journal = Journal.of([(b.name, s.name) for b, s in pairs])
    guard = _GUARD
    shard = (split.shard, split.shards) if split.shards > 1 else None

    def write_reports(report: Report) -> None:
        report = attrs.evolve(report, shard=shard)
        if args.junit is not None:
            report.write_junit(args.junit)
        if args.report is not None:
            report.write_json(args.report)
        if args.metrics is not None:
            write_openmetrics(report, args.metrics)

    if guard is not None:
        # A step that does not return in time: write what the journal knows, then the guard exits.
        guard.on_deadline = lambda signum: write_reports(journal.report(signum))
    run_one = SplitRunner(split) if split.parts > 1 else None
    report = run_matrix(pairs, options, None if args.quiet else Progress(), journal, run_one)
    with guard.reporting() if guard is not None else contextlib.nullcontext():
        print(report.summary_table())
        latency = latency_summary(report)  # p50/p99 per backend method (conformance/_metrics.py)
        if latency:
            print(latency)
        details = report.details()
        if details:
            print()
            print(details)
        write_reports(report)
    for result in report.results:
        if result.error:  # an environment problem: also one line on stderr, as a usage error is
            print(f"conformance: error: {result.error.splitlines()[0]}", file=sys.stderr)
    return report.exit_code


# --- replay ------------------------------------------------------------------------------------


def _configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="a failure file written by `conformance run`")
    add_custom_flags(parser, "replay against")
    parser.add_argument("--outbox", metavar="MODULE:FACTORY", help="and this outbox factory")
    parser.add_argument(
        "--trust",
        metavar="MODULE[:FACTORY]",
        type=_csv,
        action="extend",
        default=[],
        help="import the file's factories from this module (replay imports only registered backends "
        "and --store/--saga-backend/--streams/--outbox otherwise: a failure file must not run code "
        "without your say-so)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print each step and the failing step's calls"
    )


def _replay(args: argparse.Namespace) -> int:
    from conformance._failures import FailureFile
    from conformance._replay import replay, untrusted_factories
    from conformance._runner import probe_service
    from conformance._suites import FAMILIES, suite_named

    try:
        failure = FailureFile.read(args.file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        family = FAMILIES[suite_named(failure.suite).family]
        given = given_customs(args)
        for flag in given:
            if flag != family.flag:
                raise ValueError(
                    f"{flag} gives {CUSTOM_FLAGS[flag]}; this failure is of suite {failure.suite}, "
                    f"which takes {family.what} ({family.flag})"
                )
        overrides = {
            role: str(path) for role, path in family.overrides(given.get(family.flag), args.outbox).items()
        }
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not failure.program:
        raise UsageError(f"{args.file}: the program is empty, there is nothing to replay")
    refused = untrusted_factories(failure, overrides, args.trust)
    if refused:
        modules = ",".join(sorted({r.partition("=")[2].partition(":")[0] for r in refused}))
        raise UsageError(
            f"{args.file} names factories that are not registered backends: {', '.join(refused)}; "
            f"replay imports them only with --trust {modules} (or pass {family.flag})"
        )
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
            keep_namespace=True,
        )
    except (ValueError, HarnessEnvironmentError) as exc:
        raise UsageError(str(exc)) from None
    if args.verbose and result.trace:
        print("calls in the failing step:")
        for line in result.trace:
            print(f"    {line}")
    print(result.describe())
    if result.kept:
        print(f"kept on the backend: namespace {', '.join(result.kept)} (remove with: conformance clean)")
    return result.exit_code


# --- faults ------------------------------------------------------------------------------------


def _configure_faults(parser: argparse.ArgumentParser) -> None:
    del parser


def _faults(args: argparse.Namespace) -> int:
    from conformance._faults import FAULT_KINDS, FAULT_POINTS
    from conformance._suites import FAMILIES, load_suites

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
    modules = [*SUBCOMMAND_MODULES, *(ep.value for ep in entry_points(group=SUBCOMMAND_ENTRY_POINTS))]
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise
    parser = OneLineParser(
        prog="conformance",
        description="Ratchet: a fault-injecting conformance harness for commit and saga backends.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS.values():
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(handler=command.run)
    return parser


# The guard of the running ``main`` (None when the CLI is called from another thread).
_GUARD: _signals.SignalGuard | None = None


def main(argv: Sequence[str] | None = None) -> int:
    global _GUARD
    # ``argv`` None: the console script, a process of its own (see SignalGuard.exit_after).
    with _signals.SignalGuard(exit_after=argv is None) as guard:
        _GUARD = guard
        try:
            code = _main(argv)
        except KeyboardInterrupt:
            # A signal seen by the guard (RunInterrupted) or a KeyboardInterrupt from elsewhere.
            signum = _signals.pending() or signal.SIGINT
            print(f"conformance: interrupted by {_signals.signal_name(signum)}", file=sys.stderr)
            code = _signals.exit_code(signum)
        finally:
            _GUARD = None
        late = _signals.pending()
    if late is not None and code < 128:
        code = _signals.exit_code(late)  # arrived after the verdict was printed: still a signal
    return code


def _main(argv: Sequence[str] | None) -> int:
    # MODULE:FACTORY names a module of the project being tested, as `python -m` would find it.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    # Injected faults make the runtime log what it is built to survive (a recovery that left a
    # commit unfinished); the report says what matters, so only errors reach stderr.
    logging.basicConfig(level=logging.ERROR, format="%(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(join_dash_values(sys.argv[1:] if argv is None else argv, DASH_VALUE_FLAGS))
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except BrokenPipeError:
        # `conformance run | head`: the reader left; say nothing more (Python's documented recipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_USAGE
    except UsageError as exc:
        if _signals.pending() is not None:
            raise _signals.RunInterrupted(_signals.pending() or signal.SIGINT) from None
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    # Run as a script this file is ``__main__``, a second copy beside ``conformance.cli``, where
    # ``register_subcommand`` puts ``bench``; so hand over to the imported module's ``main``.
    from conformance.cli import main as imported_main

    sys.exit(imported_main())
