//! Start, the outboxes, and deliveries: the harness moves every envelope itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use naoutbox_core::{OutboxEvent, OutboxPublishError, OutboxPublisher};
use nasaga_core::{
    BusinessKey, CancelMode, DefinitionVersion, SagaId, SagaPayload, ServiceIdentity, StepName,
    TenantId, TriggerKind, WorkflowDefinition, WorkflowName,
};
use nasaga_runtime_core::{
    HandleOutcome, ParticipantHandled, ParticipantRuntime, SagaCommandEnvelope, SagaResultEnvelope,
    StartOutcome, StartSagaRequest,
};
use serde_json::{json, Value};

use crate::convert;
use crate::engine::Engine;
use crate::host::{Host, Namespace};
use crate::protocol::{bad, Args, HostError};
use crate::step::{intern, Decision, HarnessStep};

/// The host's eligibility check: the harness supplies the answer for each checkpoint
/// (call n answers `answers[n]`, the last answer repeats; an empty list always allows).
pub struct Eligibility {
    answers: Vec<bool>,
    calls: AtomicUsize,
}

impl Eligibility {
    pub fn from_args(args: &Args<'_>) -> anyhow::Result<Arc<Self>> {
        let answers: Vec<bool> = match args.opt("eligibility") {
            None => Vec::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| bad("`eligibility` must be a list of booleans"))?,
        };
        Ok(Arc::new(Self {
            answers,
            calls: AtomicUsize::new(0),
        }))
    }

    pub fn check(&self) -> anyhow::Result<()> {
        crate::faults::reached("eligibility"); // a crash point (src/faults.rs)
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let allowed = self
            .answers
            .get(n)
            .or(self.answers.last())
            .copied()
            .unwrap_or(true);
        if allowed {
            Ok(())
        } else {
            Err(HostError::new(
                "host.eligibility_denied",
                format!("the harness answered false at eligibility checkpoint {n}"),
            )
            .into())
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn contract<T>(result: Result<T, nasaga_core::ContractViolation>) -> anyhow::Result<T> {
    result.map_err(convert::contract)
}

fn trigger_kind(text: &str) -> anyhow::Result<TriggerKind> {
    Ok(match text {
        "event" => TriggerKind::Event,
        "admin" => TriggerKind::Admin,
        "timer" => TriggerKind::Timer,
        other => {
            return Err(bad(format!(
                "trigger_kind must be event, admin or timer, not {other}"
            )))
        }
    })
}

fn raw_payload(args: &Args<'_>) -> anyhow::Result<Option<SagaPayload>> {
    let Some(raw) = args.opt("raw_payload") else {
        return Ok(None);
    };
    let raw = Args(raw);
    let body = match (raw.opt_str("body_hex")?, raw.opt_str("body_text")?) {
        (Some(h), None) => hex::decode(h).map_err(|_| bad("raw_payload.body_hex is not hex"))?,
        (None, Some(t)) => t.as_bytes().to_vec(),
        _ => return Err(bad("raw_payload needs exactly one of body_hex, body_text")),
    };
    // Built field by field (no validation) so nasaga's own admission judges the contract.
    Ok(Some(SagaPayload {
        content_type: raw.str("content_type")?.to_owned(),
        schema_id: raw.opt_str("schema_id")?.unwrap_or("").to_owned(),
        body,
    }))
}

/// The definition an envelope names (by digest), if this host knows it.
fn definition_for<'a, E: Engine>(
    namespace: &'a Namespace<E>,
    digest: &str,
) -> Option<&'a WorkflowDefinition> {
    namespace.known.get(digest)
}

fn handled(outcome: ParticipantHandled) -> Value {
    match outcome {
        ParticipantHandled::Executed(s) => json!({"handled": "executed", "status": s.as_str()}),
        ParticipantHandled::Replayed(s) => json!({"handled": "replayed", "status": s.as_str()}),
        ParticipantHandled::Duplicate => json!({"handled": "duplicate", "status": null}),
        ParticipantHandled::Suppressed => json!({"handled": "suppressed", "status": null}),
        ParticipantHandled::ContractViolation => {
            json!({"handled": "contract_violation", "status": null})
        }
    }
}

/// A publisher for nasaga's own dispatcher that keeps what it was handed (and can fail).
struct Capture {
    events: Mutex<Vec<OutboxEvent>>,
    fail_at: Option<usize>,
}

#[async_trait::async_trait]
impl OutboxPublisher for Capture {
    async fn publish(&self, event: &OutboxEvent) -> Result<(), OutboxPublishError> {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if Some(events.len()) == self.fail_at {
            return Err(OutboxPublishError::new("harness-injected publish failure"));
        }
        events.push(event.clone());
        Ok(())
    }
}

fn outbox_row(mut row: Value) -> Value {
    let envelope = row.get("payload").cloned().unwrap_or(Value::Null);
    if let Some(map) = row.as_object_mut() {
        map.remove("payload");
        let kind = match map.get("event_type").and_then(Value::as_str) {
            Some("saga.command") => "command",
            Some("saga.result") => "result",
            _ => "other",
        };
        map.insert("kind".into(), json!(kind));
        map.insert("keys".into(), convert::envelope_keys(&envelope));
        map.insert("envelope".into(), envelope);
    }
    row
}

impl<E: Engine> Host<E> {
    /// `start_saga {namespace, saga_id, tenant, workflow, version, business_key, now_ms,
    /// payload? | raw_payload?, deadline_at_ms?, trigger_kind?, trigger_id?, eligibility?,
    /// outer?: "commit"|"rollback"}`.
    pub async fn start_saga(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let saga_id = contract(SagaId::new(args.str("saga_id")?))?;
        let tenant = contract(TenantId::new(args.str("tenant")?))?;
        let workflow = contract(WorkflowName::new(args.str("workflow")?))?;
        let version = contract(DefinitionVersion::new(args.u32_or("version", 0)?))?;
        let business_key = contract(BusinessKey::new(args.str("business_key")?))?;
        let trigger_kind = trigger_kind(args.opt_str("trigger_kind")?.unwrap_or("event"))?;
        let trigger_id = args
            .opt_str("trigger_id")?
            .map(str::to_owned)
            .unwrap_or_else(|| format!("start-{}", saga_id.as_str()));
        let request = StartSagaRequest {
            saga_id: &saga_id,
            tenant: &tenant,
            workflow: &workflow,
            version,
            business_key: &business_key,
            deadline_at_ms: args.opt_i64("deadline_at_ms")?,
            trigger_kind,
            trigger_id: &trigger_id,
            first_command_payload: args.opt("payload").cloned(),
            first_command_raw_payload: raw_payload(args)?,
            now_ms: args.i64("now_ms")?,
        };
        let eligibility = Eligibility::from_args(args)?;
        let check = {
            let eligibility = eligibility.clone();
            move || eligibility.check()
        };
        let orchestrator = &namespace.orchestrator;
        let run = orchestrator.start_saga_authorized_traced(&request, None, &check);
        let outcome = match args.opt_str("outer")? {
            None => run.await,
            Some("commit") => E::run_outer(&namespace.orch.datasource, true, run).await,
            Some("rollback") => E::run_outer(&namespace.orch.datasource, false, run).await,
            Some(other) => {
                return Err(bad(format!(
                    "outer must be commit or rollback, not {other}"
                )))
            }
        };
        let outcome =
            outcome.map_err(|e| e.context(format!("eligibility_calls={}", eligibility.calls())))?;
        let (name, row) = match &outcome {
            StartOutcome::Started(row) => ("started", row),
            StartOutcome::AlreadyExists(row) => ("already_exists", row),
        };
        Ok(json!({
            "outcome": name,
            "instance": convert::instance(row),
            "eligibility_calls": eligibility.calls(),
        }))
    }

    /// `read_outbox {namespace, role, after_id?, pending_only?}`: raw `outbox_event` rows of the
    /// orchestrator (`role: "orchestrator"`, commands) or a participant (results).
    pub async fn read_outbox(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let role = namespace.role(args.str("role")?)?;
        let rows = E::outbox_rows(
            &role.datasource,
            args.opt_i64("after_id")?.unwrap_or(0),
            args.bool_or("pending_only", false)?,
        )
        .await?;
        Ok(json!({"rows": rows.into_iter().map(outbox_row).collect::<Vec<_>>()}))
    }

    /// `dispatch_outbox {namespace, role, limit?, fail_at?}`: nasaga's own dispatcher, with a
    /// publisher that hands the events back (and fails the `fail_at`-th one if asked).
    pub async fn dispatch_outbox(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let role = namespace.role(args.str("role")?)?;
        let capture = Capture {
            events: Mutex::new(Vec::new()),
            fail_at: args.opt_i64("fail_at")?.map(|n| n.max(0) as usize),
        };
        let report =
            E::dispatch_outbox(&role.datasource, &capture, args.u32_or("limit", 100)?).await?;
        let events = capture
            .events
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        Ok(json!({
            "published": report.published,
            "total": report.total,
            "first_error": report.first_error.map(|e| e.to_string()),
            "events": events.iter().map(|e| {
                let envelope = crate::engine::payload_json(&e.payload);
                json!({"event_id": e.event_id, "event_type": e.event_type,
                       "keys": convert::envelope_keys(&envelope), "envelope": envelope})
            }).collect::<Vec<_>>(),
        }))
    }

    /// `deliver_command {namespace, owner, envelope, decision, code?, producer?,
    /// allow_unknown?}`: the participant runtime of `owner`, authenticated as `producer`
    /// (default: the orchestrator identity), with the harness step answering `decision`.
    pub async fn deliver_command(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let owner = args.str("owner")?;
        let role = namespace.owner(owner)?;
        let envelope: SagaCommandEnvelope = serde_json::from_value(args.value("envelope")?.clone())
            .map_err(|e| HostError::new("host.bad_envelope", e.to_string()))?;
        let decision_text = args.opt_str("decision")?.unwrap_or("succeeded");
        let decision = Decision::parse(decision_text)
            .ok_or_else(|| bad(format!("unknown decision {decision_text}")))?;
        let code = intern(args.opt_str("code")?.unwrap_or(match decision {
            Decision::Rejected => "harness_rejected",
            Decision::Unknown => "harness_unknown",
            Decision::Halted => "harness_halted",
            Decision::Retryable => "harness_retryable",
            Decision::ResolutionPending => "harness_resolution_pending",
            _ => "harness",
        }));
        let producer = ServiceIdentity::new(
            args.opt_str("producer")?
                .unwrap_or(namespace.orch_identity.as_str()),
        )
        .map_err(convert::contract)?;

        let trusts = namespace.command_trusts()?;
        let runtime =
            ParticipantRuntime::<E::Backend>::with_datasource(owner, trusts, &role.datasource)?;
        let step_def = definition_for(namespace, &envelope.definition_digest).and_then(|d| {
            StepName::new(&envelope.step)
                .ok()
                .and_then(|name| d.step(&name).cloned())
        });
        let allow_unknown = args.bool_or(
            "allow_unknown",
            step_def
                .as_ref()
                .is_some_and(|s| s.resolution().allow_unknown()),
        )?;
        let cancel_mode = step_def
            .as_ref()
            .map_or(CancelMode::LocalFenceable, |s| s.cancel_mode());
        let calls = namespace
            .calls
            .get(owner)
            .ok_or_else(|| bad("no call counter for owner"))?;
        let before = calls.load(Ordering::SeqCst);
        let step = HarnessStep {
            decision,
            code,
            datasource: role.datasource.clone(),
            calls,
            record: E::record_effect,
        };
        let authenticated = runtime.authenticate(&producer)?;
        let outcome = match envelope.phase.as_str() {
            "execute" => authenticated.execute(&step, &envelope, allow_unknown).await,
            "compensate" => authenticated.compensate(&step, &envelope).await,
            "resolve" => authenticated.resolve(&step, &envelope).await,
            "cancel" if cancel_mode == CancelMode::ExternallyCancellable => {
                authenticated.cancel_external(&step, &envelope).await
            }
            "cancel" => authenticated.cancel_local(&envelope).await,
            // An unknown phase still goes through nasaga's identity check, which refuses it.
            _ => authenticated.execute(&step, &envelope, allow_unknown).await,
        };
        let invoked = calls.load(Ordering::SeqCst) - before;
        let mut body = handled(outcome.map_err(|e| e.context(format!("handler_calls={invoked}")))?);
        body["handler_calls"] = json!(invoked);
        Ok(body)
    }

    /// `deliver_result {namespace, envelope, now_ms, producer?, eligibility?}` →
    /// `handle_authenticated_result_authorized_traced`; `producer` defaults to the step owner.
    pub async fn deliver_result(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let envelope: SagaResultEnvelope = serde_json::from_value(args.value("envelope")?.clone())
            .map_err(|e| HostError::new("host.bad_envelope", e.to_string()))?;
        let default_owner = definition_for(namespace, &envelope.definition_digest).and_then(|d| {
            StepName::new(&envelope.step)
                .ok()
                .and_then(|name| d.step(&name).map(|s| s.owner().as_str().to_owned()))
        });
        let producer_text = match args.opt_str("producer")? {
            Some(p) => p.to_owned(),
            None => default_owner
                .ok_or_else(|| bad("unknown step owner for this envelope: pass `producer`"))?,
        };
        let producer = ServiceIdentity::new(&producer_text).map_err(convert::contract)?;
        let eligibility = Eligibility::from_args(args)?;
        let check = {
            let eligibility = eligibility.clone();
            move || eligibility.check()
        };
        let outcome = namespace
            .orchestrator
            .handle_authenticated_result_authorized_traced(
                &envelope,
                &producer,
                None,
                args.i64("now_ms")?,
                &check,
            )
            .await?;
        Ok(match outcome {
            HandleOutcome::Applied { status } => {
                json!({"outcome": "applied", "status": status.as_str(), "eligibility_calls": eligibility.calls()})
            }
            HandleOutcome::Duplicate => {
                json!({"outcome": "duplicate", "status": null, "eligibility_calls": eligibility.calls()})
            }
        })
    }
}
