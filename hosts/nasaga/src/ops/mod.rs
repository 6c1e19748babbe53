//! The op table: one request name, one method on `Host`.

mod catalog;
mod manage;
mod read;
mod saga;
mod timers;

use serde_json::{json, Value};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{Args, HostError};

/// Every op the host answers, in the order docs/nasaga.md lists them.
pub const OPS: &[&str] = &[
    "hello",
    "stats",
    "shutdown",
    "open_namespace",
    "close_namespace",
    "schema_steps",
    "register_definition",
    "publish_definition",
    "register_capability",
    "activate_definition",
    "deprecate_definition",
    "retire_definition",
    "load_definition",
    "load_dynamic_catalog",
    "refresh_registry",
    "select_capability_routes",
    "verify_startup",
    "start_saga",
    "read_outbox",
    "dispatch_outbox",
    "deliver_command",
    "deliver_result",
    "claim_due_timers",
    "fire_timer",
    "release_timer",
    "drop_claim",
    "run_due_timers",
    "manage",
    "load_instance",
    "load_steps",
    "load_attempts",
    "load_audit_trail",
    "load_audit_page",
    "list_instances",
    "tenant_quota_usage",
    "reconcile_tenant_quota",
    "read_timers",
    "read_inbox",
    "read_gates",
    "read_effects",
    // observability and transports (metrics.rs, transport.rs, grpc.rs)
    "read_metrics",
    "stream_open",
    "stream_dispatch",
    "stream_poll",
    "stream_trim",
    "stream_backlog",
    "stream_close",
    "grpc_open",
    "grpc_decide",
    "grpc_calls",
    "grpc_close",
    "kafka_open",
    "kafka_dispatch",
    "kafka_journal",
    "kafka_wait",
    "kafka_join",
    "kafka_release",
    "kafka_leave",
    "kafka_close",
    // crash points (src/faults.rs)
    "arm_crash_point",
    "disarm_crash_point",
];

impl<E: Engine> Host<E> {
    pub async fn dispatch(&mut self, op: &str, args: &Args<'_>) -> anyhow::Result<Value> {
        match op {
            "hello" => self.hello().await,
            "stats" => Ok(self.stats()),
            "shutdown" => {
                self.close_all().await;
                Ok(json!({"closed": true}))
            }
            "open_namespace" => self.open_namespace(args).await,
            "close_namespace" => self.close_namespace(args).await,
            "schema_steps" => self.schema_steps(args).await,
            "register_definition" => self.register_definition(args),
            "publish_definition" => self.publish_definition(args).await,
            "register_capability" => self.register_capability(args).await,
            "activate_definition" => self.activate_definition(args).await,
            "deprecate_definition" => self.deprecate_definition(args).await,
            "retire_definition" => self.retire_definition(args).await,
            "load_definition" => self.load_definition(args).await,
            "load_dynamic_catalog" => self.load_dynamic_catalog(args).await,
            "refresh_registry" => self.refresh_registry(args).await,
            "select_capability_routes" => self.select_routes(args).await,
            "verify_startup" => self.verify_startup(args).await,
            "start_saga" => self.start_saga(args).await,
            "read_outbox" => self.read_outbox(args).await,
            "dispatch_outbox" => self.dispatch_outbox(args).await,
            "deliver_command" => self.deliver_command(args).await,
            "deliver_result" => self.deliver_result(args).await,
            "claim_due_timers" => self.claim_due_timers(args).await,
            "fire_timer" => self.fire_timer(args).await,
            "release_timer" => self.release_timer(args).await,
            "drop_claim" => self.drop_claim(args),
            "run_due_timers" => self.run_due_timers(args).await,
            "manage" => self.manage(args).await,
            "load_instance" => self.load_instance(args).await,
            "load_steps" => self.load_steps(args).await,
            "load_attempts" => self.load_attempts(args).await,
            "load_audit_trail" => self.load_audit_trail(args).await,
            "load_audit_page" => self.load_audit_page(args).await,
            "list_instances" => self.list_instances(args).await,
            "tenant_quota_usage" => self.tenant_quota_usage(args).await,
            "reconcile_tenant_quota" => self.reconcile_tenant_quota(args).await,
            "read_timers" => self.read_timers(args).await,
            "read_inbox" => self.read_inbox(args).await,
            "read_gates" => self.read_gates(args).await,
            "read_effects" => self.read_effects(args).await,
            "read_metrics" => self.read_metrics(args).await,
            "stream_open" => self.stream_open(args).await,
            "stream_dispatch" => self.stream_dispatch(args).await,
            "stream_poll" => self.stream_poll(args).await,
            "stream_trim" => self.stream_trim(args).await,
            "stream_backlog" => self.stream_backlog(args).await,
            "stream_close" => self.stream_close(args).await,
            "grpc_open" => self.grpc_open(args).await,
            "grpc_decide" => self.grpc_decide(args).await,
            "grpc_calls" => self.grpc_calls(args).await,
            "grpc_close" => self.grpc_close(args).await,
            "kafka_open" => self.kafka_open(args).await,
            "kafka_dispatch" => self.kafka_dispatch(args).await,
            "kafka_journal" => self.kafka_journal(args).await,
            "kafka_wait" => self.kafka_wait(args).await,
            "kafka_join" => self.kafka_join(args).await,
            "kafka_release" => self.kafka_release(args).await,
            "kafka_leave" => self.kafka_leave(args).await,
            "kafka_close" => self.kafka_close(args).await,
            // crash points (src/faults.rs)
            "arm_crash_point" => crate::faults::arm(args),
            "disarm_crash_point" => Ok(crate::faults::disarm()),
            other => Err(HostError::new(
                "host.unknown_op",
                format!("unknown op {other:?}; known: {}", OPS.join(", ")),
            )
            .into()),
        }
    }
}
