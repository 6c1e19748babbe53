"""The outcome of a conformance run: per (backend, suite) verdicts, the summary table, JUnit, JSON.

Exit codes (the CLI's and ``Report.exit_code``): 0 every suite passed its checks and its coverage
gate; 1 a contract violation or a coverage gap; 2 the run could not be carried out (usage or
environment: an unreachable server, a bad factory path, a crash of the harness itself); 130 / 143
the run was interrupted by SIGINT / SIGTERM (``Report.interrupted_by``), whatever had finished: an
interrupted suite has no verdict, and the suites after it did not run.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import textwrap
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

import attrs

from conformance._machine import Step, SuiteStats
from conformance._violations import CoverageGap, JsonValue, rule_statement


class Verdict(enum.Enum):
    PASS = "pass"
    VIOLATION = "violation"
    COVERAGE = "coverage-gap"
    ERROR = "error"
    INTERRUPTED = "interrupted"  # stopped by a signal: no verdict was reached
    NOT_RUN = "not-run"  # the run was interrupted before this suite started
    #: One worker's share, stopped because another worker found a violation first
    #: (``conformance._workers``); never the verdict of a merged suite.
    STOPPED = "stopped"


@attrs.frozen
class FailureSummary:
    rule_id: str
    message: str
    program: tuple[Step, ...]
    failure_file: Path | None
    flaky: bool = False
    at: str | None = None  # "step 3" or "quiescence" (after the last step, once recovery ran)
    trust: str | None = None  # the module replay must be told to trust (a backend not registered)

    @property
    def replay_command(self) -> str:
        trust = f" --trust {self.trust}" if self.trust else ""
        return f"conformance replay {self.failure_file}{trust}"


@attrs.frozen
class SuiteResult:
    backend: str
    suite: str
    verdict: Verdict
    stats: SuiteStats
    elapsed_s: float
    seed: int | None
    failure: FailureSummary | None = None
    coverage_gaps: tuple[CoverageGap, ...] = ()
    coverage_targets: int = 0
    demanded: tuple[str, ...] = ()  # the names of the coverage targets (reached or not)
    error: str | None = None  # for Verdict.ERROR: one line saying what went wrong
    budget_spent: bool = False  # the time budget stopped generation before the target was reached
    target_examples: int | None = None  # what the settings asked for
    namespaces_dropped: int = 0  # examples' namespaces removed (conformance._cleanup)
    namespaces_kept: tuple[str, ...] = ()  # the counterexample's, left on the backend to inspect
    workers: int = 1  # processes that shared the examples (``conformance._workers``)
    gated: bool = True  # whether a coverage gap fails the suite (``--no-coverage-gate``: False)
    stopped_covered: bool = False  # ``--stop-when-covered`` ended generation (every target reached)

    @property
    def steps_per_second(self) -> float:
        return self.stats.steps / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def headline(self) -> str:
        if self.verdict is Verdict.PASS:
            return "pass"
        if self.verdict is Verdict.VIOLATION and self.failure is not None:
            return f"VIOLATION {self.failure.rule_id}"
        if self.verdict is Verdict.COVERAGE:
            return f"COVERAGE GAP ({len(self.coverage_gaps)})"
        if self.verdict is Verdict.INTERRUPTED:
            return "INTERRUPTED" if self.failure is None else "INTERRUPTED (found)"
        if self.verdict is Verdict.NOT_RUN:
            return "not run"
        if self.verdict is Verdict.STOPPED:
            return "stopped"
        return "ERROR"


@attrs.frozen
class Report:
    results: tuple[SuiteResult, ...]
    interrupted_by: int | None = None  # the signal number that stopped the run, if one did
    #: ``(index, count)``, 1-based, for one machine's share of a CI matrix (``--shard I/N``);
    #: ``conformance merge`` checks that every share of a matrix is there, once.
    shard: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.interrupted_by is None and all(r.verdict is Verdict.PASS for r in self.results)

    @property
    def exit_code(self) -> int:
        if self.interrupted_by is not None:
            return 128 + self.interrupted_by  # 130 SIGINT, 143 SIGTERM: the shell's convention
        if any(r.verdict is Verdict.ERROR for r in self.results):
            return 2
        return 0 if self.ok else 1

    @property
    def interrupted_signal(self) -> str | None:
        if self.interrupted_by is None:
            return None
        return signal.Signals(self.interrupted_by).name

    @property
    def failures(self) -> list[SuiteResult]:
        """Every suite that ran and did not pass (an interrupted one included)."""
        return [r for r in self.results if r.verdict not in (Verdict.PASS, Verdict.NOT_RUN)]

    # --- human output -----------------------------------------------------------------------

    def summary_table(self) -> str:
        """One row per (backend, suite), at most ``TABLE_WIDTH`` columns wide; the faults injected
        per kind follow in a second block (one column per kind made it 26 columns too wide)."""
        headers = [
            "backend",
            "suite",
            "examples",
            "steps",
            "steps/s",
            "backend%",
            "faults",
            "coverage",
            "result",
        ]
        rows: list[list[str]] = []
        for r in self.results:
            busy = r.elapsed_s * r.workers  # the time of every worker, as backend_seconds sums them
            share = 100.0 * r.stats.backend_seconds / busy if busy > 0 else 0.0
            reached = r.coverage_targets - len(r.coverage_gaps)
            rows.append(
                [
                    _clip(r.backend, BACKEND_WIDTH),
                    r.suite,
                    f"{r.stats.examples}{'*' if r.budget_spent else ''}",
                    str(r.stats.steps),
                    f"{r.steps_per_second:.0f}",
                    f"{share:.0f}",
                    str(sum(r.stats.faults.values())),
                    f"{reached}/{r.coverage_targets}" if r.coverage_targets else "-",
                    r.headline(),
                ]
            )
        widths = [
            max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)
        ]

        def line(cells: Sequence[str]) -> str:
            out = []
            for i, cell in enumerate(cells):
                out.append(cell.ljust(widths[i]) if i < 2 or i == len(cells) - 1 else cell.rjust(widths[i]))
            return "  ".join(out).rstrip()

        text = [line(headers), line(["-" * w for w in widths]), *(line(row) for row in rows)]
        notes = ["faults: injected, all kinds", "backend%: time inside the backend"]
        if any(r.budget_spent for r in self.results):
            notes.append("*: the time budget ran out first")
        text.append(f"({'; '.join(notes)})")
        injected = [r for r in self.results if r.stats.faults]
        if injected:
            text.append("")
            text.append("faults injected, per kind:")
            label = max(len(f"{_clip(r.backend, BACKEND_WIDTH)}/{r.suite}") for r in injected)
            for r in injected:
                counts = [f"{kind} {n}" for kind, n in sorted(r.stats.faults.items())]
                text.extend(
                    _wrapped(f"  {_clip(r.backend, BACKEND_WIDTH)}/{r.suite}".ljust(label + 4), counts)
                )
        for r in self.results:
            if "not-applicable" in r.stats.details:
                text.append(f"(not applicable on {r.backend}/{r.suite}: {r.stats.details['not-applicable']})")
        return "\n".join(text)

    def headline(self) -> str:
        """One line for the whole run: what a pytest ``-r`` summary or a CI status shows."""
        if self.interrupted_signal is not None:
            done = sum(r.verdict not in (Verdict.INTERRUPTED, Verdict.NOT_RUN) for r in self.results)
            return f"interrupted by {self.interrupted_signal} ({done} of {len(self.results)} suites finished)"
        bad = self.failures
        if not bad:
            return f"pass: {len(self.results)} suites"
        first = bad[0]
        what = first.headline()
        if first.failure is not None:
            what = f"{first.failure.rule_id}: {first.failure.message}"
        elif first.error:
            what = f"ERROR: {first.error.splitlines()[0]}"
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return f"{first.backend}/{first.suite}: {what}{more}"

    def details(self) -> str:
        """What went wrong, per failed suite: the rule, the program, the failure file, the gaps."""
        out: list[str] = []
        for r in self.failures:
            out.append(f"== {r.backend} / {r.suite}: {r.headline()}")
            if r.failure is not None:
                out.append(f"   {r.failure.rule_id}: {r.failure.message}")
                statement = rule_statement(r.failure.rule_id)
                if statement is not None:
                    out.extend(f"   | {line}" for line in textwrap.wrap(statement, 92))
                if r.failure.at:
                    out.append(f"   broken at: {r.failure.at}")
                if r.failure.flaky:
                    out.append("   (flaky: the shrunk program did not fail again on its final run)")
                out.append("   shrunk program:")
                out.extend(f"     {i + 1:2d}. {s.render()}" for i, s in enumerate(r.failure.program))
                if r.failure.failure_file is not None:
                    out.append(f"   failure file: {r.failure.failure_file}")
                    out.append(f"   replay with:  {r.failure.replay_command}")
            if r.namespaces_kept:
                out.append(
                    f"   kept on the backend: namespace {', '.join(r.namespaces_kept)} (conformance clean)"
                )
            if r.budget_spent:
                out.append(
                    f"   the time budget ran out after {r.stats.examples} of {r.target_examples} examples"
                )
            for gap in r.coverage_gaps:
                out.append(f"   never reached: {gap.target} — {gap.description}")
            if r.error:
                out.append(f"   error: {r.error}")
        for r in self.results:
            if r.budget_spent and r.verdict is Verdict.PASS:
                out.append(
                    f"== {r.backend} / {r.suite}: the time budget ran out after {r.stats.examples} of "
                    f"{r.target_examples} examples (a pass on those)"
                )
        if self.interrupted_signal is not None:
            skipped = [f"{r.backend}/{r.suite}" for r in self.results if r.verdict is Verdict.NOT_RUN]
            out.append(f"== interrupted by {self.interrupted_signal}: no verdict for the interrupted suite")
            if skipped:
                out.append(f"   not run: {', '.join(skipped)}")
        return "\n".join(out)

    # --- machine output ---------------------------------------------------------------------

    def to_json(self) -> dict[str, JsonValue]:
        results: list[JsonValue] = []
        for r in self.results:
            reached: list[JsonValue] = list(sorted(r.stats.reached))
            results.append(
                {
                    "backend": r.backend,
                    "suite": r.suite,
                    "verdict": r.verdict.value,
                    "seed": r.seed,
                    "elapsed_s": round(r.elapsed_s, 3),
                    "examples": r.stats.examples,
                    "examples_target": r.target_examples,
                    "workers": r.workers,
                    "budget_spent": r.budget_spent,
                    "stopped_when_covered": r.stopped_covered,
                    "steps": r.stats.steps,
                    "steps_per_second": round(r.steps_per_second, 1),
                    "backend_seconds": round(r.stats.backend_seconds, 3),
                    "faults_injected": dict(sorted(r.stats.faults.items())),
                    "rules_run": dict(sorted(r.stats.rules.items())),
                    "coverage": {
                        "gate": r.gated,
                        "targets": r.coverage_targets,
                        "demanded": list(r.demanded),
                        "reached": reached,
                        "examples_reaching": dict(sorted(r.stats.reached_in.items())),
                        "first_reached_in_example": dict(sorted(r.stats.first_reached.items())),
                        "gaps": [{"target": g.target, "description": g.description} for g in r.coverage_gaps],
                    },
                    "details": dict(r.stats.details),
                    "namespaces": {"dropped": r.namespaces_dropped, "kept": list(r.namespaces_kept)},
                    "failure": None
                    if r.failure is None
                    else {
                        "rule_id": r.failure.rule_id,
                        "message": r.failure.message,
                        "rule_statement": rule_statement(r.failure.rule_id),
                        "flaky": r.failure.flaky,
                        "at": r.failure.at,
                        "trust": r.failure.trust,
                        "program": [{"rule": s.rule, "args": s.args} for s in r.failure.program],
                        "failure_file": str(r.failure.failure_file) if r.failure.failure_file else None,
                    },
                    "error": r.error,
                }
            )
        return {
            "format": "ratchet-report/1",
            "ok": self.ok,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted_signal,
            "shard": None if self.shard is None else f"{self.shard[0]}/{self.shard[1]}",
            "results": results,
        }

    def write_json(self, path: Path) -> None:
        _write_atomically(path, json.dumps(self.to_json(), indent=2) + "\n")

    def to_junit(self) -> str:
        """One testsuite, one testcase per (backend, suite); a failure element names the rule."""
        suite = ElementTree.Element(
            "testsuite",
            name="ratchet-conformance",
            tests=str(len(self.results)),
            failures=str(sum(r.verdict in (Verdict.VIOLATION, Verdict.COVERAGE) for r in self.results)),
            errors=str(sum(r.verdict in (Verdict.ERROR, Verdict.INTERRUPTED) for r in self.results)),
            skipped=str(sum(r.verdict is Verdict.NOT_RUN for r in self.results)),
            time=f"{sum(r.elapsed_s for r in self.results):.3f}",
        )
        for r in self.results:
            case = ElementTree.SubElement(
                suite, "testcase", classname=f"ratchet.{r.backend}", name=r.suite, time=f"{r.elapsed_s:.3f}"
            )
            ElementTree.SubElement(case, "system-out").text = (
                f"examples={r.stats.examples} steps={r.stats.steps} "
                f"faults={dict(sorted(r.stats.faults.items()))} seed={r.seed}"
            )
            if r.verdict is Verdict.VIOLATION and r.failure is not None:
                body = [f"{r.failure.rule_id}: {r.failure.message}"]
                statement = rule_statement(r.failure.rule_id)
                if statement is not None:
                    body += [f"rule: {statement}"]
                body += ["", "shrunk program:"]
                body += [f"  {i + 1:2d}. {s.render()}" for i, s in enumerate(r.failure.program)]
                if r.failure.failure_file is not None:
                    body += ["", f"replay: {r.failure.replay_command}"]
                failure = ElementTree.SubElement(
                    case,
                    "failure",
                    type=r.failure.rule_id,
                    message=f"{r.failure.rule_id}: {r.failure.message}",
                )
                failure.text = "\n".join(body)
            elif r.verdict is Verdict.COVERAGE:
                failure = ElementTree.SubElement(
                    case,
                    "failure",
                    type="coverage-gap",
                    message=f"{len(r.coverage_gaps)} coverage targets never reached",
                )
                failure.text = "\n".join(f"{g.target}: {g.description}" for g in r.coverage_gaps)
            elif r.verdict is Verdict.ERROR:
                ElementTree.SubElement(case, "error", message=r.error or "error").text = r.error
            elif r.verdict is Verdict.INTERRUPTED:
                # No verdict was reached: an error, never a pass; a violation already found is kept.
                by = self.interrupted_signal or "a signal"
                why = f"interrupted by {by} after {r.stats.examples} examples"
                if r.failure is not None:
                    why += f"; {r.failure.rule_id} was found before: {r.failure.message}"
                    if r.failure.failure_file is not None:
                        why += f" ({r.failure.replay_command})"
                ElementTree.SubElement(case, "error", type="interrupted", message=why).text = why
            elif r.verdict is Verdict.NOT_RUN:
                ElementTree.SubElement(
                    case,
                    "skipped",
                    message=f"not run: interrupted by {self.interrupted_signal or 'a signal'}",
                )
        ElementTree.indent(suite)
        return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"

    def write_junit(self, path: Path) -> None:
        _write_atomically(path, self.to_junit())


TABLE_WIDTH = 100
BACKEND_WIDTH = 15  # a longer --name is clipped in the table (the JSON keeps it whole)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _wrapped(prefix: str, items: Sequence[str]) -> list[str]:
    """``prefix`` then ``items`` joined by ", ", folded to ``TABLE_WIDTH`` under the first item."""
    lines: list[str] = []
    current = prefix
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if current.strip() and len(current) + 1 + len(piece) > TABLE_WIDTH and current != prefix:
            lines.append(current.rstrip())
            current = " " * len(prefix)
        current += ("" if current.endswith(" ") or current == prefix else " ") + piece
    lines.append(current.rstrip())
    return lines


def _write_atomically(path: Path, text: str) -> None:
    """Write beside ``path``, then rename: a process ended mid-write (a forced stop after a signal)
    leaves the previous file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
