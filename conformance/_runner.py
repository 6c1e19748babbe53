"""Running suites: ``run_conformance`` (the public entry point) and the matrix runner under it.

One (backend, suite) run is one Hypothesis stateful test: a machine class bound to a fresh
``RunContext``, run by ``run_state_machine_as_test`` under a profile's settings and a seed. When it
fails, the context holds the program of the last failing example, which is the shrunk one
(Hypothesis replays the minimal example last), and that program goes into a failure file.
"""

from __future__ import annotations

import contextlib
import random
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import hypothesis
from hypothesis.stateful import run_state_machine_as_test

from conformance._failures import FailureFile
from conformance._faults import ALL_FAULTS, FaultFilter
from conformance._machine import RunContext
from conformance._minimize import minimize
from conformance._outage import BackendLost, outage_reason
from conformance._progress import Progress
from conformance._report import FailureSummary, Report, SuiteResult, Verdict
from conformance._settings import hypothesis_settings
from conformance._suites import FAMILIES, BackendUnderTest, Suite, suite_named
from conformance._violations import CoverageGap, HarnessEnvironmentError, Violation

DEFAULT_FAILURE_DIR = Path(".ratchet/failures")
DEFAULT_DATABASE_DIR = Path(".ratchet/examples")


@attrs.frozen
class RunOptions:
    profile: str = "ci"
    examples: int | None = None  # overrides the profile's max_examples
    steps: int | None = None  # overrides the profile's stateful_step_count
    seed: int | None = None  # None: a random seed, recorded in the report and failure files
    faults: FaultFilter = ALL_FAULTS
    failure_dir: Path | None = DEFAULT_FAILURE_DIR
    database_dir: Path | None = DEFAULT_DATABASE_DIR
    coverage_gate: bool = True
    minimize: bool = True  # after Hypothesis, drop every step the violation does not need


def run_conformance(
    store_factory: str | Callable[..., Any],
    *,
    outbox_factory: str | Callable[..., Any] | None = None,
    backend: str = "custom",
    suites: Sequence[str] = ("store", "commit"),
    profile: str = "ci",
    examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
    faults: Iterable[str] | FaultFilter | None = None,
    failure_dir: Path | str | None = DEFAULT_FAILURE_DIR,
    database_dir: Path | str | None = DEFAULT_DATABASE_DIR,
    coverage_gate: bool = True,
    progress: bool | Progress = False,
) -> Report:
    """Run suites on one third-party backend; no pytest needed. Never raises for a verdict.

    ``store_factory`` fills the primary role of each suite's family (as ``--store`` does): for
    the commit-family suites (``store``, ``commit``) an ``impls.api.StoreFactory`` (``async
    (namespace, membership) -> MessageStore``), without ``outbox_factory`` the in-memory outbox
    is used; for ``suites=("saga",)`` an ``impls.saga.SagaBackendFactory`` (``(namespace) ->
    SagaBackend``), and ``outbox_factory`` must be None. Either may be a callable or its
    ``"module:function"`` path. ``faults`` restricts what is injected (kind or fault-point names,
    ``-name`` to drop one). Inspect ``Report.ok`` / ``Report.exit_code`` / ``Report.details()``;
    an unknown suite or an outbox for the saga suite raises ``ValueError`` (a bad factory path is
    an ``ERROR`` verdict).
    """
    pairs = []
    for name in suites:
        suite = suite_named(name)
        family = FAMILIES[suite.family]
        pairs.append((family.custom_backend(backend, store_factory, outbox_factory), suite))
    options = RunOptions(
        profile=profile,
        examples=examples,
        steps=steps,
        seed=seed,
        faults=faults if isinstance(faults, FaultFilter) else FaultFilter.parse(faults),
        failure_dir=Path(failure_dir) if failure_dir is not None else None,
        database_dir=Path(database_dir) if database_dir is not None else None,
        coverage_gate=coverage_gate,
    )
    printer = progress if isinstance(progress, Progress) else (Progress() if progress else None)
    return run_matrix(pairs, options, printer)


def run_matrix(
    pairs: Sequence[tuple[BackendUnderTest, Suite]], options: RunOptions, progress: Progress | None = None
) -> Report:
    results = []
    for backend, suite in pairs:
        if progress is not None:
            progress.line(f"running {suite.name} on {backend.name} ({options.profile})")
        result = run_suite(suite, backend, options, progress)
        if progress is not None:
            progress.line(
                f"  {backend.name}/{suite.name}: {result.headline()} — {result.stats.examples} examples, "
                f"{result.stats.steps} steps, {result.elapsed_s:.1f}s"
            )
        results.append(result)
    return Report(tuple(results))


def run_suite(
    suite: Suite, backend: BackendUnderTest, options: RunOptions, progress: Progress | None = None
) -> SuiteResult:
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    started = time.perf_counter()
    try:
        target = suite.make_target(backend)
        examples = options.examples if options.examples is not None else suite.examples.get(options.profile)
        settings = hypothesis_settings(
            options.profile, examples=examples, steps=options.steps, database_dir=options.database_dir
        )
    except ValueError as exc:
        context = RunContext(suite.name, backend.name, None)
        return SuiteResult(backend.name, suite.name, Verdict.ERROR, context.stats, 0.0, seed, error=str(exc))
    context = RunContext(
        suite.name, backend.name, target, options.faults, progress=progress, profile=options.profile
    )
    machine = hypothesis.seed(seed)(context.machine_class(suite.machine()))

    def result(verdict: Verdict, **kwargs: Any) -> SuiteResult:
        return SuiteResult(
            backend.name, suite.name, verdict, context.stats, time.perf_counter() - started, seed, **kwargs
        )

    try:
        run_state_machine_as_test(machine, settings=settings)
    except HarnessEnvironmentError as exc:
        return result(Verdict.ERROR, error=str(exc))
    except BackendLost as exc:
        return result(Verdict.ERROR, error=str(exc))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        # An outage is not a verdict: a server that went away explains whatever failed.
        outage = context.environment_error or outage_reason(backend.service)
        if outage is not None:
            return result(Verdict.ERROR, error=outage)
        recorded = context.last_failure
        violation = _violation_in(exc)
        if recorded is None or violation is None:
            lines = traceback.format_exception(exc)
            return result(Verdict.ERROR, error=f"the harness failed: {exc!r}\n{''.join(lines[-12:])}")
        flaky = not isinstance(exc, Violation)
        failure = FailureFile(
            suite=suite.name,
            backend=backend.name,
            factories=backend.factory_paths(),
            seed=seed,
            profile=options.profile,
            faults=options.faults.describe(),
            hypothesis_version=hypothesis.__version__,
            rule_id=recorded.violation.rule_id,
            message=recorded.violation.message,
            context=recorded.violation.context,
            program=tuple(recorded.program),
            trace=tuple(recorded.trace),
            reproduce_blob=_reproduce_blob(exc),
        )
        if options.minimize:
            # If the backend goes away while replaying, Hypothesis's program stands.
            with contextlib.suppress(HarnessEnvironmentError):
                failure = minimize(failure)
        path = failure.write(options.failure_dir) if options.failure_dir is not None else None
        where = failure.context.get("at")
        summary = FailureSummary(
            failure.rule_id, failure.message, failure.program, path, flaky, str(where) if where else None
        )
        return result(Verdict.VIOLATION, failure=summary)

    targets = suite.coverage_targets(context.stats)
    gaps = tuple(
        CoverageGap(target, why)
        for target, why in sorted(targets.items())
        if target not in context.stats.reached
    )
    if gaps and options.coverage_gate:
        return result(Verdict.COVERAGE, coverage_gaps=gaps, coverage_targets=len(targets))
    return result(Verdict.PASS, coverage_gaps=gaps, coverage_targets=len(targets))


def _violation_in(exc: BaseException) -> Violation | None:
    if isinstance(exc, Violation):
        return exc
    if isinstance(exc, BaseExceptionGroup):  # a Flaky failure wraps what it saw
        for inner in exc.exceptions:
            found = _violation_in(inner)
            if found is not None:
                return found
    return None


def _reproduce_blob(exc: BaseException) -> str | None:
    for note in getattr(exc, "__notes__", ()):
        start = note.find("@reproduce_failure(")
        if start >= 0:
            end = note.find(")", start)
            return str(note[start : end + 1] if end > 0 else note[start:])
    return None


def probe_service(name: str) -> None:
    """Raise ``HarnessEnvironmentError`` with one clear line when a backend's server is unreachable."""
    from conformance import services

    try:
        reason = services.probe(name)
    except ValueError as exc:
        raise HarnessEnvironmentError(str(exc)) from None
    if reason is not None:
        raise HarnessEnvironmentError(reason)
