"""``conformance clean``: remove the namespaces runs left on the servers (conformance/_cleanup.py)."""

from __future__ import annotations

import argparse
import sys

from conformance._usage import UsageError, age_s
from conformance._violations import HarnessEnvironmentError
from conformance.cli import EXIT_OK, EXIT_USAGE, Subcommand, register_subcommand


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _configure_clean(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        type=_csv,
        default=None,
        help="named backends, comma-separated (default: every backend on a real server)",
    )
    parser.add_argument(
        "--older-than",
        type=age_s,
        default=3600.0,
        metavar="DURATION",
        help="only namespaces at least this old (default 1h: a run in progress keeps its own)",
    )
    parser.add_argument(
        "--legacy",
        action="store_true",
        help="also namespaces from before they carried their time (no age: make sure no old run is live)",
    )


def _clean(args: argparse.Namespace) -> int:
    from conformance._cleanup import clean_backend
    from conformance._runner import probe_service
    from conformance._suites import FAMILIES, load_suites
    from impls.api import InMemoryMembership

    load_suites()
    named = {(f.name, n): b for f in FAMILIES.values() for n, b in f.backends().items()}
    wanted = args.backend or sorted({n for (_, n), b in named.items() if b.service is not None})
    unknown = sorted(set(wanted) - {n for _, n in named})
    if unknown:
        raise UsageError(f"unknown backend {unknown[0]!r}; known: {', '.join(sorted({n for _, n in named}))}")
    code = EXIT_OK
    for (family, name), backend in sorted(named.items()):
        if name not in wanted or family == "transport":
            # The transport family opens a client, not a namespace: each example deletes its own keys.
            continue
        if backend.service is not None:
            try:
                probe_service(backend.service)
            except HarnessEnvironmentError as exc:
                print(f"conformance: error: backend {name}: {exc}", file=sys.stderr)
                code = EXIT_USAGE
                continue
        factories = []
        for role in backend.factories:
            # Every factory takes the namespace first; a store also takes a membership directory.
            arguments = (lambda ns: (ns, InMemoryMembership())) if role == "store" else (lambda ns: (ns,))
            factories.append((backend.factory(role), arguments))
        try:
            result = clean_backend(f"{name} ({family})", factories, args.older_than, legacy=args.legacy)
        except Exception as exc:
            print(
                f"conformance: error: backend {name}: cleaning failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            code = EXIT_USAGE
            continue
        print(
            f"{result.backend}: {len(result.dropped)} namespaces removed, {result.skipped_young} younger "
            f"than the cut-off kept, {len(result.failed)} could not be removed"
        )
        if result.failed:
            code = EXIT_USAGE
    return code


register_subcommand(
    Subcommand("clean", "remove the namespaces runs left on the backends' servers", _configure_clean, _clean)
)
