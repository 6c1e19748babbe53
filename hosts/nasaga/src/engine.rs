//! What differs between the two database wrappers, behind one trait.
//!
//! Everything saga-related is generic over `Engine::Backend` (nasaga's `SagaBackend`); an engine
//! only knows how to make a schema/database, build and register a named pool, call its wrapper's
//! schema and catalog functions, run an outer transaction, and read raw rows back.

pub mod mysql;
pub mod pg;

use std::future::Future;
use std::pin::Pin;

use naoutbox_core::{DispatchReport, OutboxPublisher};
use nasaga_backend::{SagaBackend, SagaBackendFactory};
use nasaga_core::ServiceIdentity;
use nasaga_runtime_core::{
    CapabilityDescriptor, CapabilityReceipt, DefinitionActivationGate, DefinitionArtifact,
    DefinitionLifecycleOperation, DefinitionPublishDisposition, DefinitionRecord,
    DynamicCatalogSnapshot,
};
use serde_json::Value;

/// The container a datasource slot currently points at, and since when. A pooled connection
/// older than the switch was made for the previous container and is discarded on acquire.
pub type Target = std::sync::Arc<std::sync::Mutex<(String, std::time::Instant)>>;

/// Whether a pooled connection of `age` predates the slot's last switch.
pub fn predates_switch(target: &Target, age: std::time::Duration) -> bool {
    let switched_at = target.lock().unwrap_or_else(|e| e.into_inner()).1;
    age >= switched_at.elapsed()
}

pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One effect the harness step implementation wrote inside the participant transaction.
#[derive(Debug, Clone)]
pub struct EffectRecord {
    pub saga_id: String,
    pub step: String,
    pub phase: String,
    pub attempt: i64,
    pub effect_id: String,
    pub command_id: String,
    pub decision: String,
}

/// The name of the host-owned business table each participant datasource gets.
pub const EFFECT_TABLE: &str = "ratchet_effect";

#[allow(async_fn_in_trait)]
pub trait Engine: Sized + 'static {
    type Backend: SagaBackend + SagaBackendFactory + 'static;
    type Pool: Clone;

    /// `postgres` or `mysql`.
    fn name(&self) -> &'static str;
    /// The server version string, for `hello`.
    async fn server_version(&self) -> anyhow::Result<String>;
    /// Creates (`create = true`, failing if it exists) or checks (`create = false`) a container:
    /// a schema on PostgreSQL, a database on MariaDB/MySQL.
    async fn prepare_container(&self, container: &str, create: bool) -> anyhow::Result<()>;
    /// Drops a container (used by `close_namespace {drop: true}`).
    async fn drop_container(&self, container: &str) -> anyhow::Result<()>;
    /// Builds a lazy pool whose every new connection is pointed at the container currently in
    /// `target` (`SET search_path` / `USE`) and checked to be there.
    fn slot_pool(&self, target: Target, max_connections: u32) -> anyhow::Result<Self::Pool>;
    /// Registers `pool` under the process-global datasource name (once per name).
    fn register_pool(datasource: &str, pool: Self::Pool) -> anyhow::Result<()>;
    /// Closes every idle connection of the pool (the pool itself stays usable).
    async fn drain_pool(pool: &Self::Pool);
    fn pool_size(pool: &Self::Pool) -> u32;

    async fn ensure_orchestrator_schema(datasource: &str) -> anyhow::Result<()>;
    async fn ensure_participant_schema(datasource: &str) -> anyhow::Result<()>;
    async fn ensure_effect_table(datasource: &str) -> anyhow::Result<()>;
    /// The wrapper's schema bootstrap of one role taken apart: each public per-store schema call
    /// it makes, in its order, run and answered on its own, then the wrapper's own call, then the
    /// tables and triggers the database holds. Evidence for docs/nasaga-findings.md N-02 (the
    /// MySQL wrapper on MariaDB); a namespace never opens this way.
    async fn schema_steps(datasource: &str, orchestrator: bool) -> anyhow::Result<Value>;
    /// Writes one effect row through the participant's ambient transaction.
    fn record_effect(
        datasource: String,
        effect: EffectRecord,
    ) -> BoxFut<'static, anyhow::Result<()>>;
    /// Runs `body` inside an outer transaction on `datasource` that commits when `commit`.
    async fn run_outer<T>(
        datasource: &str,
        commit: bool,
        body: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T>;

    // The wrapper's catalog functions (same signatures in both crates).
    async fn publish_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        artifact: &DefinitionArtifact,
    ) -> anyhow::Result<(DefinitionPublishDisposition, DefinitionRecord)>;
    async fn register_capability(
        datasource: &str,
        actor: &ServiceIdentity,
        descriptor: &CapabilityDescriptor,
    ) -> anyhow::Result<CapabilityReceipt>;
    async fn load_dynamic_catalog(datasource: &str) -> anyhow::Result<DynamicCatalogSnapshot>;
    async fn load_definition(
        datasource: &str,
        tenant: &str,
        workflow: &str,
        version: u32,
    ) -> anyhow::Result<Option<DefinitionRecord>>;
    async fn acknowledge_generation(
        datasource: &str,
        service: &ServiceIdentity,
        replica: &str,
        generation: u64,
        digest: &str,
        activation_contract_digest: &str,
        lease_ms: u64,
    ) -> anyhow::Result<i64>;
    async fn activate_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        gate: &DefinitionActivationGate,
        key: (&str, &str, u32),
        operation: Option<&DefinitionLifecycleOperation>,
    ) -> anyhow::Result<DefinitionRecord>;
    async fn deprecate_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        key: (&str, &str, u32),
        operation: Option<&DefinitionLifecycleOperation>,
    ) -> anyhow::Result<DefinitionRecord>;
    async fn retire_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        key: (&str, &str, u32),
        operation: &DefinitionLifecycleOperation,
    ) -> anyhow::Result<DefinitionRecord>;

    /// nasaga's own outbox dispatcher on `datasource` (marks the published prefix dispatched).
    async fn dispatch_outbox(
        datasource: &str,
        publisher: &(dyn OutboxPublisher + Sync),
        limit: u32,
    ) -> anyhow::Result<DispatchReport>;

    // Raw read-backs (the same portable columns on both engines).
    async fn outbox_rows(
        datasource: &str,
        after_id: i64,
        pending_only: bool,
    ) -> anyhow::Result<Vec<Value>>;
    async fn timer_rows(datasource: &str, saga_id: Option<&str>) -> anyhow::Result<Vec<Value>>;
    async fn inbox_rows(datasource: &str) -> anyhow::Result<Vec<Value>>;
    async fn effect_rows(datasource: &str) -> anyhow::Result<Vec<Value>>;
    async fn gate_rows(datasource: &str, saga_id: Option<&str>) -> anyhow::Result<Vec<Value>>;
}

/// One call of `Engine::schema_steps`: its path, and nasaga's answer in the host's error kinds.
pub fn schema_step(call: &str, answer: anyhow::Result<()>) -> Value {
    match answer {
        Ok(()) => serde_json::json!({"call": call, "ok": true}),
        Err(error) => serde_json::json!({
            "call": call,
            "ok": false,
            "code": crate::protocol::classify(&error),
            "message": error.to_string(),
        }),
    }
}

/// Decodes an outbox payload for the response: the envelope JSON verbatim when it parses.
pub fn payload_json(payload: &[u8]) -> Value {
    serde_json::from_slice(payload)
        .unwrap_or_else(|_| serde_json::json!({"undecodable_hex": hex::encode(payload)}))
}
