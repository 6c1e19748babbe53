"""``conformance merge REPORT...``: one JSON, one JUnit and one gate verdict over a CI matrix.

Each machine of a matrix runs ``conformance run --shard I/N --report shard-I.json``; a last job
merges the reports (``conformance._merge``): the exit code is the gate's, as ``run``'s would be for
one machine that ran every example (0 pass, 1 a violation or a coverage gap of the union, 2 an
error or reports that cannot be merged, 130 / 143 a shard was interrupted).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs

from conformance._usage import UsageError, check_writable_file
from conformance.cli import Subcommand, register_subcommand


def _configure_merge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT", help="JSON reports (--report)")
    parser.add_argument("--junit", type=Path, default=None, help="write the merged JUnit XML here")
    parser.add_argument("--report", type=Path, default=None, help="write the merged JSON report here")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge even when shards of the matrix are missing (the verdict is then only theirs)",
    )


def _merge(args: argparse.Namespace) -> int:
    from conformance._merge import MergeError, merge_reports, read_report

    for path, flag in ((args.junit, "--junit"), (args.report, "--report")):
        if path is not None:
            check_writable_file(path, flag)
    try:
        reports = [(path, read_report(path)) for path in args.reports]
        if args.allow_partial:
            reports = [(path, attrs.evolve(report, shard=None)) for path, report in reports]
        report = merge_reports(reports)
    except MergeError as exc:
        raise UsageError(str(exc)) from None
    print(f"merged {len(reports)} reports")
    print(report.summary_table())
    details = report.details()
    if details:
        print()
        print(details)
    if args.junit is not None:
        report.write_junit(args.junit)
    if args.report is not None:
        report.write_json(args.report)
    return report.exit_code


register_subcommand(
    Subcommand("merge", "merge the JSON reports of a sharded run into one verdict", _configure_merge, _merge)
)
