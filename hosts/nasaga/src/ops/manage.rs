//! Management actions (nasaga's `*_with_expectation` entry points) and the authenticated
//! read APIs (audit trail, audit page, instance list, quota usage).

use nasaga_backend::{SagaBackend, SagaBackendFactory, SagaGovernanceStore};
use nasaga_core::{SagaId, SagaStatus, TenantId, WorkflowName};
use nasaga_runtime_core::{
    SagaAuditPageCursor, SagaManagementContext, SagaManagementExpectation, SagaManagementPermission,
};
use serde_json::{json, Value};

use crate::convert;
use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{bad, Args};

const ALL_PERMISSIONS: [SagaManagementPermission; 7] = [
    SagaManagementPermission::Pause,
    SagaManagementPermission::Resume,
    SagaManagementPermission::RetryCompensation,
    SagaManagementPermission::RetryResolution,
    SagaManagementPermission::ReadAudit,
    SagaManagementPermission::ListInstances,
    SagaManagementPermission::ManualClose,
];

fn permission(text: &str) -> anyhow::Result<SagaManagementPermission> {
    ALL_PERMISSIONS
        .iter()
        .copied()
        .find(|p| p.as_str() == text)
        .ok_or_else(|| bad(format!("unknown permission {text}")))
}

/// `actor`, `reason`, `permissions` (nasaga's names, e.g. `saga.pause`; default: all).
fn context(args: &Args<'_>) -> anyhow::Result<SagaManagementContext> {
    let permissions = match args.opt("permissions") {
        None => ALL_PERMISSIONS.to_vec(),
        Some(_) => args
            .str_list("permissions")?
            .iter()
            .map(|p| permission(p))
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    SagaManagementContext::new(
        args.opt_str("actor")?.unwrap_or("ratchet-harness"),
        args.opt_str("reason")?.unwrap_or("conformance run"),
        permissions,
    )
}

/// `expect: {state_version?, control_version?}`.
fn expectation(args: &Args<'_>) -> anyhow::Result<SagaManagementExpectation> {
    let Some(raw) = args.opt("expect") else {
        return Ok(SagaManagementExpectation::default());
    };
    let e = Args(raw);
    let version =
        |key: &str| -> anyhow::Result<Option<u64>> { Ok(e.opt_i64(key)?.map(|v| v.max(0) as u64)) };
    Ok(SagaManagementExpectation::new(
        version("state_version")?,
        version("control_version")?,
    ))
}

fn ids(args: &Args<'_>) -> anyhow::Result<(TenantId, SagaId)> {
    Ok((
        TenantId::new(args.str("tenant")?).map_err(convert::contract)?,
        SagaId::new(args.str("saga_id")?).map_err(convert::contract)?,
    ))
}

impl<E: Engine> Host<E> {
    /// `manage {namespace, action, tenant, saga_id, operation_id, now_ms?, actor?, reason?,
    /// permissions?, expect?}` with `action` one of pause, resume, retry_compensation,
    /// retry_resolution, manual_close.
    pub async fn manage(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let orchestrator = &namespace.orchestrator;
        let management = context(args)?;
        let expect = expectation(args)?;
        let (tenant, saga_id) = ids(args)?;
        let operation_id = args.str("operation_id")?;
        let action = args.str("action")?;
        let status: Option<SagaStatus> = match action {
            "pause" => {
                orchestrator
                    .pause_with_expectation(&management, &tenant, &saga_id, operation_id, expect)
                    .await?;
                None
            }
            "resume" => {
                orchestrator
                    .resume_with_expectation(&management, &tenant, &saga_id, operation_id, expect)
                    .await?;
                None
            }
            "retry_compensation" => Some(
                orchestrator
                    .retry_compensation_with_expectation(
                        &management,
                        &tenant,
                        &saga_id,
                        operation_id,
                        args.i64("now_ms")?,
                        expect,
                    )
                    .await?,
            ),
            "retry_resolution" => Some(
                orchestrator
                    .retry_resolution_with_expectation(
                        &management,
                        &tenant,
                        &saga_id,
                        operation_id,
                        args.i64("now_ms")?,
                        expect,
                    )
                    .await?,
            ),
            "manual_close" => Some(
                orchestrator
                    .manual_close_with_expectation(
                        &management,
                        &tenant,
                        &saga_id,
                        operation_id,
                        expect,
                    )
                    .await?,
            ),
            other => return Err(bad(format!("unknown management action {other}"))),
        };
        Ok(json!({"action": action, "status": status.map(SagaStatus::as_str)}))
    }

    /// `load_audit_trail {namespace, tenant, saga_id, after_transition_seq?, after_control_seq?,
    /// limit?, ...management context}`.
    pub async fn load_audit_trail(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let (tenant, saga_id) = ids(args)?;
        let trail = namespace
            .orchestrator
            .load_audit_trail(
                &context(args)?,
                &tenant,
                &saga_id,
                args.opt_i64("after_transition_seq")?.unwrap_or(0).max(0) as u64,
                args.opt_i64("after_control_seq")?.unwrap_or(0).max(0) as u64,
                args.u32_or("limit", 1000)?,
            )
            .await?;
        Ok(json!({
            "attempts": trail.attempts.iter().map(convert::attempt).collect::<Vec<_>>(),
            "transitions": trail.transitions.iter().map(convert::transition).collect::<Vec<_>>(),
            "controls": trail.controls.iter().map(convert::control).collect::<Vec<_>>(),
            "management_operations": trail.management_operations.iter().map(convert::management).collect::<Vec<_>>(),
            "conflicts": trail.conflicts.iter().map(convert::conflict).collect::<Vec<_>>(),
        }))
    }

    /// `load_audit_page {namespace, tenant, saga_id, after_audit_seq?, limit?}`.
    pub async fn load_audit_page(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let (tenant, saga_id) = ids(args)?;
        let cursor = args
            .opt_i64("after_audit_seq")?
            .map(|s| SagaAuditPageCursor {
                audit_seq: s.max(0) as u64,
            });
        let page = namespace
            .orchestrator
            .load_audit_page(
                &context(args)?,
                &tenant,
                &saga_id,
                cursor.as_ref(),
                args.u32_or("limit", 1000)?,
            )
            .await?;
        Ok(json!({
            "records": page.records.iter().map(convert::audit_record).collect::<Vec<_>>(),
            "next_cursor": page.next_cursor.map(|c| c.audit_seq),
        }))
    }

    /// `list_instances {namespace, tenant, workflow?, statuses?, limit?, after?}`.
    pub async fn list_instances(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let tenant = TenantId::new(args.str("tenant")?).map_err(convert::contract)?;
        let workflow = args
            .opt_str("workflow")?
            .map(WorkflowName::new)
            .transpose()
            .map_err(convert::contract)?;
        let statuses = args
            .str_list("statuses")?
            .iter()
            .map(|s| SagaStatus::parse(s).ok_or_else(|| bad(format!("unknown status {s}"))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let after = args
            .opt_str("after")?
            .map(SagaId::new)
            .transpose()
            .map_err(convert::contract)?;
        let query = nasaga_backend::SagaInstanceQuery {
            tenant: &tenant,
            workflow: workflow.as_ref(),
            statuses: (!statuses.is_empty()).then_some(statuses.as_slice()),
            created_from_ms: None,
            created_to_ms: None,
            after_created_at_us: None,
            after: after.as_ref(),
            limit: args.u32_or("limit", 100)?,
        };
        let rows = namespace
            .orchestrator
            .list_instances(&context(args)?, &query)
            .await?;
        Ok(json!({"instances": rows.iter().map(convert::summary).collect::<Vec<_>>()}))
    }

    /// `reconcile_tenant_quota {namespace, tenant}` → `{in_flight}`: the operator's reconciliation
    /// of a capped tenant's in-flight ledger (`SagaGovernanceStore::reconcile_tenant_quota`), in a
    /// transaction of its own on the orchestrator datasource, as nasaga requires. It is the only
    /// way nasaga initializes the ledger a capped tenant's starts and `verify_startup` need
    /// (`pg/quota.rs:178-240`, `rt/orchestrator.rs:645-662`; finding N-10).
    pub async fn reconcile_tenant_quota(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let tenant = TenantId::new(args.str("tenant")?).map_err(convert::contract)?;
        let backend = E::Backend::backend_for(&namespace.orch.datasource)?;
        let in_flight = E::run_outer(&namespace.orch.datasource, true, async {
            Ok(backend.store().reconcile_tenant_quota(&tenant).await?)
        })
        .await?;
        Ok(json!({"in_flight": in_flight}))
    }

    /// `tenant_quota_usage {namespace, tenant}`.
    pub async fn tenant_quota_usage(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let tenant = TenantId::new(args.str("tenant")?).map_err(convert::contract)?;
        let usage = namespace
            .orchestrator
            .tenant_quota_usage(&context(args)?, &tenant)
            .await?;
        Ok(json!({"in_flight": usage}))
    }
}
