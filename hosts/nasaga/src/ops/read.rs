//! Read-backs: nasaga's own read APIs where it has them, raw rows where it does not.

use nasaga_backend::{SagaBackend, SagaBackendFactory, SagaJournalStore};
use nasaga_core::{SagaId, StepName, TenantId};
use serde_json::{json, Value};

use crate::convert;
use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::Args;

impl<E: Engine> Host<E> {
    /// `load_instance {namespace, tenant, saga_id}` (`Orchestrator::load_instance`).
    pub async fn load_instance(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let tenant = TenantId::new(args.str("tenant")?).map_err(convert::contract)?;
        let saga_id = SagaId::new(args.str("saga_id")?).map_err(convert::contract)?;
        let row = namespace
            .orchestrator
            .load_instance(&tenant, &saga_id)
            .await?;
        Ok(json!({"instance": row.as_ref().map(convert::instance)}))
    }

    /// `load_steps {namespace, saga_id}`: the step journal (`SagaJournalStore::load_steps`).
    pub async fn load_steps(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let saga_id = SagaId::new(args.str("saga_id")?).map_err(convert::contract)?;
        let backend = E::Backend::backend_for(&namespace.orch.datasource)?;
        let steps = backend.store().load_steps(&saga_id).await?;
        Ok(json!({"steps": steps.iter().map(convert::step).collect::<Vec<_>>()}))
    }

    /// `load_attempts {namespace, saga_id, step}`: the attempt journal of one step.
    pub async fn load_attempts(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let saga_id = SagaId::new(args.str("saga_id")?).map_err(convert::contract)?;
        let step = StepName::new(args.str("step")?).map_err(convert::contract)?;
        let backend = E::Backend::backend_for(&namespace.orch.datasource)?;
        let attempts = backend.store().load_attempts(&saga_id, &step).await?;
        Ok(json!({"attempts": attempts.iter().map(convert::attempt).collect::<Vec<_>>()}))
    }

    /// `read_timers {namespace, saga_id?}`: raw `saga_timer` rows.
    pub async fn read_timers(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let rows = E::timer_rows(&namespace.orch.datasource, args.opt_str("saga_id")?).await?;
        Ok(json!({"timers": rows}))
    }

    /// `read_inbox {namespace, role}`: raw `inbox_message` claims of one role.
    pub async fn read_inbox(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let role = namespace.role(args.str("role")?)?;
        Ok(json!({"claims": E::inbox_rows(&role.datasource).await?}))
    }

    /// `read_gates {namespace, owner, saga_id?}`: raw `saga_participant_step` gate rows.
    pub async fn read_gates(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let role = namespace.owner(args.str("owner")?)?;
        let rows = E::gate_rows(&role.datasource, args.opt_str("saga_id")?).await?;
        Ok(json!({"gates": rows}))
    }

    /// `read_effects {namespace, owner}`: the committed effects of the harness step.
    pub async fn read_effects(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let owner = args.str("owner")?;
        let role = namespace.owner(owner)?;
        let calls = namespace
            .calls
            .get(owner)
            .map_or(0, |c| c.load(std::sync::atomic::Ordering::SeqCst));
        Ok(json!({"effects": E::effect_rows(&role.datasource).await?, "handler_calls": calls}))
    }
}
