//! Observability read-backs: nasaga's own metrics APIs, nothing computed here (docs/observability.md).
//!
//! `read_metrics {namespace, now_ms}` answers, read back to back with no other op between them:
//! - `latency`: `saga_latency_snapshot()` (five stages, non-cumulative buckets, micros sums);
//! - `exposition`: `Orchestrator::load_operational_metrics(now_ms).render_prometheus()`, the text
//!   nasaga serves (its database facts for this namespace, its process counters and the stage
//!   histogram, which that render appends from the same buckets);
//! - `operational`: the same `SagaOperationalMetrics` snapshot as fields;
//! - `latency_text`: `render_saga_latency_metrics()` on its own.
//!
//! The latency buckets and process counters are process-wide: the harness reads them before and
//! after an example and compares the growth, the host serving one example at a time.

use nasaga_runtime_core::{
    render_saga_latency_metrics, saga_latency_snapshot, SagaOperationalMetrics,
    SAGA_LATENCY_BUCKETS,
};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::Args;

fn operational(metrics: &SagaOperationalMetrics) -> Value {
    json!({
        "started_total": metrics.started_total,
        "completed_total": metrics.completed_total,
        "compensated_total": metrics.compensated_total,
        "manual_intervention_total": metrics.manual_intervention_total,
        "manually_closed_total": metrics.manually_closed_total,
        "quota_rejections_total": metrics.quota_rejections_total,
        "action_rate_rejections_total": metrics.action_rate_rejections_total,
        "unknown_result_total": metrics.unknown_result_total,
        "retry_attempt_total": metrics.retry_attempt_total,
        "conflict_total": metrics.conflict_total,
        "running_current": metrics.running_current,
        "waiting_resolution_current": metrics.waiting_resolution_current,
        "compensating_current": metrics.compensating_current,
        "manual_intervention_current": metrics.manual_intervention_current,
        "due_timer_current": metrics.due_timer_current,
        "lifecycle_duration_count": metrics.lifecycle_duration_count,
        "lifecycle_duration_micros_sum": metrics.lifecycle_duration_micros_sum,
        "lifecycle_quantiles": metrics.lifecycle_quantiles.iter().map(|q| json!({
            "workflow": q.workflow,
            "definition_version": q.definition_version,
            "sample_count": q.sample_count,
            "p50_micros": q.p50_micros,
            "p95_micros": q.p95_micros,
            "p99_micros": q.p99_micros,
        })).collect::<Vec<_>>(),
        "kafka_result_processing_total": metrics.kafka_result_processing_total,
        "kafka_result_processing_micros_sum": metrics.kafka_result_processing_micros_sum,
        "kafka_result_retry_total": metrics.kafka_result_retry_total,
        "kafka_result_dlt_requested_total": metrics.kafka_result_dlt_requested_total,
        "kafka_result_ack_total": metrics.kafka_result_ack_total,
        "kafka_result_duplicate_total": metrics.kafka_result_duplicate_total,
        "kafka_command_processing_total": metrics.kafka_command_processing_total,
        "kafka_command_processing_micros_sum": metrics.kafka_command_processing_micros_sum,
        "kafka_command_retry_total": metrics.kafka_command_retry_total,
        "kafka_command_dlt_requested_total": metrics.kafka_command_dlt_requested_total,
        "kafka_command_ack_total": metrics.kafka_command_ack_total,
        "kafka_command_duplicate_total": metrics.kafka_command_duplicate_total,
    })
}

impl<E: Engine> Host<E> {
    /// `read_metrics {namespace, now_ms}`: see the module doc.
    pub async fn read_metrics(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let now_ms = args.i64("now_ms")?;
        let metrics = namespace
            .orchestrator
            .load_operational_metrics(now_ms)
            .await?;
        let latency = saga_latency_snapshot();
        let exposition = metrics.render_prometheus();
        let latency_text = render_saga_latency_metrics();
        Ok(json!({
            "bounds": SAGA_LATENCY_BUCKETS,
            "latency": latency.iter().map(|s| json!({
                "stage": s.stage,
                "count": s.count,
                "micros_sum": s.micros_sum,
                "buckets": s.buckets,
            })).collect::<Vec<_>>(),
            "exposition": exposition,
            "latency_text": latency_text,
            "operational": operational(&metrics),
        }))
    }
}
