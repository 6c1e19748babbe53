"""One suite's verdict from its shares: the workers of one run, or the shards of a CI matrix.

Theory of operation
-------------------
A suite split across processes (``--workers``) or machines (``--shard``) is judged once, over the
union of what its shares did, exactly as if one process had run every example:

- counts add up (examples, steps, faults per kind, rules, backend time, latency histograms);
- a coverage target is reached when any share reached it, so a gap of the union is a target some
  share reported missing that no share reached (all shares demand the same targets);
- the verdict is the worst that any share reached, in this order: ``interrupted`` (a signal: no
  verdict), ``error`` (an outage explains whatever failed beside it), ``violation`` (the share that
  found it first shrank it; the others were ``stopped``), then the union's coverage gate, then
  ``pass``. A share that was stopped never stands alone: without a violation beside it the merged
  suite is an ``error``.

``merge_reports`` does the same for JSON reports (``conformance merge``), after checking that a
matrix's shards are all there, once each: a lost CI job must not make the gate pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from conformance._machine import Step, SuiteStats
from conformance._report import FailureSummary, Report, SuiteResult, Verdict
from conformance._violations import CoverageGap


def merge_stats(parts: Iterable[SuiteStats]) -> SuiteStats:
    out = SuiteStats()
    for stats in parts:
        out.examples += stats.examples
        out.steps += stats.steps
        out.faults.update(stats.faults)
        out.rules.update(stats.rules)
        out.reached |= stats.reached
        out.reached_in.update(stats.reached_in)
        out.backend_seconds += stats.backend_seconds
        out.latency.absorb(stats.latency)
        for key, value in stats.details.items():
            out.details.setdefault(key, value)
    return out


def merge_results(
    parts: Sequence[SuiteResult], *, elapsed_s: float, seed: int | None, workers: int
) -> SuiteResult:
    """The suite's result over ``parts`` (same backend and suite), judged as one run."""
    first = parts[0]
    stats = merge_stats(p.stats for p in parts)
    verdicts = {p.verdict for p in parts}
    gated = any(p.gated for p in parts)
    gaps: dict[str, CoverageGap] = {}
    for part in parts:
        for gap in part.coverage_gaps:
            if gap.target not in stats.reached:
                gaps.setdefault(gap.target, gap)
    failure = _first_failure(parts)
    errors = [p.error for p in parts if p.verdict is Verdict.ERROR and p.error]
    error = None
    if Verdict.INTERRUPTED in verdicts or (
        Verdict.NOT_RUN in verdicts and verdicts - {Verdict.NOT_RUN, Verdict.STOPPED}
    ):
        verdict = Verdict.INTERRUPTED
    elif Verdict.NOT_RUN in verdicts:
        verdict = Verdict.NOT_RUN
    elif Verdict.ERROR in verdicts:
        verdict, error = Verdict.ERROR, "; ".join(dict.fromkeys(errors)) or "a share failed"
    elif Verdict.VIOLATION in verdicts:
        verdict = Verdict.VIOLATION
    elif Verdict.STOPPED in verdicts:
        verdict = Verdict.ERROR
        error = "a worker stopped for a violation that no worker reported"
    elif gaps and gated:
        verdict = Verdict.COVERAGE
    else:
        verdict = Verdict.PASS
    targets = [p.target_examples for p in parts if p.target_examples is not None]
    return SuiteResult(
        first.backend,
        first.suite,
        verdict,
        stats,
        elapsed_s,
        seed,
        failure=failure if verdict in (Verdict.VIOLATION, Verdict.INTERRUPTED) else None,
        coverage_gaps=tuple(gaps[t] for t in sorted(gaps)),
        coverage_targets=max(p.coverage_targets for p in parts),
        demanded=tuple(sorted({t for p in parts for t in p.demanded})),
        error=error,
        budget_spent=any(p.budget_spent for p in parts),
        target_examples=sum(targets) if targets else None,
        namespaces_dropped=sum(p.namespaces_dropped for p in parts),
        namespaces_kept=tuple(ns for p in parts for ns in p.namespaces_kept),
        workers=workers,
        gated=gated,
    )


def _first_failure(parts: Sequence[SuiteResult]) -> FailureSummary | None:
    for part in parts:
        if part.verdict is Verdict.VIOLATION and part.failure is not None:
            return part.failure
    return next((p.failure for p in parts if p.failure is not None), None)


# --- reports ------------------------------------------------------------------------------------


class MergeError(ValueError):
    """The reports cannot be merged (unreadable, another format, shards missing or repeated)."""


def read_report(path: Path) -> Report:
    """A report written by ``conformance run --report`` (format ``ratchet-report/1``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MergeError(f"{path}: cannot read it as a JSON report ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != "ratchet-report/1":
        raise MergeError(f"{path}: not a ratchet-report/1 JSON report")
    try:
        results = tuple(_result_from_json(r) for r in data["results"])
        shard = _shard(data.get("shard"))
        interrupted = data.get("interrupted")
        signum = _signal_number(interrupted) if interrupted else None
    except (KeyError, TypeError, ValueError) as exc:
        raise MergeError(f"{path}: a malformed report ({exc!r})") from None
    return Report(results, interrupted_by=signum, shard=shard)


def merge_reports(reports: Sequence[tuple[Path, Report]]) -> Report:
    """One report over the shards of a matrix (or any reports of the same suites)."""
    if not reports:
        raise MergeError("no reports to merge")
    _check_shards(reports)
    order: list[tuple[str, str]] = []
    grouped: dict[tuple[str, str], list[SuiteResult]] = {}
    for _, report in reports:
        for result in report.results:
            key = (result.backend, result.suite)
            if key not in grouped:
                order.append(key)
            grouped.setdefault(key, []).append(result)
    merged = []
    for key in order:
        parts = grouped[key]
        seeds = {p.seed for p in parts}
        merged.append(
            merge_results(
                parts,
                elapsed_s=max(p.elapsed_s for p in parts),  # the shards ran side by side
                seed=seeds.pop() if len(seeds) == 1 else None,
                workers=sum(p.workers for p in parts),
            )
        )
    interrupted = next((r.interrupted_by for _, r in reports if r.interrupted_by is not None), None)
    return Report(tuple(merged), interrupted_by=interrupted)


def _check_shards(reports: Sequence[tuple[Path, Report]]) -> None:
    shards = [(path, r.shard) for path, r in reports if r.shard is not None]
    if not shards:
        return
    if len(shards) != len(reports):
        raise MergeError("some reports are shards of a matrix and some are not; merge one matrix at a time")
    counts = {count for _, (_, count) in shards}
    if len(counts) != 1:
        raise MergeError(f"the reports are shards of different matrices (of {sorted(counts)} shards)")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for path, (index, _) in shards:
        if index in seen:
            raise MergeError(f"shard {index}/{count} twice: {seen[index]} and {path}")
        seen[index] = path
    missing = [str(i) for i in range(1, count + 1) if i not in seen]
    if missing:
        raise MergeError(f"shards {', '.join(missing)} of {count} are missing: no verdict without them")


def _shard(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    index, _, count = str(value).partition("/")
    return int(index), int(count)


def _signal_number(name: str) -> int:
    import signal

    return int(signal.Signals[name])


def _result_from_json(r: dict[str, Any]) -> SuiteResult:
    stats = SuiteStats()
    stats.examples = int(r["examples"])
    stats.steps = int(r["steps"])
    stats.faults.update({str(k): int(v) for k, v in r["faults_injected"].items()})
    stats.rules.update({str(k): int(v) for k, v in r["rules_run"].items()})
    stats.reached = {str(t) for t in r["coverage"]["reached"]}
    stats.reached_in.update({str(k): int(v) for k, v in r["coverage"].get("examples_reaching", {}).items()})
    stats.backend_seconds = float(r["backend_seconds"])
    stats.details = {str(k): str(v) for k, v in r["details"].items()}
    failure = None
    if r["failure"] is not None:
        f = r["failure"]
        failure = FailureSummary(
            f["rule_id"],
            f["message"],
            tuple(Step(s["rule"], s["args"]) for s in f["program"]),
            Path(f["failure_file"]) if f["failure_file"] else None,
            bool(f["flaky"]),
            f.get("at"),
            f.get("trust"),
        )
    namespaces = r.get("namespaces", {"dropped": 0, "kept": []})
    return SuiteResult(
        r["backend"],
        r["suite"],
        Verdict(r["verdict"]),
        stats,
        float(r["elapsed_s"]),
        r["seed"],
        failure=failure,
        coverage_gaps=tuple(CoverageGap(g["target"], g["description"]) for g in r["coverage"]["gaps"]),
        coverage_targets=int(r["coverage"]["targets"]),
        demanded=tuple(r["coverage"].get("demanded", ())),
        error=r["error"],
        budget_spent=bool(r["budget_spent"]),
        target_examples=r["examples_target"],
        namespaces_dropped=int(namespaces["dropped"]),
        namespaces_kept=tuple(namespaces["kept"]),
        workers=int(r.get("workers", 1)),
        gated=bool(r["coverage"].get("gate", True)),
    )
