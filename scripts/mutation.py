#!/usr/bin/env python3
"""``make mutation``: how many mutants of each backend package the conformance suites alone kill.

The tool is cosmic-ray (``pip install -e '.[mutation]'``); the packages, their suites, the sample
size and the seeds are ``[tool.ratchet.mutation]`` in pyproject.toml; docs/sensitivity.md reads
the results. For each package:

1. the tracked files are copied to ``build/mutation/tree-PACKAGE`` (cosmic-ray edits files in place; the
   copy keeps the work tree clean and lets it change while a run goes on);
2. ``cosmic-ray init`` lists every mutant of the package's modules; a fixed sample of them (``seed``,
   drawn from the mutants sorted by file, operator and occurrence) stays pending, the rest are
   marked skipped;
3. the test command (``scripts/mutation.py test PACKAGE``) is run once on the unmutated copy: it
   must pass, or the package has no score;
4. ``cosmic-ray exec`` runs the test command on each sampled mutant, one at a time, under ``nice``;
5. the outcome of every sampled mutant goes to ``docs/mutation/<package>.json``.

The test command is ``conformance run`` alone, profile ``mutation`` (no shrinking, stop at the
first suite that fails), the fixed suite seed, no example database: a mutant is killed when a suite
finds a violation (``violation``, with the rule), when it misses a coverage target the unmutated
code reaches with the same seed (``coverage``: the suites' coverage gate, held to the baseline),
when the run cannot be carried out (``error``: an import or harness failure the mutant caused) or
when it outlives the package's timeout (``timeout``). ``report`` prints the scores with a Wilson 95% interval.

Usage: scripts/mutation.py run [PACKAGE ...] [--sample N] [--retest [--only IDS] | --resume] [--servers]
       | collect PACKAGE ... | report | test PACKAGE [--servers]
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "mutation"
RESULTS = ROOT / "docs" / "mutation"
VERDICT_PREFIX = "mutation-verdict:"


def config() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        loaded: dict[str, Any] = tomllib.load(handle)["tool"]["ratchet"]["mutation"]
    return loaded


def modules_of(spec: dict[str, Any], tree: Path) -> list[str]:
    files: list[str] = []
    for entry in spec["modules"]:
        path = tree / entry
        found = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        files.extend(str(f.relative_to(tree)) for f in found)
    return files


# --- the test command (run by cosmic-ray inside the copy) ---------------------------------------


def test(package: str, servers: bool = False) -> int:
    """Each ``backend:suites`` of the package in turn; the first that does not pass decides.
    ``servers``: then the package's ``server-runs`` (real services), in the same way."""
    settings = config()
    spec = settings["packages"][package]
    runs = [*spec["runs"], *(spec.get("server-runs", []) if servers else [])]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ratchet-mutation-") as scratch:
        for number, run in enumerate(runs):
            report = Path(scratch) / f"report-{number}.json"
            command = [
                sys.executable,
                "-m",
                "conformance.cli",
                "run",
                *run.split(),
                "--profile",
                "mutation",
                "--seed",
                str(settings["suite-seed"]),
                "--no-database",
                "--no-coverage-gate",
                "--quiet",
                "--failures",
                str(Path(scratch) / "failures"),
                "--report",
                str(report),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            verdict = _verdict(report, done)
            if verdict["verdict"] == "pass":
                verdict = _against_baseline(package, run, report, verdict)
            elapsed = time.monotonic() - started
            print(f"{VERDICT_PREFIX} {json.dumps({**verdict, 'run': run, 'seconds': round(elapsed, 1)})}")
            if verdict["verdict"] != "pass":
                sys.stdout.write(done.stdout[-3000:])
                sys.stdout.write(done.stderr[-3000:])
                return 1
    return 0


def _baseline_file(package: str) -> Path:
    return ROOT / "build" / "mutation-baseline" / f"{package}.json"


def _against_baseline(package: str, run: str, report: Path, verdict: dict[str, Any]) -> dict[str, Any]:
    """The coverage gate, held to what the unmutated code reaches with the same seed.

    The fast profile does not reach every coverage target, so the gate cannot demand them all; it
    demands the ones the baseline reached. The baseline run (``RATCHET_MUTATION_BASELINE=1``)
    writes them; a mutant's run that misses one of them is killed by the gate (``coverage``)."""
    gaps = sorted(
        gap["target"]
        for result in json.loads(report.read_text())["results"]
        for gap in result["coverage"]["gaps"]
    )
    path = _baseline_file(package)
    if os.environ.get("RATCHET_MUTATION_BASELINE"):
        known = json.loads(path.read_text()) if path.exists() else {}
        known[run] = gaps
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1) + "\n")
        return verdict
    baseline = set(json.loads(path.read_text()).get(run, [])) if path.exists() else None
    if baseline is None:
        return verdict
    lost = sorted(set(gaps) - baseline)
    if not lost:
        return verdict
    return {"verdict": "coverage", "rule": None, "suite": run, "detail": "not reached: " + ", ".join(lost)}


def _verdict(report: Path, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    if not report.exists():
        last = (done.stderr.strip().splitlines() or ["no report"])[-1]
        return {"verdict": "error", "rule": None, "detail": last[:300]}
    results = json.loads(report.read_text())["results"]
    for result in results:
        verdict = result.get("verdict")
        if verdict in ("pass", "not-run"):
            continue
        failure = result.get("failure") or {}
        detail = failure.get("message") or result.get("error") or ""
        return {
            "verdict": "violation" if verdict == "violation" else "error",
            "rule": failure.get("rule_id"),
            "suite": f"{result.get('backend')}/{result.get('suite')}",
            "detail": str(detail)[:300],
        }
    if done.returncode != 0:
        return {"verdict": "error", "rule": None, "detail": f"exit {done.returncode}"}
    return {"verdict": "pass", "rule": None}


# --- a package's run -----------------------------------------------------------------------------


def tree_of(package: str) -> Path:
    """The package's own copy of the work tree: packages may be judged side by side."""
    return BUILD / f"tree-{package}"


def copy_tree(tree: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    if tree.exists():
        shutil.rmtree(tree)
    for raw in filter(None, listed):
        name = raw.decode()
        source = ROOT / name
        if not source.is_file() or name.startswith(("build/", "docs/mutation/")):
            continue
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def cosmic_ray(tree: Path, *args: str, nice: int = 0, budget_s: float | None = None) -> bool:
    """Run cosmic-ray in the copy; False when ``budget_s`` ran out first (the run is cut short, and
    the mutant it was judging stays pending: ``collect`` reports the rest as partial)."""
    executable = str(Path(sys.executable).parent / "cosmic-ray")
    command = [executable, *args]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    try:
        subprocess.run(command, cwd=tree, check=True, timeout=budget_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def sample(tree: Path, session: Path, size: int, seed: int) -> tuple[int, int]:
    """Leave ``size`` mutants pending, drawn with ``seed``; mark the others skipped.

    Mutants inside annotations are left out before drawing: every module here has ``from
    __future__ import annotations``, so an annotation is a string nothing evaluates and its
    mutants are equivalent by construction. Returns (all mutants, those left to draw from)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        every = sorted(db.work_items, key=_mutant_key)
        items = [item for item in every if not _in_annotation(tree, item)]
        keep = {item.job_id for item in random.Random(seed).sample(items, min(size, len(items)))}
        skipped = [item.job_id for item in every if item.job_id not in keep]
        db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    return len(every), len(items)


def _in_annotation(tree: Path, item: Any) -> bool:
    mutation = item.mutations[0]
    position = tuple(mutation.start_pos)
    return any(start <= position < end for start, end in _annotation_spans(str(tree / mutation.module_path)))


@functools.cache
def _annotation_spans(path: str) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
    tree = ast.parse(Path(path).read_text())
    lazy = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    if not lazy:
        return ()
    spans = []
    for node in ast.walk(tree):
        annotation: ast.expr | None = None
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotation = node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotation = node.returns
        if annotation is not None and annotation.end_lineno is not None:
            end_col = annotation.end_col_offset or 0
            spans.append(((annotation.lineno, annotation.col_offset), (annotation.end_lineno, end_col)))
    return tuple(spans)


def _mutant_key(item: Any) -> tuple[str, str, int, int, int]:
    mutation = item.mutations[0]
    start = mutation.start_pos
    return (str(mutation.module_path), mutation.operator_name, mutation.occurrence, start[0], start[1])


def run_package(
    package: str,
    settings: dict[str, Any],
    size: int | None,
    retest: bool = False,
    budget_s: float | None = None,
    only: frozenset[str] = frozenset(),
    resume: bool = False,
    servers: bool = False,
) -> None:
    """Mutate, sample and judge one package; ``retest``: judge again, with the harness as it is now,
    only the sampled mutants that survived the last run (its results move to docs/mutation/before/);
    ``only``: just these survivors (mutant ids), the before/ results left as they are; ``resume``:
    judge the mutants a run cut short never reached, keeping every outcome it recorded;
    ``servers``: the package's ``server-runs`` too (on the services of ``scripts/services env``)."""
    spec = settings["packages"][package]
    BUILD.mkdir(parents=True, exist_ok=True)
    tree = tree_of(package)
    copy_tree(tree)
    cfg = BUILD / f"{package}.toml"
    session = BUILD / f"{package}.sqlite"
    keep = retest or resume  # judge within the last run's session, not a fresh one
    earlier_s = 0.0
    if resume and (RESULTS / f"{package}.json").exists():
        earlier_s = float(json.loads((RESULTS / f"{package}.json").read_text()).get("seconds", 0.0))
    if keep and not session.exists():  # a fresh clone: rebuild the session from the results
        cosmic_ray(tree, "init", str(_write_config(package, spec, tree, cfg)), str(session))
        counts = sample(tree, session, int(spec["sample"]), int(settings["seed"]))
        session_from_results(package, session)
        earlier_baseline = float(json.loads((RESULTS / f"{package}.json").read_text()).get("baseline_s", 0.0))
        meta = {"counts": counts, "baseline_s": earlier_baseline}
        (BUILD / f"{package}.meta.json").write_text(json.dumps(meta))
        print(f"[mutation] {package}: session rebuilt from docs/mutation/{package}.json", flush=True)
    if retest:
        earlier = RESULTS / f"{package}.json"
        if not only:
            (RESULTS / "before").mkdir(parents=True, exist_ok=True)
            shutil.copy2(earlier, RESULTS / "before" / earlier.name)
        total, drawable = json.loads((BUILD / f"{package}.meta.json").read_text())["counts"]
        print(f"[mutation] {package}: {forget_survivors(session, only)} survivors to judge again", flush=True)
    elif resume:
        total, drawable = json.loads((BUILD / f"{package}.meta.json").read_text())["counts"]
        print(f"[mutation] {package}: resumed, the mutants not yet judged to judge", flush=True)
    else:
        session.unlink(missing_ok=True)
    test_command = _test_command(package, servers)
    _write_config(package, spec, tree, cfg, servers)
    if not keep:
        cosmic_ray(tree, "init", str(cfg), str(session))
        wanted = size if size is not None else int(spec["sample"])
        total, drawable = sample(tree, session, wanted, int(settings["seed"]))
        print(
            f"[mutation] {package}: {total} mutants, {total - drawable} in annotations left out, "
            f"{min(wanted, drawable)} sampled",
            flush=True,
        )
    began = time.monotonic()
    baseline = subprocess.run(
        ["nice", "-n", str(settings["nice"]), *test_command.split()],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "RATCHET_MUTATION_BASELINE": "1"},
    )
    baseline_s = time.monotonic() - began
    if baseline.returncode != 0:
        print(baseline.stdout[-4000:], baseline.stderr[-2000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"[mutation] {package}: the suites fail on the unmutated code; no score")
    print(f"[mutation] {package}: baseline passes in {baseline_s:.1f}s", flush=True)
    meta = {"counts": [total, drawable], "baseline_s": baseline_s, "started": time.time() - earlier_s}
    (BUILD / f"{package}.meta.json").write_text(json.dumps(meta))
    if budget_s is not None:
        budget_s = max(1.0, budget_s - baseline_s)
    if not cosmic_ray(tree, "exec", str(cfg), str(session), nice=int(settings["nice"]), budget_s=budget_s):
        print(f"[mutation] {package}: time budget spent; the results are partial", flush=True)
    collect(package)


def _test_command(package: str, servers: bool = False) -> str:
    return f"{sys.executable} scripts/mutation.py test {package}" + (" --servers" if servers else "")


def _write_config(package: str, spec: dict[str, Any], tree: Path, cfg: Path, servers: bool = False) -> Path:
    cfg.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(modules_of(spec, tree))}\n"
        f"timeout = {float(spec.get('server-timeout', spec['timeout']) if servers else spec['timeout'])}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(_test_command(package, servers))}\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    return cfg


def session_from_results(package: str, session: Path) -> list[str]:
    """Fill a freshly sampled session with the committed outcomes of docs/mutation/<package>.json,
    so that ``--retest`` and ``--resume`` work from a fresh clone (which has no build/mutation/).
    Every sampled mutant must be in complete results (the sample is the same while the source
    is); of partial results, the mutants never judged stay pending. The survivors get a SURVIVED
    result, for ``forget_survivors`` to drop. Returns the survivors' ids."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    results = json.loads((RESULTS / f"{package}.json").read_text())
    recorded = {m["id"]: m for m in results["mutants"]}
    survivors: list[str] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            mutant_id = f"{mutation.module_path}:{mutation.operator_name}:{mutation.occurrence}"
            mutant = recorded.get(mutant_id)
            if mutant is None and not results["complete"]:
                continue  # a run cut short: the mutants it never judged stay pending (``--resume``)
            if mutant is None:
                raise SystemExit(
                    f"[mutation] {package}: {mutant_id} is sampled but not in docs/mutation/{package}.json: "
                    "the source changed since that run; run the package whole"
                )
            verdict = {k: mutant[k] for k in ("verdict", "rule", "suite", "detail", "seconds") if k in mutant}
            output = (
                "timeout" if mutant["outcome"] == "timeout" else f"{VERDICT_PREFIX} {json.dumps(verdict)}"
            )
            test_outcome = {"survived": TestOutcome.SURVIVED, "incompetent": TestOutcome.INCOMPETENT}.get(
                mutant["outcome"], TestOutcome.KILLED
            )
            if test_outcome is TestOutcome.SURVIVED:
                survivors.append(mutant_id)
            result = WorkResult(WorkerOutcome.NORMAL, output, test_outcome, mutant.get("diff", ""))
            db.set_result(item.job_id, result)
    return survivors


def forget_survivors(session: Path, only: frozenset[str] = frozenset()) -> int:
    """Drop the results of the mutants that survived, so that ``exec`` runs them again; ``only``:
    of exactly those ids, whatever their outcome (a kill the harness of that run got wrong, too)."""
    import sqlite3

    with sqlite3.connect(session) as db:
        judged = db.execute(
            "SELECT r.job_id, m.module_path || ':' || m.operator_name || ':' || m.occurrence, r.test_outcome"
            " FROM work_results r JOIN mutation_specs m ON m.job_id = r.job_id"
            " WHERE r.worker_outcome != 'SKIPPED'"
        ).fetchall()
        jobs = [
            (job,) for job, mutant, outcome in judged if ((mutant in only) if only else outcome == "SURVIVED")
        ]
        db.executemany("DELETE FROM work_results WHERE job_id = ?", jobs)
        return len(jobs)


def collect(package: str) -> None:
    """Write docs/mutation/<package>.json from the session as it stands: a run cut short (or still
    going) gives partial results, marked so."""
    meta = json.loads((BUILD / f"{package}.meta.json").read_text())
    total, drawable = meta["counts"]
    spent = time.time() - float(meta["started"])
    write_results(package, BUILD / f"{package}.sqlite", (total, drawable), float(meta["baseline_s"]), spent)


def write_results(
    package: str, session: Path, counts: tuple[int, int], baseline_s: float, spent_s: float
) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome

    mutants = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        done = sorted(db.completed_work_items, key=lambda pair: _mutant_key(pair[0]))
        pending = len(db.pending_work_items)
    for item, result in done:
        if result.worker_outcome is WorkerOutcome.SKIPPED:
            continue
        mutation = item.mutations[0]
        mutants.append(
            {
                "id": f"{mutation.module_path}:{mutation.operator_name}:{mutation.occurrence}",
                "line": mutation.start_pos[0],
                "outcome": _outcome(result),
                **_parsed(result.output or ""),
                "diff": _short_diff(result.diff or ""),
            }
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {
        "package": package,
        "mutants_total": counts[0],
        "mutants_outside_annotations": counts[1],
        "sampled": len(mutants) + pending,
        "run": len(mutants),
        "complete": pending == 0,
        "baseline_s": round(baseline_s, 1),
        "seconds": round(spent_s, 1),
        "seconds_per_mutant": round(spent_s / max(1, len(mutants)), 1),
        "mutants": mutants,
    }
    (RESULTS / f"{package}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"[mutation] {package}: {markdown_row(summary, triage())}", flush=True)


def _outcome(result: Any) -> str:
    from cosmic_ray.work_item import TestOutcome

    if result.test_outcome is TestOutcome.SURVIVED:
        return "survived"
    if result.test_outcome is TestOutcome.INCOMPETENT:
        return "incompetent"
    if result.output == "timeout":
        return "timeout"
    return "killed"


def _parsed(output: str) -> dict[str, Any]:
    verdicts = [
        json.loads(line[len(VERDICT_PREFIX) :])
        for line in output.splitlines()
        if line.startswith(VERDICT_PREFIX)
    ]
    if not verdicts:
        return {}
    last = verdicts[-1]
    return {k: last[k] for k in ("verdict", "rule", "suite", "detail", "seconds") if k in last}


def _short_diff(diff: str) -> str:
    lines = [
        line
        for line in diff.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    return "\n".join(lines[:6])


# --- the report ----------------------------------------------------------------------------------


def wilson(killed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``killed`` of ``n`` (95% with the default z)."""
    if n == 0:
        return (0.0, 1.0)
    p = killed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def triage() -> dict[str, dict[str, str]]:
    """docs/mutation/triage.toml: each surviving mutant's class (equivalent, outside) and why."""
    path = RESULTS / "triage.toml"
    if not path.exists():
        return {}
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def tally(summary: dict[str, Any], triaged: dict[str, dict[str, str]]) -> dict[str, int]:
    counts = dict.fromkeys(("run", "killed", "violation", "coverage", "error", "timeout"), 0)
    counts.update(dict.fromkeys(("equivalent", "outside", "untriaged", "stillborn"), 0))
    for mutant in summary["mutants"]:
        if mutant.get("verdict") == "error" and "SyntaxError" in (mutant.get("detail") or ""):
            counts["stillborn"] += 1  # no program at all (`def f(a, *, b)` -> `def f(a, | b)`)
            continue
        counts["run"] += 1
        if mutant["outcome"] == "survived":
            verdict = triaged.get(mutant["id"], {}).get("class", "untriaged")
            counts[verdict if verdict in ("equivalent", "outside") else "untriaged"] += 1
            continue
        counts["killed"] += 1
        how = "timeout" if mutant["outcome"] == "timeout" else mutant.get("verdict", "error")
        counts[how if how in counts else "error"] += 1
    return counts


def markdown_row(summary: dict[str, Any], triaged: dict[str, dict[str, str]]) -> str:
    c = tally(summary, triaged)
    relevant = c["run"] - c["equivalent"]
    low, high = wilson(c["killed"], relevant)
    in_contract = relevant - c["outside"]
    state = "complete" if summary["complete"] else f"partial ({c['run']} of {summary['sampled']})"
    return (
        f"| {summary['package']} | {summary['mutants_outside_annotations']} | {c['run']} "
        f"(+{c['stillborn']} not compiling) | "
        f"{c['killed']} ({c['violation']} violation, {c['coverage']} coverage, {c['error']} error, "
        f"{c['timeout']} timeout) | {c['equivalent']} | {c['outside']} | {c['untriaged']} | "
        f"**{100 * c['killed'] / max(1, relevant):.0f}%** ({100 * low:.0f}-{100 * high:.0f}%) | "
        f"{100 * c['killed'] / max(1, in_contract):.0f}% | {summary['seconds_per_mutant']} | {state} |"
    )


HEADER = (
    "| package | mutants | run | killed | equivalent | outside | blind spots | killed of non-equivalent "
    "(Wilson 95%) | killed of in-contract | s/mutant | state |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def report(results: Path) -> int:
    triaged = triage()
    rows = []
    survivors = []
    for path in sorted(results.glob("*.json")):
        summary = json.loads(path.read_text())
        rows.append(markdown_row(summary, triaged))
        for mutant in summary["mutants"]:
            if mutant["outcome"] == "survived":
                verdict = triaged.get(mutant["id"], {})
                survivors.append(
                    f"- {summary['package']} `{mutant['id']}` (line {mutant['line']}): "
                    f"{verdict.get('class', 'UNTRIAGED')} {verdict.get('why', '')}".rstrip()
                )
    print(HEADER)
    print("\n".join(rows))
    print()
    print("\n".join(survivors))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="mutate and judge the packages (all when none is named)")
    run.add_argument("packages", nargs="*")
    run.add_argument("--sample", type=int, help="mutants per package (default: each package's sample)")
    run.add_argument("--retest", action="store_true", help="judge only the last run's survivors again")
    run.add_argument("--budget", type=float, help="seconds per package; then stop, results partial")
    run.add_argument("--only", default="", help="with --retest: just these mutants (comma-separated ids)")
    run.add_argument("--resume", action="store_true", help="judge the mutants a cut-short run never reached")
    run.add_argument(
        "--servers", action="store_true", help="also the package's server-runs (scripts/services up first)"
    )
    shown = sub.add_parser("report", help="print the scores and the survivors (Markdown)")
    shown.add_argument("--results", type=Path, default=RESULTS, help="a results directory")
    partial = sub.add_parser("collect", help="write a package's results so far (a run cut short)")
    partial.add_argument("packages", nargs="+")
    one = sub.add_parser("test", help="the test command cosmic-ray runs on a mutant")
    one.add_argument("package")
    one.add_argument("--servers", action="store_true", help="also the package's server-runs")
    args = parser.parse_args(argv)
    if args.command == "test":
        return test(args.package, args.servers)
    if args.command == "report":
        return report(args.results)
    if args.command == "collect":
        for package in args.packages:
            collect(package)
        return 0
    settings = config()
    for package in args.packages or list(settings["packages"]):
        if package not in settings["packages"]:
            parser.error(f"unknown package {package!r}; known: {', '.join(settings['packages'])}")
        only = frozenset(filter(None, args.only.split(",")))
        if args.retest and args.resume:
            parser.error("--retest and --resume are two different runs; name one")
        run_package(
            package,
            settings,
            args.sample,
            retest=args.retest,
            budget_s=args.budget,
            only=only,
            resume=args.resume,
            servers=args.servers,
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
