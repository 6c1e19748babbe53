"""Usage checks of the command line: every problem is one line and exit code 2, found before a run.

A CI log that ends in a traceback, or in exit 1 (the "contract violation" code) after a whole run,
for a typo or a read-only directory sends people looking for a bug in their backend. So: the
parser's own errors are one line (no usage dump); counts are positive; every output path is tried
for writing before the first example; and values that start with ``-`` (``--faults -crash``) are
taken as values, as ``--faults=-crash`` is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad command line or environment: printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"conformance: error: {message} (see: {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration_s(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1.5h``, ``500ms`` -> seconds (positive)."""
    seconds = age_s(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero, got {text!r}")
    return seconds


def age_s(text: str) -> float:
    """A duration that may be zero (``conformance clean --older-than 0s``)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 10m or 1h, got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def join_dash_values(argv: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``--faults -crash`` -> ``--faults=-crash``: argparse reads a lone ``-crash`` as an option."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item in flags and i + 1 < len(items) and items[i + 1].startswith("-") and items[i + 1] != "--":
            out.append(f"{item}={items[i + 1]}")
            i += 2
            continue
        out.append(item)
        i += 1
    return out


def check_writable_dir(path: Path, flag: str, *, shown: Path | None = None) -> None:
    """Create ``path`` if needed and write a probe file in it; ``UsageError`` naming ``flag`` if not.

    Writing is the only test that holds for root (which ``os.access`` always lets through) and for
    read-only mounts alike."""
    shown = shown if shown is not None else path
    where = path if path.is_absolute() else Path(os.getcwd()) / path
    if where.exists() and not where.is_dir():
        raise UsageError(f"{flag} {shown}: {path} exists and is not a directory")
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".ratchet-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {shown}: cannot write in {where} ({exc.strerror or exc})") from None


def check_writable_file(path: Path, flag: str) -> None:
    """``path`` is written by rename from its directory: the directory must take a new file."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, expected a file name")
    check_writable_dir(path.parent, flag, shown=path)
