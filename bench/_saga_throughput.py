"""Saga harness throughput: stateful steps per second of the ``saga`` suite per saga backend.

Each run is a real conformance run of the ``saga`` suite (``conformance._runner.run_suite``: the
orchestrator, both participants and the timer workers beside the model, faults and after-step
checks as in ``conformance run --suite saga``), on a backend whose every namespace sits behind the
saga timing seam (``_saga_seam``). Steps per second is the runner's own figure. The backend share
is the seam's port time (every port call, opening and closing included) over the run's wall time;
the rest is Hypothesis, the harness and the model. The in-transaction share adds the runtime's own
work done while a transaction was open. The harness's after-step checks read the backend raw
through the same port, so their reads count as backend time, as the commit side's observer does.

As on the commit side (``_throughput``): no coverage gate, no failure files, no example database;
each run's verdict is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import attrs

from bench._figures import Spread
from bench._saga_seam import SagaMeters
from bench._throughput import bench_run, run_share
from conformance._suites import BackendUnderTest
from conformance.backends import SagaBackendSpec, load_object
from impls.saga import SagaBackendFactory

SAGA_SUITE = "saga"


@attrs.frozen
class SagaThroughputRun:
    steps: int
    examples: int
    elapsed_s: float
    steps_per_second: float
    port_seconds: float  # busy time inside the SagaBackend port (the seam), opening included
    transaction_seconds: float  # time with a transaction open (port calls + runtime work between)
    transactions: int  # begins through the seam
    harness_backend_seconds: float  # the harness's own count (its TimedBackend), for comparison
    verdict: str
    detail: str | None  # the rule broken or the error, when the verdict is not "pass"


@attrs.frozen
class SagaThroughput:
    backend: str
    suite: str
    steps_per_second: Spread
    backend_share: Spread  # port seconds / wall seconds, 0..1
    transaction_share: Spread  # transaction-open seconds / wall seconds
    harness_share: Spread  # 1 - backend_share: Hypothesis, harness and model
    transactions_per_step: Spread
    examples_per_run: Spread
    steps_per_run: Spread
    verdicts: tuple[str, ...]
    runs: tuple[SagaThroughputRun, ...]


def saga_factory(spec: SagaBackendSpec) -> SagaBackendFactory:
    return cast(SagaBackendFactory, load_object(spec.factory))


def metered_saga_backend(spec: SagaBackendSpec, meters: SagaMeters) -> BackendUnderTest:
    return BackendUnderTest(
        spec.name, "saga", {"backend": meters.metered_factory(saga_factory(spec))}, spec.service
    )


def run_once(
    spec: SagaBackendSpec, *, examples: int | None, steps: int | None, seed: int
) -> SagaThroughputRun:
    meters = SagaMeters()
    backend = (
        # A runtime that brings its own storage (the nasaga host) has no SagaBackend port to meter.
        BackendUnderTest(spec.name, "saga", {"runtime": spec.factory}, spec.service)
        if spec.role == "runtime"
        else metered_saga_backend(spec, meters)
    )
    result, detail = bench_run(SAGA_SUITE, backend, examples=examples, steps=steps, seed=seed)
    return SagaThroughputRun(
        steps=result.stats.steps,
        examples=result.stats.examples,
        elapsed_s=result.elapsed_s,
        steps_per_second=result.steps_per_second,
        port_seconds=meters.port_seconds,
        transaction_seconds=meters.transaction_seconds,
        transactions=meters.calls["begin"],
        harness_backend_seconds=result.stats.backend_seconds,
        verdict=result.verdict.value,
        detail=detail,
    )


def measure(
    spec: SagaBackendSpec,
    *,
    runs: int,
    examples: int | None,
    steps: int | None,
    seed: int,
    progress: Callable[[str], None],
) -> SagaThroughput:
    """``runs`` runs with seeds ``seed``, ``seed + 1``, ...: the same programs on every backend."""
    done: list[SagaThroughputRun] = []
    for index in range(runs):
        run = run_once(spec, examples=examples, steps=steps, seed=seed + index)
        done.append(run)
        progress(
            f"throughput {spec.name}/{SAGA_SUITE} run {index + 1}/{runs}: {run.steps_per_second:.0f} steps/s "
            f"({run.steps} steps, {run.elapsed_s:.1f}s, {run.verdict})"
        )

    def share(seconds: Callable[[SagaThroughputRun], float]) -> Spread:
        return Spread.of([run_share(seconds(r), r.elapsed_s) for r in done])

    backend_share = share(lambda r: r.port_seconds)
    return SagaThroughput(
        backend=spec.name,
        suite=SAGA_SUITE,
        steps_per_second=Spread.of([r.steps_per_second for r in done]),
        backend_share=backend_share,
        transaction_share=share(lambda r: r.transaction_seconds),
        harness_share=Spread.of([1.0 - s for s in backend_share.samples]),
        transactions_per_step=Spread.of([r.transactions / r.steps if r.steps else 0.0 for r in done]),
        examples_per_run=Spread.of([r.examples for r in done]),
        steps_per_run=Spread.of([r.steps for r in done]),
        verdicts=tuple(r.verdict for r in done),
        runs=tuple(done),
    )


def warm_up(spec: SagaBackendSpec, seed: int) -> None:
    """One tiny run first, so connecting and creating the shared tables is not measured."""
    run_once(spec, examples=2, steps=5, seed=seed)
