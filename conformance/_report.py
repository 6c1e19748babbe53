"""The outcome of a conformance run: per (backend, suite) verdicts, the summary table, JUnit, JSON.

Exit codes (the CLI's and ``Report.exit_code``): 0 every suite passed its checks and its coverage
gate; 1 a contract violation or a coverage gap; 2 the run could not be carried out (usage or
environment: an unreachable server, a bad factory path, a crash of the harness itself).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

import attrs

from conformance._machine import Step, SuiteStats
from conformance._violations import CoverageGap, JsonValue


class Verdict(enum.Enum):
    PASS = "pass"
    VIOLATION = "violation"
    COVERAGE = "coverage-gap"
    ERROR = "error"


@attrs.frozen
class FailureSummary:
    rule_id: str
    message: str
    program: tuple[Step, ...]
    failure_file: Path | None
    flaky: bool = False
    at: str | None = None  # "step 3" or "quiescence" (after the last step, once recovery ran)


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
    error: str | None = None  # for Verdict.ERROR: one line saying what went wrong

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
        return "ERROR"


@attrs.frozen
class Report:
    results: tuple[SuiteResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.verdict is Verdict.PASS for r in self.results)

    @property
    def exit_code(self) -> int:
        if any(r.verdict is Verdict.ERROR for r in self.results):
            return 2
        return 0 if self.ok else 1

    @property
    def failures(self) -> list[SuiteResult]:
        return [r for r in self.results if r.verdict is not Verdict.PASS]

    # --- human output -----------------------------------------------------------------------

    def summary_table(self) -> str:
        kinds = sorted({k for r in self.results for k in r.stats.faults})
        headers = [
            "backend",
            "suite",
            "examples",
            "steps",
            "steps/s",
            "backend%",
            *kinds,
            "coverage",
            "result",
        ]
        rows: list[list[str]] = []
        for r in self.results:
            share = 100.0 * r.stats.backend_seconds / r.elapsed_s if r.elapsed_s > 0 else 0.0
            reached = r.coverage_targets - len(r.coverage_gaps)
            rows.append(
                [
                    r.backend,
                    r.suite,
                    str(r.stats.examples),
                    str(r.stats.steps),
                    f"{r.steps_per_second:.0f}",
                    f"{share:.0f}",
                    *(str(r.stats.faults.get(k, 0)) for k in kinds),
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
        if kinds:
            text.append("(fault columns: faults injected of that kind; backend%: time inside the backend)")
        for r in self.results:
            if "not-applicable" in r.stats.details:
                text.append(f"(not applicable on {r.backend}/{r.suite}: {r.stats.details['not-applicable']})")
        return "\n".join(text)

    def details(self) -> str:
        """What went wrong, per failed suite: the rule, the program, the failure file, the gaps."""
        out: list[str] = []
        for r in self.failures:
            out.append(f"== {r.backend} / {r.suite}: {r.headline()}")
            if r.failure is not None:
                out.append(f"   {r.failure.rule_id}: {r.failure.message}")
                if r.failure.at:
                    out.append(f"   broken at: {r.failure.at}")
                if r.failure.flaky:
                    out.append("   (flaky: the shrunk program did not fail again on its final run)")
                out.append("   shrunk program:")
                out.extend(f"     {i + 1:2d}. {s.render()}" for i, s in enumerate(r.failure.program))
                if r.failure.failure_file is not None:
                    out.append(f"   failure file: {r.failure.failure_file}")
                    out.append(f"   replay with:  conformance replay {r.failure.failure_file}")
            for gap in r.coverage_gaps:
                out.append(f"   never reached: {gap.target} — {gap.description}")
            if r.error:
                out.append(f"   error: {r.error}")
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
                    "steps": r.stats.steps,
                    "steps_per_second": round(r.steps_per_second, 1),
                    "backend_seconds": round(r.stats.backend_seconds, 3),
                    "faults_injected": dict(sorted(r.stats.faults.items())),
                    "rules_run": dict(sorted(r.stats.rules.items())),
                    "coverage": {
                        "targets": r.coverage_targets,
                        "reached": reached,
                        "gaps": [{"target": g.target, "description": g.description} for g in r.coverage_gaps],
                    },
                    "details": dict(r.stats.details),
                    "failure": None
                    if r.failure is None
                    else {
                        "rule_id": r.failure.rule_id,
                        "message": r.failure.message,
                        "flaky": r.failure.flaky,
                        "program": [{"rule": s.rule, "args": s.args} for s in r.failure.program],
                        "failure_file": str(r.failure.failure_file) if r.failure.failure_file else None,
                    },
                    "error": r.error,
                }
            )
        return {"format": "ratchet-report/1", "ok": self.ok, "exit_code": self.exit_code, "results": results}

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")

    def to_junit(self) -> str:
        """One testsuite, one testcase per (backend, suite); a failure element names the rule."""
        suite = ElementTree.Element(
            "testsuite",
            name="ratchet-conformance",
            tests=str(len(self.results)),
            failures=str(sum(r.verdict in (Verdict.VIOLATION, Verdict.COVERAGE) for r in self.results)),
            errors=str(sum(r.verdict is Verdict.ERROR for r in self.results)),
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
                body = [f"{r.failure.rule_id}: {r.failure.message}", "", "shrunk program:"]
                body += [f"  {i + 1:2d}. {s.render()}" for i, s in enumerate(r.failure.program)]
                if r.failure.failure_file is not None:
                    body += ["", f"replay: conformance replay {r.failure.failure_file}"]
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
        ElementTree.indent(suite)
        return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"

    def write_junit(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_junit(), encoding="utf-8")
