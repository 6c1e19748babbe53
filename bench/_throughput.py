"""Harness throughput: stateful steps per second of each suite on each backend, model check on.

Each run is a real conformance run (``conformance._runner.run_suite``: the same machines, faults,
oracle and after-step checks as ``conformance run``), on a backend whose store and outbox sit
behind the timing seam (``_seam``). Steps per second is the runner's own figure: steps over the
run's wall time, which includes opening a backend per example and the quiescence checks at the
end of each example. The backend share is the seam's busy time over the same wall time; the rest
is Hypothesis, the harness and the model.

The coverage gate is off (short runs need not reach every target) and no failure files or example
database are written; a run's verdict is still reported, since a run that found a violation spent
time shrinking it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from bench._figures import Spread
from bench._seam import Meters
from conformance._report import SuiteResult
from conformance._runner import RunOptions, run_suite
from conformance._suites import BackendUnderTest, suite_named
from conformance.backends import BackendSpec, outbox_factory, store_factory


@attrs.frozen
class ThroughputRun:
    steps: int
    examples: int
    elapsed_s: float
    steps_per_second: float
    store_seconds: float  # busy time inside the real store (the seam)
    outbox_seconds: float  # busy time inside the real outbox (the seam)
    harness_backend_seconds: float  # the harness's own count (store calls it judged), for comparison
    verdict: str
    detail: str | None  # the rule broken or the error, when the verdict is not "pass"


@attrs.frozen
class Throughput:
    backend: str
    suite: str
    steps_per_second: Spread
    backend_share: Spread  # (store + outbox) seconds / wall seconds, 0..1
    store_share: Spread
    outbox_share: Spread
    harness_share: Spread  # 1 - backend_share: Hypothesis, harness and model
    examples_per_run: Spread
    steps_per_run: Spread
    verdicts: tuple[str, ...]
    runs: tuple[ThroughputRun, ...]


def metered_backend(spec: BackendSpec, meters: Meters) -> BackendUnderTest:
    store, outbox = meters.metered_factories(store_factory(spec), outbox_factory(spec))
    return BackendUnderTest(spec.name, "commit", {"store": store, "outbox": outbox}, spec.service)


def bench_run(
    suite: str, backend: BackendUnderTest, *, examples: int | None, steps: int | None, seed: int
) -> tuple[SuiteResult, str | None]:
    """One conformance run as the bench makes it (``ci`` sizes, no coverage gate, nothing written),
    and what broke or failed when its verdict is not "pass". The saga side runs through it too."""
    options = RunOptions(
        profile="ci",
        examples=examples,
        steps=steps,
        seed=seed,
        failure_dir=None,
        database_dir=None,
        coverage_gate=False,
    )
    result = run_suite(suite_named(suite), backend, options)
    detail = result.error
    if result.failure is not None:
        detail = f"{result.failure.rule_id}: {result.failure.message}"
    return result, detail


def run_share(seconds: float, elapsed_s: float) -> float:
    """A part of a run's wall time, 0..1 (0 for a run that took no time)."""
    return seconds / elapsed_s if elapsed_s > 0 else 0.0


def run_once(
    spec: BackendSpec, suite: str, *, examples: int | None, steps: int | None, seed: int
) -> ThroughputRun:
    meters = Meters()
    result, detail = bench_run(
        suite, metered_backend(spec, meters), examples=examples, steps=steps, seed=seed
    )
    return ThroughputRun(
        steps=result.stats.steps,
        examples=result.stats.examples,
        elapsed_s=result.elapsed_s,
        steps_per_second=result.steps_per_second,
        store_seconds=meters.store.seconds,
        outbox_seconds=meters.outbox.seconds,
        harness_backend_seconds=result.stats.backend_seconds,
        verdict=result.verdict.value,
        detail=detail,
    )


def measure(
    spec: BackendSpec,
    suite: str,
    *,
    runs: int,
    examples: int | None,
    steps: int | None,
    seed: int,
    progress: Callable[[str], None],
) -> Throughput:
    """``runs`` runs with seeds ``seed``, ``seed + 1``, ...: the same programs on every backend."""
    done: list[ThroughputRun] = []
    for index in range(runs):
        run = run_once(spec, suite, examples=examples, steps=steps, seed=seed + index)
        done.append(run)
        progress(
            f"throughput {spec.name}/{suite} run {index + 1}/{runs}: {run.steps_per_second:.0f} steps/s "
            f"({run.steps} steps, {run.elapsed_s:.1f}s, {run.verdict})"
        )

    def share(seconds: Callable[[ThroughputRun], float]) -> Spread:
        return Spread.of([run_share(seconds(r), r.elapsed_s) for r in done])

    backend_share = share(lambda r: r.store_seconds + r.outbox_seconds)
    return Throughput(
        backend=spec.name,
        suite=suite,
        steps_per_second=Spread.of([r.steps_per_second for r in done]),
        backend_share=backend_share,
        store_share=share(lambda r: r.store_seconds),
        outbox_share=share(lambda r: r.outbox_seconds),
        harness_share=Spread.of([1.0 - s for s in backend_share.samples]),
        examples_per_run=Spread.of([r.examples for r in done]),
        steps_per_run=Spread.of([r.steps for r in done]),
        verdicts=tuple(r.verdict for r in done),
        runs=tuple(done),
    )


def warm_up(spec: BackendSpec, suite: str, seed: int) -> None:
    """One tiny run first, so connecting, loading scripts and preparing statements is not measured."""
    run_once(spec, suite, examples=2, steps=5, seed=seed)
