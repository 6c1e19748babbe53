"""One suite's examples split across processes (``--workers N``) and machines (``--shard I/N``).

Theory of operation
-------------------
Steps per second in one process are at Hypothesis's own ceiling, so more throughput comes from
more processes. A suite's examples are cut into ``parts = workers x shards`` shares, decided by
the numbers alone (so every machine of a CI matrix cuts them the same way): share ``k`` runs
``examples // parts`` examples (one more for the first ``examples % parts``) under the seed
``part_seed(seed, k, parts)`` (the run's seed itself when there is one share, so a one-process run
is unchanged). Machine ``I`` of ``N`` runs shares ``(I-1)*workers`` .. ``I*workers - 1``.

Each share is a ``run_suite`` in a process of its own (``multiprocessing``, forked where the
platform allows: a worker starts in milliseconds instead of re-importing the harness), with its own
namespaces (a namespace carries the process id) and its own example database shard
(``<database>/worker-<k>``, written by that share alone; the main database and the other shards
are read too, so a failure any share saved is retried first by all). The parent merges the shares'
results into the suite's one result (``conformance._merge``): one summary row, JSON, JUnit and
coverage gate over the union.

The workers share three small pieces of state with the parent:

- ``winner``: the first worker that records a violation claims it; every other worker stops at its
  next step (``StoppedByPeer``) and shrinks nothing, so the violation is shrunk once, by its finder.
- ``interrupt``: the workers ignore SIGINT and SIGTERM themselves (a terminal's Ctrl-C reaches the
  whole process group, and a second signal would force a worker out without its result); the
  parent's guard records the signal, and the parent hands it on through this event. A thread in
  each worker turns it into the worker's own pending signal (``_signals.deliver``), so it stops at
  the next step boundary with an ``interrupted`` result, as a single process would. A worker still
  running shortly before the parent's one-second deadline is killed.
- ``counters``: examples and steps per worker, for the parent's live progress line.

The parent freezes its objects for the fork (``gc.freeze``, undone once the workers started): a
worker's collections then skip what it inherited instead of walking it and copying its pages.
Forking copies the parent's process-wide caches but not their threads: the modules that keep
connections or proxies per process (``conformance/wire/_routes.py``, ``impls/sql/_server.py``,
``impls/cql/_session.py``) forget them in a forked child (``os.register_at_fork``), which opens its
own.

Why ``multiprocessing`` and not ``concurrent.futures.ProcessPoolExecutor``: the parent must reach
each worker (their process ids, to kill one stuck past the deadline) and share the claim and the
event with them while they run; a pool hides its processes and would reuse them across suites.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import queue
import random
import signal
import sys
import threading
import time
import traceback
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import attrs

from conformance import _signals
from conformance._journal import Journal
from conformance._machine import RunContext, StoppedByPeer, SuiteStats
from conformance._merge import merge_results
from conformance._progress import Progress
from conformance._report import SuiteResult, Verdict
from conformance._runner import RunOptions, planned_examples, run_suite
from conformance._settings import PROFILES
from conformance._suites import BackendUnderTest, Suite

#: After a signal the parent waits this long for the workers' results, then kills what is left;
#: the guard's own forced stop comes at ``_signals.GRACE_S``.
SIGNAL_WAIT_S = 0.3
POLL_S = 0.05


def auto_workers() -> int:
    """``--workers auto``: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@attrs.frozen
class Split:
    """How a suite's examples are shared: ``workers`` processes here, machine ``shard`` (1-based)
    of ``shards``."""

    workers: int = 1
    shard: int = 1
    shards: int = 1

    def __attrs_post_init__(self) -> None:
        if self.workers < 1 or self.shards < 1 or not 1 <= self.shard <= self.shards:
            raise ValueError(f"a bad split: {self.workers} workers, shard {self.shard}/{self.shards}")

    @property
    def parts(self) -> int:
        return self.workers * self.shards

    @property
    def mine(self) -> range:
        """The shares this machine runs."""
        first = (self.shard - 1) * self.workers
        return range(first, first + self.workers)


def part_seed(seed: int, index: int, parts: int) -> int:
    """Share ``index``'s seed: the run's own for a single share, else one derived from it."""
    if parts == 1:
        return seed
    digest = hashlib.blake2b(f"ratchet/{seed}/{index}/{parts}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def part_examples(total: int, index: int, parts: int) -> int:
    return max(1, total // parts + (1 if index < total % parts else 0))


def part_options(
    options: RunOptions, suite: Suite, backend: BackendUnderTest, split: Split, index: int, seed: int
) -> RunOptions:
    """The options of share ``index``: its seed, its examples, its database shard."""
    if split.parts == 1:
        return attrs.evolve(options, seed=seed)
    total = planned_examples(suite, backend, options) or PROFILES[options.profile].max_examples
    database = options.database_dir
    read_also: tuple[Path, ...] = ()
    if database is not None:
        own = database / f"worker-{index}"
        read_also = (database, *sorted(p for p in database.glob("worker-*") if p != own and p.is_dir()))
        database = own
    return attrs.evolve(
        options,
        seed=part_seed(seed, index, split.parts),
        examples=part_examples(total, index, split.parts),
        database_dir=database,
        database_read_also=read_also,
    )


@attrs.define
class SplitRunner:
    """A ``run_matrix`` suite runner (``run_one``) that runs this machine's shares of a suite."""

    split: Split

    def __call__(
        self,
        suite: Suite,
        backend: BackendUnderTest,
        options: RunOptions,
        progress: Progress | None,
        journal: Journal | None,
    ) -> SuiteResult:
        seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
        if self.split.workers == 1:
            (index,) = self.split.mine
            own = part_options(options, suite, backend, self.split, index, seed)
            result = run_suite(suite, backend, own, progress, journal)
            return attrs.evolve(result, seed=seed)
        return _Pool(self.split, suite, backend, options, seed, progress, journal).run()


class _Pool:
    """The workers of one suite on this machine, and their merged result."""

    def __init__(
        self,
        split: Split,
        suite: Suite,
        backend: BackendUnderTest,
        options: RunOptions,
        seed: int,
        progress: Progress | None,
        journal: Journal | None,
    ) -> None:
        self.split, self.suite, self.backend, self.options, self.seed = split, suite, backend, options, seed
        self.progress, self.journal = progress, journal
        self.results: dict[int, SuiteResult] = {}
        self.started = time.perf_counter()
        self.mp: Any = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        self.channel: Any = self.mp.Queue()
        self.interrupt: Any = self.mp.Event()
        self.signum: Any = self.mp.Value("i", 0)
        self.winner: Any = self.mp.Value("i", -1)
        self.counters: Any = self.mp.Array("q", 2 * split.workers, lock=False)
        self.view = RunContext(suite.name, backend.name, None, profile=options.profile)

    def run(self) -> SuiteResult:
        self.view.target_examples = 0
        processes: dict[int, BaseProcess] = {}
        for slot, index in enumerate(self.split.mine):
            own = part_options(self.options, self.suite, self.backend, self.split, index, self.seed)
            self.view.target_examples += own.examples or 0
            processes[slot] = self.mp.Process(
                target=_worker,
                args=(slot, self.suite, self.backend, own, self._shared()),
                name=f"ratchet-worker-{index}",
                daemon=True,
            )
        if self.journal is not None:
            self.journal.running = self._interrupted
        # Import the suite's machine (and what it pulls in) once, before the fork: a worker then
        # starts its first example at once, and sees a signal at its first step.
        self.suite.machine()
        try:
            # What the parent holds is frozen for the fork: a worker's full collections then never
            # walk (and write to, copying the pages) the objects it inherited. Measured on the same
            # programs (memory, commit, 200 examples, seed 0): each worker's collections took 0.39 s
            # of CPU without, 0.19 s with (0.59 s for both shares in one process): issue 19.
            gc.freeze()
            try:
                for process in processes.values():
                    process.start()
            finally:
                gc.unfreeze()
            self._collect(processes)
        finally:
            for process in processes.values():
                if process.is_alive():
                    process.kill()
            for process in processes.values():
                process.join(timeout=1.0)
        if _signals.pending() is not None:
            return self._interrupted()
        return self._merged(list(self.results.values()))

    def _shared(self) -> _Shared:
        return _Shared(self.channel, self.interrupt, self.signum, self.winner, self.counters, os.getpid())

    def _collect(self, processes: dict[int, BaseProcess]) -> None:
        dead_since: dict[int, float] = {}
        while len(self.results) < len(processes):
            try:
                slot, result = self.channel.get(timeout=POLL_S)
                self.results[slot] = result
                continue
            except queue.Empty:
                pass
            signum = _signals.pending()
            if signum is not None:
                if not self.interrupt.is_set():
                    self.signum.value = signum
                    self.interrupt.set()
                received = _signals.received_at() or time.monotonic()
                if time.monotonic() - received > SIGNAL_WAIT_S:
                    return  # the rest are killed; their shares are interrupted
            now = time.monotonic()
            for slot, process in processes.items():
                if slot in self.results or process.is_alive():
                    continue
                if now - dead_since.setdefault(slot, now) > 0.5:  # its result would have arrived
                    self.results[slot] = self._lost(slot, process.exitcode)
            if self.progress is not None:
                self.view.stats.examples = sum(self.counters[0::2])
                self.view.stats.steps = sum(self.counters[1::2])
                self.progress(self.view)

    def _lost(self, slot: int, code: int | None) -> SuiteResult:
        return SuiteResult(
            self.backend.name,
            self.suite.name,
            Verdict.ERROR,
            SuiteStats(),
            time.perf_counter() - self.started,
            self.seed,
            error=f"worker {slot + 1} of {self.split.workers} ended (exit code {code}) without a result",
        )

    def _merged(self, parts: list[SuiteResult]) -> SuiteResult:
        return merge_results(
            parts, elapsed_s=time.perf_counter() - self.started, seed=self.seed, workers=self.split.workers
        )

    def _interrupted(self) -> SuiteResult:
        """What is known after a signal: the shares that reported, the others interrupted."""
        parts = list(self.results.values())
        for slot in range(self.split.workers):
            if slot not in self.results:
                stats = SuiteStats(examples=self.counters[2 * slot], steps=self.counters[2 * slot + 1])
                parts.append(
                    SuiteResult(self.backend.name, self.suite.name, Verdict.INTERRUPTED, stats, 0.0, None)
                )
        return self._merged(parts)


@attrs.frozen
class _Shared:
    channel: Any
    interrupt: Any
    signum: Any
    winner: Any
    counters: Any
    parent: int


def _worker(slot: int, suite: Suite, backend: BackendUnderTest, options: RunOptions, shared: _Shared) -> None:
    """A worker process: one share of the suite; its result goes to the parent."""
    for signum in _signals.HANDLED:
        signal.signal(signum, signal.SIG_IGN)  # the parent hands signals on (see the module doc)
    threading.Thread(target=_watch_parent, args=(shared,), name="ratchet-parent", daemon=True).start()

    def claim() -> None:
        with shared.winner.get_lock():
            if shared.winner.value == -1:
                shared.winner.value = slot

    def peer_check() -> None:
        if shared.winner.value not in (-1, slot):
            raise StoppedByPeer()

    def count(context: RunContext) -> None:
        shared.counters[2 * slot] = context.stats.examples
        shared.counters[2 * slot + 1] = context.stats.steps

    def wire(context: RunContext) -> None:
        context.progress, context.peer_check, context.on_failure = count, peer_check, claim

    try:
        result = run_suite(suite, backend, options, None, None, context_hook=wire)
    except BaseException as exc:  # a crash of the harness itself: the parent reports it, no verdict
        text = "".join(traceback.format_exception(exc)[-6:])
        result = SuiteResult(
            backend.name,
            suite.name,
            Verdict.ERROR,
            SuiteStats(),
            0.0,
            options.seed,
            error=f"worker {slot + 1}: the harness failed: {exc!r}\n{text}",
        )
    shared.channel.put((slot, result))
    shared.channel.close()
    shared.channel.join_thread()


def _watch_parent(shared: _Shared) -> None:
    """Turn the parent's signal into this worker's own; a parent gone is a SIGTERM."""
    while True:
        if shared.interrupt.wait(0.1):
            _signals.deliver(shared.signum.value or signal.SIGINT)
            return
        if os.getppid() != shared.parent:
            _signals.deliver(signal.SIGTERM)
            return


def parse_split(workers: str | int, shard: str | None) -> Split:
    """``--workers N|auto`` and ``--shard I/N`` as a ``Split``; ``ValueError`` says what is wrong."""
    if workers == "auto":
        count = auto_workers()
    else:
        try:
            count = int(workers)
        except ValueError:
            raise ValueError(f"--workers {workers!r}: a positive number or auto") from None
        if count < 1:
            raise ValueError(f"--workers {workers}: a positive number or auto")
    index, total = 1, 1
    if shard is not None:
        first, slash, second = shard.partition("/")
        try:
            index, total = int(first), int(second)
        except ValueError:
            raise ValueError(f"--shard {shard!r}: I/N, as 2/4 (the second of four machines)") from None
        if not slash or total < 1 or not 1 <= index <= total:
            raise ValueError(f"--shard {shard!r}: I/N with 1 <= I <= N, as 2/4")
    return Split(count, index, total)
