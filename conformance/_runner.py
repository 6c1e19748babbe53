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

from conformance import _signals
from conformance._failures import FailureFile
from conformance._faults import ALL_FAULTS, FaultFilter, fault_targets
from conformance._journal import Journal
from conformance._machine import BudgetSpent, RunContext, StoppedByPeer, SuiteStats
from conformance._minimize import minimize
from conformance._outage import BackendLost, outage_reason
from conformance._progress import Progress
from conformance._report import FailureSummary, Report, SuiteResult, Verdict
from conformance._settings import PROFILES, hypothesis_settings
from conformance._signals import RunInterrupted
from conformance._suites import FAMILIES, BackendUnderTest, Suite, suite_named
from conformance._violations import (
    CoverageGap,
    HarnessEnvironmentError,
    Violation,
    environment_error_in,
    violation_in,
)

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
    #: Seconds for the whole matrix (``--time-budget``); ``run_matrix`` gives each suite an equal
    #: share of what is left, and a suite stops generating when its share is spent.
    time_budget_s: float | None = None
    #: Seconds Hypothesis may shrink the first failure found (``--shrink-budget``); then the
    #: runner's 1-minimal pass takes the program as it stands. None: Hypothesis's own limits
    #: (up to five minutes of replays, each a whole example on a real engine).
    shrink_budget_s: float | None = None
    #: Further example databases read (never written) beside ``database_dir``: a worker writes its
    #: own shard and still retries what the others and single-process runs saved.
    database_read_also: tuple[Path, ...] = ()
    #: Stop generating once every demanded target is reached (``--stop-when-covered``; for
    #: ``scripts/reach.py``: whether a target is reached is decided by the examples before).
    stop_when_covered: bool = False


def shrink_grace_s(share_s: float) -> float:
    """How long a failure found before the budget ran out may still shrink after it."""
    return min(60.0, max(5.0, share_s / 4))


def with_committer(backend: BackendUnderTest, committer: str | Callable[..., Any] | None) -> BackendUnderTest:
    """``backend`` with its ``committer`` role filled (``--committer``); ``ValueError`` outside the
    commit family."""
    if committer is None:
        return backend
    if backend.family != "commit":
        raise ValueError(f"a committer factory applies to the commit suites only, not to {backend.family}")
    return attrs.evolve(backend, factories={**backend.factories, "committer": committer})


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
    shrink_budget_s: float | None = None,
    progress: bool | Progress = False,
    service: str | None = None,
    committer_factory: str | Callable[..., Any] | None = None,
) -> Report:
    """Run suites on one third-party backend; no pytest needed. Never raises for a verdict.

    ``store_factory`` fills the primary role of each suite's family (as ``--store`` or
    ``--saga-backend`` does): for the commit-family suites (``store``, ``commit``) an
    ``impls.api.StoreFactory`` (``async
    (namespace, membership) -> MessageStore``), without ``outbox_factory`` the in-memory outbox
    is used; for ``suites=("saga",)`` an ``impls.saga.SagaBackendFactory`` (``(namespace) ->
    SagaBackend``), and ``outbox_factory`` must be None. Either may be a callable or its
    ``"module:function"`` path. ``faults`` restricts what is injected (kind or fault-point names,
    ``-name`` to drop one). Inspect ``Report.ok`` / ``Report.exit_code`` / ``Report.details()``;
    an unknown suite or an outbox for the saga suite raises ``ValueError`` (a bad factory path is
    an ``ERROR`` verdict). ``service`` names the real service (``redis``, ``cassandra``,
    ``postgres``, ``mariadb``) a factory that takes an ``endpoint`` keyword is opened on, through
    a fault proxy: the wire faults then apply (docs/backend-authors.md). ``committer_factory``
    (commit family only) is the committer the commit suite holds against the contract instead of
    ``impls.commit.MessageCommitter``, called with the same arguments.
    """
    pairs = []
    for name in suites:
        suite = suite_named(name)
        family = FAMILIES[suite.family]
        custom = family.custom_backend(backend, store_factory, outbox_factory, service)
        pairs.append((with_committer(custom, committer_factory), suite))
    options = RunOptions(
        profile=profile,
        examples=examples,
        steps=steps,
        seed=seed,
        faults=faults if isinstance(faults, FaultFilter) else FaultFilter.parse(faults),
        failure_dir=Path(failure_dir) if failure_dir is not None else None,
        database_dir=Path(database_dir) if database_dir is not None else None,
        coverage_gate=coverage_gate,
        shrink_budget_s=shrink_budget_s,
    )
    printer = progress if isinstance(progress, Progress) else (Progress() if progress else None)
    return run_matrix(pairs, options, printer)


SuiteRunner = Callable[
    [Suite, BackendUnderTest, RunOptions, "Progress | None", "Journal | None"], SuiteResult
]


def run_matrix(
    pairs: Sequence[tuple[BackendUnderTest, Suite]],
    options: RunOptions,
    progress: Progress | None = None,
    journal: Journal | None = None,
    run_one: SuiteRunner | None = None,
) -> Report:
    """Run each pair in turn. Under a ``SignalGuard`` a signal stops the run at the next step
    boundary: the running suite is ``interrupted``, the rest ``not-run`` (``Report.interrupted_by``).
    ``run_one`` runs one pair (default ``run_suite``; ``conformance._workers`` splits it across
    processes)."""
    run_one = run_one if run_one is not None else run_suite
    journal = journal if journal is not None else Journal.of([(b.name, s.name) for b, s in pairs])
    budget_end = None if options.time_budget_s is None else time.monotonic() + options.time_budget_s
    for index, (backend, suite) in enumerate(pairs):
        if _signals.pending() is not None:
            break
        if progress is not None:
            progress.line(
                f"running {suite.name} on {backend.name} ({options.profile}) [{index + 1}/{len(pairs)}]"
            )
        suite_options = options
        if budget_end is not None:
            # An equal share of what is left, so a slow first suite cannot starve the last one.
            share = max(0.0, budget_end - time.monotonic()) / (len(pairs) - index)
            suite_options = attrs.evolve(options, time_budget_s=share)
        result = run_one(suite, backend, suite_options, progress, journal)
        if progress is not None:
            budget = ", time budget spent" if result.budget_spent else ""
            progress.line(
                f"  {backend.name}/{suite.name}: {result.headline()} — {result.stats.examples} examples, "
                f"{result.stats.steps} steps, {result.elapsed_s:.1f}s{budget}"
            )
        journal.finish(result)
        if result.verdict is not Verdict.PASS and _fails_fast(options.profile):
            # The mutation profile wants one verdict, not all of them: the rest are not run.
            for later_backend, later_suite in pairs[index + 1 :]:
                journal.finish(
                    SuiteResult(
                        later_backend.name, later_suite.name, Verdict.NOT_RUN, SuiteStats(), 0.0, None
                    )
                )
            break
    return journal.report(_signals.pending())


def planned_examples(suite: Suite, backend: BackendUnderTest, options: RunOptions) -> int | None:
    """Examples asked of one pair: ``--examples``, else the fewest of the suite's and backend's
    caps for the profile (a backend's ``"<profile>:<suite>"`` cap before its ``"<profile>"`` one);
    None: the profile's own count."""
    if options.examples is not None:
        return options.examples
    own = backend.examples.get(f"{options.profile}:{suite.name}", backend.examples.get(options.profile))
    caps = [c for c in (suite.examples.get(options.profile), own) if c]
    return min(caps) if caps else None


def run_suite(
    suite: Suite,
    backend: BackendUnderTest,
    options: RunOptions,
    progress: Progress | None = None,
    journal: Journal | None = None,
    *,
    context_hook: Callable[[RunContext], None] | None = None,
) -> SuiteResult:
    """One pair in this process. ``context_hook`` sees the run's context before the first example
    (a worker process wires its progress and its peers in there)."""
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    started = time.perf_counter()
    try:
        target = suite.make_target(backend)
        settings = hypothesis_settings(
            options.profile,
            examples=planned_examples(suite, backend, options),
            steps=options.steps if options.steps is not None else backend.steps.get(options.profile),
            database_dir=options.database_dir,
            read_also=options.database_read_also,
        )
    except ValueError as exc:
        context = RunContext(suite.name, backend.name, None)
        return SuiteResult(backend.name, suite.name, Verdict.ERROR, context.stats, 0.0, seed, error=str(exc))
    context = RunContext(
        suite.name,
        backend.name,
        target,
        options.faults,
        progress=progress,
        profile=options.profile,
        service=backend.service,
    )
    context.target_examples = settings.max_examples
    if options.time_budget_s is not None:
        context.deadline = time.monotonic() + options.time_budget_s
        context.hard_deadline = context.deadline + shrink_grace_s(options.time_budget_s)
    context.shrink_budget_s = options.shrink_budget_s
    if options.stop_when_covered:
        context.covered = lambda: context.stats.reached.issuperset(demanded_targets(suite, context.stats)[0])
    if context_hook is not None:
        context_hook(context)
    machine = hypothesis.seed(seed)(context.machine_class(suite.machine()))

    def found_in_time(found: FailureFile) -> SuiteResult:
        # Made 1-minimal when the shrink budget ended Hypothesis's shrinking; a spent time budget
        # leaves no time for it (docs/ci-gate.md: the program may then be less shrunk).
        if not context.budget_spent:
            try:
                found = minimized(found)
            except RunInterrupted:
                return interrupted()
        return result(Verdict.VIOLATION, failure=summary(found, False))

    def minimized(failure: FailureFile) -> FailureFile:
        if not (options.minimize and _shrinks(options.profile)):
            return failure
        # If the backend goes away while replaying, Hypothesis's program stands.
        with contextlib.suppress(HarnessEnvironmentError):
            return minimize(failure)
        return failure

    def result(verdict: Verdict, **kwargs: Any) -> SuiteResult:
        # After a signal or an outage: report first; the leftovers are `conformance clean`'s.
        if _signals.pending() is None and verdict is not Verdict.ERROR:
            # Drop the earlier failing examples' namespaces; keep the counterexample's (_cleanup).
            context.cleanup.settle(keep_last=verdict is Verdict.VIOLATION)
        return SuiteResult(
            backend.name,
            suite.name,
            verdict,
            context.stats,
            time.perf_counter() - started,
            seed,
            budget_spent=context.budget_spent,
            target_examples=context.target_examples,
            namespaces_dropped=context.cleanup.dropped,
            namespaces_kept=context.cleanup.kept,
            gated=options.coverage_gate,
            stopped_covered=context.stopped_covered,
            **kwargs,
        )

    def failure_file(exc: BaseException | None) -> FailureFile | None:
        recorded = context.last_failure
        if recorded is None:
            return None
        return FailureFile(
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
            reproduce_blob=_reproduce_blob(exc) if exc is not None else None,
            service=backend.service,
        )

    def summary(failure: FailureFile, flaky: bool) -> FailureSummary:
        path = None
        tag = _factory_tag(backend)
        if options.failure_dir is not None:
            path = failure.write(options.failure_dir, factory=tag)
        where = failure.context.get("at")
        trust = ",".join(sorted(_untrusted_modules(backend))) or None
        return FailureSummary(
            failure.rule_id,
            failure.message,
            failure.program,
            path,
            flaky,
            str(where) if where else None,
            trust,
        )

    def step_error_result(exc: BaseException) -> SuiteResult:
        # The shrink budget stopped Hypothesis shrinking an exception that is no violation: it is
        # reported as it was first raised; an outage or an environment error stays one (exit 2),
        # named as the branch below names it.
        outage = context.environment_error or outage_reason(backend.service)
        if outage is not None:
            return result(Verdict.ERROR, error=outage)
        environment = environment_error_in(exc)
        if environment is not None:
            return result(Verdict.ERROR, error=str(environment))
        lines = traceback.format_exception(exc)
        return result(Verdict.ERROR, error=f"the harness failed: {exc!r}\n{''.join(lines[-12:])}")

    def interrupted() -> SuiteResult:
        # No verdict; a violation found before the signal keeps its (unminimized) failure file.
        found = failure_file(None)
        return result(Verdict.INTERRUPTED, failure=None if found is None else summary(found, False))

    if journal is not None:
        journal.running = interrupted
    try:
        _signals.check()
        try:
            run_state_machine_as_test(machine, settings=settings)
        except StoppedByPeer:
            return result(Verdict.STOPPED)  # another worker's violation is the verdict
        except BudgetSpent:
            # Generation stopped on time. A failure found before is a verdict all the same (its
            # program may be less shrunk); otherwise the suite is judged on the examples that ran.
            found = failure_file(None)
            if found is not None:
                return found_in_time(found)
            if context.step_error is not None:
                return step_error_result(context.step_error)
        except Exception as exc:
            # The deadline stopped a replay of the shrinker, and Hypothesis took the shortened
            # replay for a flaky strategy: the failure it was shrinking stands.
            cut_short = context.shrink_stopped and violation_in(exc) is None
            found = failure_file(None) if cut_short and environment_error_in(exc) is None else None
            if found is None or isinstance(exc, RunInterrupted | BackendLost):
                raise
            return found_in_time(found)
    except RunInterrupted:
        return interrupted()
    except HarnessEnvironmentError as exc:
        if _signals.pending() is not None:
            return interrupted()
        return result(Verdict.ERROR, error=str(exc))
    except BackendLost as exc:
        return result(Verdict.ERROR, error=str(exc))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if _signals.pending() is not None:
            return interrupted()  # whatever Hypothesis made of the interrupted example is no verdict
        # An outage is not a verdict: a server that went away explains whatever failed.
        outage = context.environment_error or outage_reason(backend.service)
        if outage is not None:
            return result(Verdict.ERROR, error=outage)
        violation = violation_in(exc)
        environment = environment_error_in(exc)
        if environment is None and violation is None and context.step_error is not None:
            # Hypothesis's flaky complaint names no exception of the example (data generation
            # that "stopped drawing earlier" when a replayed program met the environment error
            # at an earlier step than the run it followed): the first error of a step says why.
            environment = environment_error_in(context.step_error)
        if violation is None and environment is not None:
            # A flaky outage or factory failure, wrapped by Hypothesis: still no verdict.
            return result(Verdict.ERROR, error=str(environment))
        failure = failure_file(exc)
        if failure is None or violation is None:
            lines = traceback.format_exception(exc)
            return result(Verdict.ERROR, error=f"the harness failed: {exc!r}\n{''.join(lines[-12:])}")
        flaky = not isinstance(exc, Violation)
        try:
            failure = minimized(failure)
        except RunInterrupted:
            return interrupted()
        return result(Verdict.VIOLATION, failure=summary(failure, flaky))
    if _signals.pending() is not None:
        return interrupted()

    targets, not_applicable = demanded_targets(suite, context.stats)
    if not_applicable:
        by_reason: dict[str, list[str]] = {}
        for name, why in sorted(not_applicable.items()):
            by_reason.setdefault(why, []).append(name)
        context.stats.details["not-applicable"] = "; ".join(
            f"{', '.join(names)}: {why}" for why, names in by_reason.items()
        )
    gaps = tuple(
        CoverageGap(target, why)
        for target, why in sorted(targets.items())
        if target not in context.stats.reached
    )
    verdict = Verdict.COVERAGE if gaps and options.coverage_gate else Verdict.PASS
    return result(verdict, coverage_gaps=gaps, coverage_targets=len(targets), demanded=tuple(sorted(targets)))


def demanded_targets(suite: Suite, stats: SuiteStats) -> tuple[dict[str, str], dict[str, str]]:
    """The coverage gate's targets (name -> what a gap means) and the fault kinds that do not
    apply on this backend (name -> why): fault:<kind> for every kind the backend can suffer."""
    targets = dict(suite.coverage_targets(stats))
    kind_targets, not_applicable = fault_targets(suite.fault_kinds, stats.details)
    targets.update(kind_targets)
    return targets, not_applicable


def _shrinks(profile: str) -> bool:
    known = PROFILES.get(profile)
    return known is None or known.shrink


def _fails_fast(profile: str) -> bool:
    known = PROFILES.get(profile)
    return known is not None and known.fail_fast


def _factory_tag(backend: BackendUnderTest) -> str | None:
    """The primary factory's path for a backend that is not a registered one (failure-file names)."""
    if backend.is_registered():
        return None
    role = FAMILIES[backend.family].primary_role
    return backend.factory_paths().get(role)


def _untrusted_modules(backend: BackendUnderTest) -> set[str]:
    """The modules ``conformance replay`` of this backend's failure file must be told to trust."""
    registered = FAMILIES[backend.family].registered_paths()
    return {
        path.partition(":")[0]
        for role, path in backend.factory_paths().items()
        if path not in registered.get(role, frozenset()) and not path.startswith("<")
    }


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
