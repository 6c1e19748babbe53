"""nasaga's metrics as the S-OBS checks read them (docs/observability.md, docs/nasaga-findings.md).

The host answers ``read_metrics`` with nasaga's own three renderings, read back to back:
``saga_latency_snapshot()`` (non-cumulative buckets, micro-second sums), the text of
``SagaOperationalMetrics::render_prometheus`` (which appends ``render_saga_latency_metrics``) and
the operational snapshot's fields. ``observation`` turns them into a ``MetricsObservation``:

- ``exposition``: nasaga's text, as nasaga renders it;
- ``snapshot``: the structured latency snapshot and the operational fields flattened into samples
  under nasaga's own metric names, buckets made cumulative as the text spells them (S-OBS-05);
- ``baseline``: the process-wide samples when this example's namespace opened. The latency
  buckets and process counters are one per host process, and the host serves one example at a
  time, so the example's share is the growth since then (S-OBS-02, S-OBS-03);
- ``facts``: nasaga's database facts of this namespace in the model's fact samples, only those
  that mean the same on both sides (S-OBS-06; N-43 says which do not and why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conformance.saga._metrics_scrape import canonical_bound
from conformance.saga._port import MetricsObservation, sample_key
from model import saga as m

STAGE = m.STAGE_METRIC

#: nasaga's operational fields rendered as unlabelled counters (``name_total``) and gauges.
COUNTERS = (
    "started",
    "completed",
    "compensated",
    "manual_intervention",
    "manually_closed",
    "quota_rejections",
    "action_rate_rejections",
    "unknown_result",
    "retry_attempt",
    "conflict",
    "kafka_result_retry",
    "kafka_result_dlt_requested",
    "kafka_result_ack",
    "kafka_result_duplicate",
    "kafka_command_retry",
    "kafka_command_dlt_requested",
    "kafka_command_ack",
    "kafka_command_duplicate",
)
GAUGES = {
    "running": "running_current",
    "waiting_resolution": "waiting_resolution_current",
    "compensating": "compensating_current",
    "manual_intervention": "manual_intervention_current",
    "due_timer": "due_timer_current",
}
SUMMARIES = {
    "lifecycle_duration_seconds": ("lifecycle_duration_count", "lifecycle_duration_micros_sum"),
    "kafka_result_processing_duration_seconds": (
        "kafka_result_processing_total",
        "kafka_result_processing_micros_sum",
    ),
    "kafka_command_processing_duration_seconds": (
        "kafka_command_processing_total",
        "kafka_command_processing_micros_sum",
    ),
}
QUANTILES = {"0.5": "p50_micros", "0.95": "p95_micros", "0.99": "p99_micros"}
#: The operational facts nasaga has a name for, as the model's fact samples (S-OBS-06).
FACTS = {
    "running_current": sample_key("nasaga_instances", {"status": m.SagaStatus.RUNNING.value}),
    "waiting_resolution_current": sample_key("nasaga_instances", {"status": m.SagaStatus.RESOLVING.value}),
    "compensating_current": sample_key("nasaga_instances", {"status": m.SagaStatus.COMPENSATING.value}),
    "manual_intervention_current": sample_key(
        "nasaga_instances", {"status": m.SagaStatus.AWAITING_MANUAL_INTERVENTION.value}
    ),
    "completed_total": sample_key("nasaga_instances", {"status": m.SagaStatus.COMPLETED.value}),
    "compensated_total": sample_key("nasaga_instances", {"status": m.SagaStatus.COMPENSATED.value}),
    "retry_attempt_total": sample_key("nasaga_retry_attempts", {}),
}
#: nasaga's facts under a model name that means something else there (N-43): its conflicts are
#: attempt-outcome conflicts (``saga_conflict_fact``), not transitions a rejection caused; its
#: unknown results are attempts *still* UNKNOWN, not every UNKNOWN answer the journal recorded.


def latency_samples(read: Mapping[str, Any]) -> dict[str, float]:
    """The structured latency snapshot as text-format samples: cumulative buckets, seconds."""
    les = [*(canonical_bound(str(b)) for b in read["bounds"]), "+Inf"]
    out: dict[str, float] = {}
    for stage in read["latency"]:
        labels = {"stage": str(stage["stage"])}
        running = 0
        for le, n in zip(les, stage["buckets"], strict=True):
            running += int(n)
            out[sample_key(f"{STAGE}_bucket", {**labels, "le": le})] = running
        out[sample_key(f"{STAGE}_count", labels)] = int(stage["count"])
        out[sample_key(f"{STAGE}_sum", labels)] = int(stage["micros_sum"]) / 1_000_000
    return out


def operational_samples(fields: Mapping[str, Any]) -> dict[str, float]:
    """The operational snapshot's fields under the names ``render_prometheus`` gives them."""
    out: dict[str, float] = {}
    for name in COUNTERS:
        out[sample_key(f"nasaga_{name}_total", {})] = float(fields[f"{name}_total"])
    for name, field in GAUGES.items():
        out[sample_key(f"nasaga_{name}", {})] = float(fields[field])
    for name, (count, micros) in SUMMARIES.items():
        out[sample_key(f"nasaga_{name}_count", {})] = float(fields[count])
        out[sample_key(f"nasaga_{name}_sum", {})] = round(float(fields[micros]) / 1_000_000, 6)
    for q in fields["lifecycle_quantiles"]:
        for quantile, field in QUANTILES.items():
            labels = {
                "workflow": str(q["workflow"]),
                "definition_version": str(q["definition_version"]),
                "quantile": quantile,
            }
            out[sample_key("nasaga_lifecycle_duration_seconds", labels)] = float(q[field]) / 1_000_000
    return out


def process_samples(read: Mapping[str, Any]) -> dict[str, float]:
    """The process-wide part of a read (stage histogram, process counters): what a baseline holds."""
    fields = read["operational"]
    out = latency_samples(read)
    for name in (
        "quota_rejections",
        "action_rate_rejections",
        *(c for c in COUNTERS if c.startswith("kafka")),
    ):
        out[sample_key(f"nasaga_{name}_total", {})] = float(fields[f"{name}_total"])
    return out


def observation(read: Mapping[str, Any], baseline: Mapping[str, float]) -> MetricsObservation:
    fields = read["operational"]
    snapshot = {**operational_samples(fields), **latency_samples(read)}
    facts = {key: float(fields[field]) for field, key in FACTS.items()}
    return MetricsObservation(str(read["exposition"]), snapshot, baseline=baseline, facts=facts)
