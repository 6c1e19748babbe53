"""The timer-lateness histogram against the fires the harness made (S-OBS-03).

A fire whose fence held observes its lateness once (``model.saga.fire_lateness``). One fire is
unsure: the database refused the last transaction of the call (a serialization failure, a
deadlock, a lock timeout; the storage port's ``TransactionLog``), the runtime answered
``RolledBack``, and whether that attempt had got past the fence before the refusal — a refused
COMMIT comes after it, a refused lock or read before — is not something the storage port shows.
Such a fire may be in the histogram or not, and nothing else may: the exposed count, every
bucket and the sum must be those of the sure fires plus some of the unsure ones. This is the
same allowance as the handler's retried attempts (``_metrics_checks.Ledger.handler_retries``).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from conformance._violations import JsonValue, Violation
from conformance.saga._port import sample_key
from model import saga as m

BUCKET = f"{m.STAGE_METRIC}_bucket"
COUNT = f"{m.STAGE_METRIC}_count"
SUM = f"{m.STAGE_METRIC}_sum"
LE = [*(repr(b) for b in m.STAGE_BUCKETS), "+Inf"]  # as the text format spells bounds
LABELS = {"stage": m.Stage.TIMER_LATENESS.value}
#: Subsets of the unsure fires tried at most; past it only the count is compared (never reached
#: in practice: an unsure fire needs every attempt of its unit refused).
MAX_SUBSETS = 4096


def expected_samples(fires: Sequence[float]) -> dict[str, float]:
    """The count and cumulative buckets that exactly ``fires`` observe."""
    buckets = Counter(m.bucket_of(late) for late in fires)
    expected = {sample_key(COUNT, LABELS): float(len(fires))}
    running = 0
    for index, le in enumerate(LE):
        running += buckets[index]
        expected[sample_key(BUCKET, {**LABELS, "le": le})] = running
    return expected


def _matches(fires: Sequence[float], samples: Mapping[str, float]) -> bool:
    expected = expected_samples(fires)
    if any(samples.get(k, 0) != v for k, v in expected.items()):
        return False
    total = samples.get(sample_key(SUM, LABELS), 0)
    return math.isclose(total, math.fsum(fires), rel_tol=1e-9, abs_tol=1e-9)


def _explained(sure: Sequence[float], unsure: Sequence[float], samples: Mapping[str, float]) -> bool:
    """Whether the exposed histogram is ``sure`` plus some of ``unsure``."""
    if not unsure:
        return _matches(sure, samples)
    extra = int(samples.get(sample_key(COUNT, LABELS), 0)) - len(sure)
    if not 0 <= extra <= len(unsure):
        return False
    if math.comb(len(unsure), extra) > MAX_SUBSETS:
        return True
    return any(_matches([*sure, *chosen], samples) for chosen in itertools.combinations(unsure, extra))


def check_lateness(sure: Sequence[float], unsure: Sequence[float], samples: Mapping[str, float]) -> None:
    """S-OBS-03: the histogram shows every sure fire and at most the unsure ones, nothing else."""
    if _explained(sure, unsure, samples):
        return
    expected = expected_samples(sure)
    differ = sorted(k for k, v in expected.items() if samples.get(k, 0) != v)
    maybe = f" (and up to {len(unsure)} the database refused: {list(unsure)})" if unsure else ""
    if differ or unsure:
        shown: list[JsonValue] = [
            f"{k}: expected {expected[k]:g}{maybe}, exposed {samples.get(k, 0):g}" for k in differ
        ]
        raise Violation(
            "S-OBS-03",
            "timer lateness differs from the fires that passed their fence",
            {"samples": shown[:12] or [f"no subset of the refused fires explains the histogram{maybe}"]},
        )
    raise Violation(
        "S-OBS-03",
        "timer lateness sum differs from the fires' own lateness",
        {"expected": math.fsum(sure), "exposed": samples.get(sample_key(SUM, LABELS), 0)},
    )
