//! JSON in and out: definitions from requests, nasaga's rows and outcomes to responses.
//!
//! Nothing here decides anything: each function maps one nasaga value to its JSON spelling,
//! using nasaga's own stable text names (`as_str`) wherever it has them.

use std::time::Duration;

use nasaga_backend::{
    SagaConflictFactRow, SagaControlAuditRow, SagaInstanceRow, SagaInstanceSummary,
    SagaManagementAuditRow, SagaStepAttemptRow, SagaStepRow, SagaTimerRow, SagaTransitionAuditRow,
};
use nasaga_core::{
    DefinitionVersion, ResolutionSpec, ServiceIdentity, StepDefinition, StepName,
    WorkflowDefinition, WorkflowName,
};
use nasaga_runtime_core::{DefinitionResolution, DefinitionStepArtifact, SagaAuditRecord};
use serde_json::{json, Value};

use crate::protocol::bad;

/// A definition as a request describes it: nasaga's own step artifact shape plus the key.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefinitionSpec {
    pub workflow: String,
    pub version: u32,
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub workflow_owner: Option<String>,
    pub steps: Vec<DefinitionStepArtifact>,
}

/// Builds and validates the definition through nasaga's constructors (`WorkflowDefinition::new`
/// enforces pivot-last, non-zero timeouts, cancel mode vs. unknown).
pub fn workflow_definition(spec: &DefinitionSpec) -> anyhow::Result<WorkflowDefinition> {
    let mut steps = Vec::with_capacity(spec.steps.len());
    for step in &spec.steps {
        let resolution = match &step.resolution {
            DefinitionResolution::Forbidden(text) if text == "forbidden" => {
                ResolutionSpec::forbidden()
            }
            DefinitionResolution::Forbidden(other) => {
                return Err(bad(format!(
                    "resolution must be \"forbidden\" or an object, not {other:?}"
                )))
            }
            DefinitionResolution::Allowed { mode, budget_ms } => {
                ResolutionSpec::allowed((*mode).into(), Duration::from_millis(*budget_ms))
            }
        };
        let definition = StepDefinition::new(
            StepName::new(&step.name).map_err(contract)?,
            ServiceIdentity::new(&step.owner).map_err(contract)?,
            step.compensation.into(),
            step.cancel_mode.into(),
            resolution,
            Duration::from_millis(step.timeout_ms),
            step.timeout_policy.into(),
        );
        let definition = match &step.payload_contract {
            Some(contract_) => definition
                .with_payload_contract(contract_.clone())
                .map_err(|_| bad("payload_contract is invalid"))?,
            None => definition,
        };
        steps.push(definition);
    }
    WorkflowDefinition::new(
        WorkflowName::new(&spec.workflow).map_err(contract)?,
        DefinitionVersion::new(spec.version).map_err(contract)?,
        steps,
    )
    .map_err(contract)
}

/// A nasaga `ContractViolation` as a `definition.<code>` host error.
pub fn contract(violation: nasaga_core::ContractViolation) -> anyhow::Error {
    crate::protocol::HostError::new(
        "definition.contract_violation",
        format!("{}: {violation}", violation.code()),
    )
    .into()
}

pub fn definition(definition: &WorkflowDefinition) -> Value {
    json!({
        "workflow": definition.name().as_str(),
        "version": definition.version().get(),
        "digest": definition.digest(),
        "steps": definition.steps().iter().map(|s| json!({
            "name": s.name().as_str(),
            "owner": s.owner().as_str(),
            "compensation": s.compensation().as_str(),
            "cancel_mode": s.cancel_mode().as_str(),
            "allow_unknown": s.resolution().allow_unknown(),
            "resolution_mode": s.resolution().mode().map(|m| m.as_str()),
            "resolution_budget_ms": s.resolution().budget().as_millis() as u64,
            "timeout_ms": s.timeout().as_millis() as u64,
            "timeout_policy": s.timeout_policy().as_str(),
        })).collect::<Vec<_>>(),
    })
}

pub fn instance(row: &SagaInstanceRow) -> Value {
    json!({
        "saga_id": row.saga_id.as_str(),
        "tenant": row.tenant.as_str(),
        "workflow": row.workflow.as_str(),
        "business_key": row.business_key.as_str(),
        "definition_version": row.definition_version.get(),
        "definition_digest": row.definition_digest,
        "start_request_digest": row.start_request_digest,
        "status": row.status.as_str(),
        "control_state": row.control_state.as_str(),
        "control_version": row.control_version,
        "direction": row.direction.as_str(),
        "current_step": row.current_step.as_ref().map(|s| s.as_str()),
        "compensation_plan_version": row.compensation_plan_version,
        "version": row.version,
        "deadline_at_ms": row.deadline_at_ms,
        "failure_code": row.failure_code,
    })
}

pub fn summary(row: &SagaInstanceSummary) -> Value {
    json!({
        "saga_id": row.saga_id.as_str(),
        "tenant": row.tenant.as_str(),
        "workflow": row.workflow.as_str(),
        "business_key": row.business_key.as_str(),
        "definition_version": row.definition_version.get(),
        "status": row.status.as_str(),
        "control_state": row.control_state.as_str(),
        "direction": row.direction.as_str(),
        "current_step": row.current_step.as_ref().map(|s| s.as_str()),
        "version": row.version,
        "control_version": row.control_version,
        "failure_code": row.failure_code,
        "created_at_ms": row.created_at_ms,
        "updated_at_ms": row.updated_at_ms,
    })
}

pub fn step(row: &SagaStepRow) -> Value {
    json!({
        "step": row.step.as_str(),
        "ordinal": row.ordinal,
        "forward_status": row.forward_status.as_str(),
        "cancel_status": row.cancel_status.as_str(),
        "compensation_status": row.compensation_status.as_str(),
        "resolution_status": row.resolution_status.as_str(),
        "execute": {"effect_id": row.execute_effect_id, "command_id": row.execute_command_id, "attempt": row.execute_attempt},
        "cancel": {"effect_id": row.cancel_effect_id, "command_id": row.cancel_command_id, "attempt": row.cancel_attempt},
        "compensate": {"effect_id": row.compensate_effect_id, "command_id": row.compensate_command_id, "attempt": row.compensate_attempt},
        "resolve": {"effect_id": row.resolve_effect_id, "command_id": row.resolve_command_id, "attempt": row.resolve_attempt},
        "compensation_plan_version": row.compensation_plan_version,
        "compensation_order": row.compensation_order,
        "last_error_code": row.last_error_code,
    })
}

pub fn attempt(row: &SagaStepAttemptRow) -> Value {
    json!({
        "step": row.step.as_str(),
        "phase": row.phase.as_str(),
        "attempt": row.attempt.get(),
        "effect_id": row.effect_id,
        "command_id": row.command_id,
        "status": row.status.as_str(),
        "outcome_event_id": row.outcome_event_id,
    })
}

pub fn transition(row: &SagaTransitionAuditRow) -> Value {
    json!({
        "transition_seq": row.transition_seq,
        "from": row.from_state,
        "to": row.to_state,
        "trigger_kind": row.trigger_kind,
        "trigger_id": row.trigger_id,
        "definition_version": row.definition_version,
        "occurred_at_ms": row.occurred_at_ms,
    })
}

pub fn control(row: &SagaControlAuditRow) -> Value {
    json!({
        "control_seq": row.control_seq,
        "from": row.from_state,
        "to": row.to_state,
        "operation_id": row.operation_id,
        "actor": row.actor,
        "reason": row.reason,
        "occurred_at_ms": row.occurred_at_ms,
    })
}

pub fn management(row: &SagaManagementAuditRow) -> Value {
    json!({
        "operation_id": row.operation_id,
        "action": row.action,
        "actor": row.actor,
        "reason": row.reason,
        "occurred_at_ms": row.occurred_at_ms,
    })
}

pub fn conflict(row: &SagaConflictFactRow) -> Value {
    json!({
        "incoming_event_id": row.incoming_event_id,
        "step": row.step.as_str(),
        "phase": row.phase.as_str(),
        "attempt": row.attempt.get(),
        "existing_status": row.existing_status.as_str(),
        "incoming_status": row.incoming_status.as_str(),
        "conflict_kind": row.conflict_kind,
        "occurred_at_ms": row.occurred_at_ms,
    })
}

pub fn audit_record(record: &SagaAuditRecord) -> Value {
    match record {
        SagaAuditRecord::Attempt(r) => {
            json!({"kind": "attempt", "record": attempt(&r.attempt), "occurred_at_ms": r.occurred_at_ms})
        }
        SagaAuditRecord::Transition(r) => json!({"kind": "transition", "record": transition(r)}),
        SagaAuditRecord::Control(r) => json!({"kind": "control", "record": control(r)}),
        SagaAuditRecord::Management(r) => json!({"kind": "management", "record": management(r)}),
        SagaAuditRecord::Conflict(r) => json!({"kind": "conflict", "record": conflict(r)}),
    }
}

pub fn timer(row: &SagaTimerRow) -> Value {
    json!({
        "timer_id": row.timer_id,
        "saga_id": row.saga_id.as_str(),
        "scope_kind": row.scope_kind,
        "scope_key": row.scope_key,
        "kind": row.kind,
        "due_at_ms": row.due_at_ms,
        "available_at_ms": row.available_at_ms,
        "state": row.state.as_str(),
        "attempt": row.attempt.get(),
        "expected_saga_version": row.expected_saga_version,
        "generation": row.generation,
        "owner": row.owner,
        "claimed_until_ms": row.claimed_until_ms,
    })
}

/// The key fields of an outbox envelope (command or result), for the harness's convenience.
pub fn envelope_keys(envelope: &Value) -> Value {
    let pick = |k: &str| envelope.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "saga_id": pick("saga_id"),
        "tenant": pick("tenant_id"),
        "workflow": pick("workflow"),
        "definition_version": pick("definition_version"),
        "step": pick("step"),
        "phase": pick("phase"),
        "attempt": pick("attempt"),
        "effect_id": pick("effect_id"),
        "command_id": pick("command_id"),
        "event_id": pick("event_id"),
        "status": pick("status"),
        "terminal_status": pick("terminal_status"),
        "reason_code": pick("reason_code"),
        "recovery_operation_id": pick("recovery_operation_id"),
    })
}
