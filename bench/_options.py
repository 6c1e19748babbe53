"""What one bench run measures: backends, sections and sizes."""

from __future__ import annotations

import attrs

from conformance.backends import COMMIT_BACKENDS, SAGA_BACKENDS

ALL_BACKENDS = tuple(dict.fromkeys((*COMMIT_BACKENDS, *SAGA_BACKENDS)))  # + sqlite, postgres, mysql
COMMIT_SUITES = ("store", "commit")
# The default leaves the saga side out: with it, a --quick run took 121 s on this 2-core machine
# under a load average of 5 (commit side 47 s, saga side 75 s), over the two minutes a quick run is
# meant to take.
SUITES = COMMIT_SUITES


@attrs.frozen
class BenchOptions:
    """Sizes of one bench run: ``preset(quick=True)`` fits in two minutes; the default is the docs' run."""

    backends: tuple[str, ...] = ALL_BACKENDS
    suites: tuple[str, ...] = SUITES
    runs: int = 5
    examples: int | None = None  # per throughput run; None: the ci profile's
    steps: int | None = None  # per example, at most; None: the ci profile's
    cost_repeats: int = 10  # commits measured per commit-cost case
    rate_seconds: float = 2.0  # per commit-rate (and floor-probe) run
    seed: int = 0  # throughput run i uses seed + i: the same programs on every backend
    quick: bool = False

    @classmethod
    def preset(cls, *, quick: bool) -> BenchOptions:
        """``quick``: 3 runs of short programs, half-second rate runs; else 5 runs of the ci profile."""
        if quick:
            return cls(runs=3, examples=15, cost_repeats=3, rate_seconds=0.5, quick=True)
        return cls()
