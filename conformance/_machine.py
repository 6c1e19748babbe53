"""The base of every conformance state machine: one event loop per example, recorded steps.

Theory of operation
-------------------
A suite's machine is a Hypothesis ``RuleBasedStateMachine`` whose rules are decorated with
``@step`` under ``@rule``. ``@step`` records ``(rule name, arguments)`` before the rule runs, counts
it, runs the suite's after-step checks, and on a ``Violation`` stores the program so far in the run
context. Arguments are drawn from small pools of JSON values (strings, ints, lists of ints), so the
recorded program is both the readable counterexample and a replayable file: replay calls the same
methods with the same arguments, in order, with no Hypothesis involved (``conformance/_replay.py``).

Every example gets a fresh event loop (created here, closed in ``teardown``) because asyncio
clients such as redis.asyncio pools bind to the loop they were made on; rules drive coroutines
with ``self.run(...)``. Every example also opens its backend on a new namespace; nothing is ever
flushed or truncated.

The machine classes are specialised per run by ``RunContext.machine_class``: a dynamic subclass
whose name carries backend and suite, which is also what keys the Hypothesis example database.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar, cast

import attrs
from hypothesis.stateful import RuleBasedStateMachine

from conformance import _signals
from conformance._cleanup import CleanupJudge, Namespaces, namespace_stamp
from conformance._faults import ALL_FAULTS, FaultFilter
from conformance._latency import CallLatencies
from conformance._opened import start_recording
from conformance._outage import BackendLost, bounded, lost, outage_reason
from conformance._violations import HarnessEnvironmentError, JsonValue, Violation

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen
class Step:
    """One rule call of a program: the rule's name and its JSON arguments."""

    rule: str
    args: dict[str, JsonValue]

    def render(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"{self.rule}({inner})"


@attrs.define
class SuiteStats:
    """What one suite run on one backend did; shared by all its examples."""

    examples: int = 0
    steps: int = 0
    faults: Counter[str] = attrs.field(factory=Counter)  # fault kind -> times injected
    rules: Counter[str] = attrs.field(factory=Counter)  # machine rule -> times run
    reached: set[str] = attrs.field(factory=set)  # coverage targets hit ("fault-point:M-COMMIT-04")
    #: Per target, how many examples reached it: ``scripts/reach.py`` turns the share of examples
    #: into the chance that a whole run misses it.
    reached_in: Counter[str] = attrs.field(factory=Counter)
    #: Per target, the number of the example (1-based) that reached it first: with a fixed seed
    #: and no database the examples come in a fixed order, so a run of ``N`` examples reaches a
    #: target exactly when this is at most ``N`` (``scripts/reach.py``, docs/ci-gate.md).
    first_reached: dict[str, int] = attrs.field(factory=dict)
    backend_seconds: float = 0.0  # time spent awaiting the system under test
    latency: CallLatencies = attrs.field(factory=CallLatencies)  # backend call latency per method
    details: dict[str, str] = attrs.field(factory=dict)  # facts learnt while running (capabilities)


class BudgetSpent(KeyboardInterrupt):
    """The run's time budget is spent (``--time-budget``): stop generating, report what ran.

    A ``KeyboardInterrupt`` for the same reason as ``_signals.RunInterrupted``: it is the one
    exception Hypothesis lets through without saving the example or shrinking it. The runner
    catches it; it never reaches the CLI."""


class StoppedByPeer(BudgetSpent):
    """Another worker of the same suite found a violation first (``conformance._workers``): this
    one stops generating, and shrinks nothing, so the run's violation is shrunk exactly once."""


@attrs.define
class RecordedFailure:
    program: list[Step]
    violation: Violation
    trace: list[str]


ProgressHook = Callable[["RunContext"], None]


#: How often, at most, a run asks the backend's service whether it still answers (one request).
PROBE_EVERY_S = 10.0


@attrs.define(eq=False)
class RunContext:
    """Everything the examples of one (backend, suite) run share.

    ``target`` is suite-specific (for the commit suites, the store and outbox factories); the
    machine reads it and nothing else here knows its shape.
    """

    suite: str
    backend: str
    target: Any
    faults: FaultFilter = ALL_FAULTS
    stats: SuiteStats = attrs.field(factory=SuiteStats)
    last_failure: RecordedFailure | None = None
    progress: ProgressHook | None = None
    profile: str = "ci"  # faults that cost seconds (a Cassandra restart) run only in some profiles
    environment_error: str | None = None  # set by the watchdog (conformance/_outage.py): no verdict
    run_id: str = attrs.field(factory=lambda: uuid.uuid4().hex[:6])
    started: float = attrs.field(factory=time.perf_counter)
    target_examples: int | None = None  # what the settings ask for (progress: done/target, ETA)
    #: ``time.monotonic()`` after which no new example starts unless a failure is being shrunk,
    #: and after which nothing more runs at all (the shrinking of a found failure included).
    deadline: float | None = None
    hard_deadline: float | None = None
    #: Seconds the first failure may shrink (``RunOptions.shrink_budget_s``): once it is found,
    #: no new example starts and shrinking ends that long after.
    shrink_budget_s: float | None = None
    #: The deadline ended the shrinking of a found failure: whatever Hypothesis makes of the
    #: interrupted replay (its final run then draws less, a "flaky" definition) is not a verdict.
    shrink_stopped: bool = False
    #: The first exception other than a Violation that escaped a step (a harness bug, an
    #: environment error raised part-way): no verdict, but Hypothesis shrinks it like a failure,
    #: so it gets the same bounded shrink as a violation (``start_shrink_clock``).
    step_error: BaseException | None = None
    budget_spent: bool = False
    cleanup: Namespaces = attrs.field(factory=Namespaces)
    #: The backend's real service (BackendSpec.service): probed between examples, see check_service.
    service: str | None = None
    example_reached: set[str] = attrs.field(factory=set)  # what the running example reached
    #: Set in a worker process (``conformance._workers``): ``peer_check`` runs at every example
    #: start and step (it raises ``StoppedByPeer`` once another worker claimed a violation);
    #: ``on_failure`` runs when this worker records a violation (it claims it).
    peer_check: Callable[[], None] | None = None
    #: ``--stop-when-covered`` (``scripts/reach.py`` alone): true once every demanded target is
    #: reached; no example starts after that (``stopped_covered``), as if the budget were spent.
    covered: Callable[[], bool] | None = None
    stopped_covered: bool = False
    on_failure: Callable[[], None] | None = None
    _namespaces: int = 0
    _probed: float = attrs.field(factory=time.monotonic)

    def new_namespace(self) -> str:
        """A fresh namespace per example: letters and digits only, unique across runs and processes."""
        self._namespaces += 1
        # The time comes first, so ``conformance clean`` can tell a run in progress from leftovers.
        return f"rt{namespace_stamp()}{self.run_id}{os.getpid() % 100000:05d}x{self._namespaces}"

    def reach(self, target: str) -> None:
        if target not in self.example_reached:
            self.example_reached.add(target)
            self.stats.reached.add(target)
            self.stats.reached_in[target] += 1
            self.stats.first_reached.setdefault(target, self.stats.examples)

    def check_budget(self) -> None:
        """Raise ``BudgetSpent`` once the deadline passed: at once when nothing failed yet, else
        after the hard deadline (a found failure gets the time between them to shrink)."""
        if self.peer_check is not None:
            self.peer_check()
        if self.deadline is None:
            return
        now = time.monotonic()
        shrinking = self.last_failure is not None or self.step_error is not None
        if now >= self.deadline and (not shrinking or now >= (self.hard_deadline or self.deadline)):
            # The shrink budget ends a verdict already found, not the run's time budget.
            self.budget_spent = self.budget_spent or not (shrinking and self.shrink_budget_s is not None)
            self.shrink_stopped = shrinking
            raise BudgetSpent()

    def check_covered(self) -> None:
        """At an example's start: raise ``BudgetSpent`` once every demanded target was reached
        (``covered``), unless a failure is being shrunk; the examples before are the run's own."""
        if self.covered is None or self.last_failure is not None or self.step_error is not None:
            return
        if self.stats.examples and self.covered():
            self.stopped_covered = True
            raise BudgetSpent()

    def start_shrink_clock(self) -> None:
        """The first failure of the run was found: no new example starts, and Hypothesis shrinks
        it for at most ``shrink_budget_s`` (docs/ci-gate.md)."""
        if self.shrink_budget_s is None or self.last_failure is not None or self.step_error is not None:
            return
        now = time.monotonic()
        self.deadline = min(now, self.deadline or now)
        self.hard_deadline = min(now + self.shrink_budget_s, self.hard_deadline or math.inf)

    def check_service(self) -> None:
        """Between examples, at most every ``PROBE_EVERY_S``: a real service that stopped answering
        ends the run as an outage (exit 2) within seconds, instead of a store answering UNAVAILABLE
        (a legal answer) to every call until the last example (docs/ci-gate.md, exit codes)."""
        if self.service is None or time.monotonic() - self._probed < PROBE_EVERY_S:
            return
        reason = outage_reason(self.service)
        self._probed = time.monotonic()
        if reason is not None:
            raise lost(reason, self)

    def inject(self, kind: str) -> None:
        self.stats.faults[kind] += 1
        self.reach(f"fault:{kind}")

    def machine_class(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        """A subclass bound to this context, named after backend and suite (the database key)."""
        label = "".join(ch if ch.isalnum() else "_" for ch in f"{self.backend}_{self.suite}")
        # A target may add rules its backend supports (the wire faults: conformance/commit/_target.py).
        specialise = getattr(self.target, "specialise", None)
        if callable(specialise):
            base = specialise(base)
        return type(f"{base.__name__}_{label}", (base,), {"context": self})


class ConformanceMachine(RuleBasedStateMachine):
    """Base machine: event loop, step recording, violation capture, quiescence hook."""

    context: ClassVar[RunContext]

    def __init__(self) -> None:
        _signals.check()  # a signal stops the run before a new example opens anything
        self.context.check_budget()
        self.context.check_covered()
        self.context.check_service()
        self.opened = start_recording()  # what this example's factories open (conformance._cleanup)
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.program: list[Step] = []
        self.trace = []  # what the system under test was asked in the current step
        self.failed = False
        self.cut_short = False  # a step was stopped before it ran (budget, signal, peer) or part-way
        self.context.stats.examples += 1
        self.context.example_reached = set()
        self._last_progress = 0
        if self.context.progress is not None:
            self.context.progress(self.context)

    # --- driving coroutines -------------------------------------------------------------------

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def run_cleanup(self, coro: Awaitable[T]) -> T:
        """``run`` under the watchdog: the drops and read-backs of a passing example are backend
        calls too, and a frozen server there must end the run as an outage (``conformance._outage``)."""
        return self.run(bounded("the namespace cleanup's backend call", coro, self.context))

    def note(self, line: str | Callable[[], str]) -> None:
        """One line of the step's trace; a callable is called only when the trace is read (a
        failure's report, a test): most steps pass, and their lines are never shown."""
        if len(self._trace) < 200:
            self._trace.append(line)

    @property
    def trace(self) -> list[str]:
        """The current step's trace lines, the lazy ones formatted now (and kept formatted)."""
        lines = self._trace
        for index, line in enumerate(lines):
            if not isinstance(line, str):
                lines[index] = line()
        return cast(list[str], lines)

    @trace.setter
    def trace(self, lines: list[str]) -> None:
        self._trace: list[str | Callable[[], str]] = list(lines)

    # --- hooks for suites ---------------------------------------------------------------------

    def after_step(self) -> None:
        """Checks that hold after every step (forward-only rank, stable coordinates, ...)."""

    def at_quiescence(self) -> None:
        """Checks that hold once the faults stop and recovery has run (called by ``teardown``)."""

    def close(self) -> None:
        """Release the backend (runs inside the example's loop through ``self.run``)."""

    def environment_reason(self, error: Exception) -> str | None:
        """Why ``error``, escaped from a step or from quiescence, is the environment's and no verdict
        (one line), or None when it is not. A suite names its backends' transient answers here (a
        database that refused the harness's read on every attempt beside other sessions): raised
        as they are, they are "the harness failed", and since the same program does not meet them
        again, Hypothesis reports its data generation flaky (docs/ci-gate.md, "Not judged")."""
        return None

    def _as_environment(self, error: BaseException) -> BaseException:
        """``error`` as a ``HarnessEnvironmentError`` when the suite says it is the environment's."""
        if isinstance(error, Exception) and not isinstance(error, HarnessEnvironmentError):
            reason = self.environment_reason(error)
            if reason is not None:
                return HarnessEnvironmentError(reason)  # raised ``from`` the error itself
        return error

    def cleanup_judge(self) -> CleanupJudge | None:
        """How a passing example's dropped namespaces are read back (C-POST-12, S-TX-04); None:
        dropped unjudged."""
        return None

    # --- lifecycle ----------------------------------------------------------------------------

    def _environment_check(self) -> None:
        """A watchdog fired in this step (a wrapper may have caught it): the run ends, no verdict."""
        reason = self.context.environment_error
        if reason is not None:
            raise BackendLost(reason)

    def record_failure(self, violation: Violation) -> None:
        self.failed = True
        context = self.context
        context.start_shrink_clock()
        context.last_failure = RecordedFailure(list(self.program), violation, list(self.trace))
        if self.context.on_failure is not None:
            self.context.on_failure()

    def teardown(self) -> None:
        finished = False
        try:
            # An interrupted example did not finish: its end checks would judge half a program.
            # (A shrink stopped by its budget, or a peer's claim, cuts an example short too.)
            stopped = self.cut_short or _signals.pending() is not None or self.context.budget_spent
            # An example that ran no step is not judged either: Hypothesis also tears down an
            # example it abandoned before its first draw (while shrinking), and a failure with an
            # empty program is one `conformance replay` cannot run (seen on the planted
            # stage_per_unit runtime under load: S-OBS-02 reported with no program).
            if not self.failed and not stopped and self.program:
                self.trace = []
                try:
                    self.at_quiescence()
                except Violation as violation:
                    violation.context.setdefault("at", "quiescence")
                    self.record_failure(violation)
                    raise
                except Exception as exc:  # a harness bug or an outage at the end: bounded shrink too
                    error = self._as_environment(exc)
                    self.context.start_shrink_clock()
                    if self.context.step_error is None:
                        self.context.step_error = error
                    if error is not exc:
                        raise error from exc
                    raise
                finished = True
        finally:
            left: Violation | None = None
            try:
                if self.failed:
                    self.context.cleanup.failed(self.opened)
                elif finished or self.context.budget_spent:  # (after a signal: exit first, clean later)
                    # Before close: the same objects. Only a finished example's drop is judged
                    # (C-POST-12, S-TX-04): after a signal or the budget, exit first, clean later.
                    judge = self.cleanup_judge() if finished else None
                    left = self.context.cleanup.passed(self.opened, self.run_cleanup, judge)
                    if left is not None:
                        left.context.setdefault("at", "cleanup")
                        self.record_failure(left)
                        self.context.cleanup.failed(self.opened)  # kept, to be inspected
                self.close()
            finally:
                self._close_loop()
            if left is not None:
                raise left

    def _close_loop(self) -> None:
        loop = self.loop
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def step(function: F) -> F:
    """Record a rule call as a program step, count it, and run the after-step checks.

    Use under ``@rule(...)``; arguments must be JSON values (tuples are recorded as lists).
    """
    name = function.__name__
    target = f"step:{name}"

    @functools.wraps(function)
    def recorded(self: ConformanceMachine, **kwargs: Any) -> Any:
        # Between steps no backend call is in flight: the one safe place to stop (_signals).
        try:
            _signals.check()
            self.context.check_budget()
        except BaseException:
            self.cut_short = True  # the program did not run to its end: no quiescence checks
            raise
        self.program.append(Step(name, {k: _json(v) for k, v in kwargs.items()}))
        stats = self.context.stats
        stats.steps += 1
        stats.rules[name] += 1
        self.context.reach(target)
        self.trace = []
        try:
            result = function(self, **kwargs)
            self.after_step()
        except Violation as violation:
            self._environment_check()
            violation.context.setdefault("at", f"step {len(self.program)}")
            self.record_failure(violation)
            raise
        except BaseException as exc:
            # Anything else (an environment error, a crash of the runtime under test) stopped the
            # step part-way, with the model perhaps moved ahead of the backend: the example did not
            # run to its end, so its end checks would judge half a step. The exception is the report.
            self.cut_short = True
            error = self._as_environment(exc)
            if isinstance(error, Exception):  # not a stop (budget, signal, peer) nor an outage
                self.context.start_shrink_clock()
                if self.context.step_error is None:
                    self.context.step_error = error
            if error is not exc:
                raise error from exc
            raise
        self._environment_check()
        progress = self.context.progress
        if progress is not None and stats.steps - self._last_progress >= 50:
            self._last_progress = stats.steps
            progress(self.context)
        return result  # a bundle rule's value (replay ignores it)

    recorded.ratchet_step = True  # type: ignore[attr-defined]
    return recorded  # type: ignore[return-value]


def step_names(machine: type[ConformanceMachine]) -> list[str]:
    """The names of the machine's recorded rules: the vocabulary of its programs."""
    return sorted(
        name for name in dir(machine) if getattr(getattr(machine, name, None), "ratchet_step", False)
    )


def _json(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    raise TypeError(f"rule arguments must be JSON values, got {type(value).__name__}")
