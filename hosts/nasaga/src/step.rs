//! The participant's step implementation: it answers whatever the harness drew.
//!
//! Each handler call first writes one row to the participant's own business table
//! (`ratchet_effect`) through the participant transaction — that row *is* the step's effect, so
//! it commits or rolls back with nasaga's Inbox claim, gate and result Outbox — and then returns
//! the drawn decision. There is no saga logic here: which handler runs, and what the answer
//! does, is nasaga's.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use nasaga_core::{
    CancelOutcome, CancelResult, CompensationOutcome, CompensationResult, SagaCancelStep,
    SagaContext, SagaExecutionError, SagaOutcome, SagaResolveStep, SagaResult, SagaStep,
    TerminalForwardOutcome,
};

use crate::engine::{BoxFut, EffectRecord};

/// The closed set of answers a step handler can give (union over phases; each phase accepts
/// the subset nasaga's handler type allows, see `Decision::parse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Succeeded,
    Rejected,
    Unknown,
    Halted,
    Retryable,
    CancelConfirmed,
    AlreadySucceeded,
    AlreadyRejected,
    AlreadyHalted,
    ResolutionPending,
}

impl Decision {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "succeeded" => Self::Succeeded,
            "rejected" => Self::Rejected,
            "unknown" => Self::Unknown,
            "halted" => Self::Halted,
            "retryable" => Self::Retryable,
            "cancel_confirmed" => Self::CancelConfirmed,
            "already_succeeded" => Self::AlreadySucceeded,
            "already_rejected" => Self::AlreadyRejected,
            "already_halted" => Self::AlreadyHalted,
            "resolution_pending" => Self::ResolutionPending,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Rejected => "rejected",
            Self::Unknown => "unknown",
            Self::Halted => "halted",
            Self::Retryable => "retryable",
            Self::CancelConfirmed => "cancel_confirmed",
            Self::AlreadySucceeded => "already_succeeded",
            Self::AlreadyRejected => "already_rejected",
            Self::AlreadyHalted => "already_halted",
            Self::ResolutionPending => "resolution_pending",
        }
    }
}

/// nasaga's handler outcomes carry `&'static str` reason codes; the harness sends strings.
/// Interned once per distinct code, so the set stays as small as the harness's vocabulary.
pub fn intern(code: &str) -> &'static str {
    static CODES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut codes = CODES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = codes.get(code) {
        return found;
    }
    let leaked: &'static str = Box::leak(code.to_owned().into_boxed_str());
    codes.insert(leaked);
    leaked
}

pub struct HarnessStep<'a> {
    pub decision: Decision,
    pub code: &'static str,
    pub datasource: String,
    pub calls: &'a AtomicU32,
    pub record: fn(String, EffectRecord) -> BoxFut<'static, anyhow::Result<()>>,
}

impl<'a> HarnessStep<'a> {
    /// A connector's business code: answers `decision`, under the reason code the harness reads
    /// back for it (the saga ops pass their own codes).
    pub fn deciding(
        decision: Decision,
        datasource: &str,
        calls: &'a AtomicU32,
        record: fn(String, EffectRecord) -> BoxFut<'static, anyhow::Result<()>>,
    ) -> Self {
        let code = match decision {
            Decision::Rejected => "harness_rejected",
            Decision::Retryable => "harness_retryable",
            _ => "harness",
        };
        Self {
            decision,
            code: intern(code),
            datasource: datasource.to_owned(),
            calls,
            record,
        }
    }
}

impl HarnessStep<'_> {
    async fn effect(&self, context: &SagaContext) -> Result<(), SagaExecutionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let record = EffectRecord {
            saga_id: context.saga_id().as_str().to_owned(),
            step: context.step().as_str().to_owned(),
            phase: context.phase().as_str().to_owned(),
            attempt: i64::from(context.attempt().get()),
            effect_id: context.effect_id().to_string(),
            command_id: context.command_id().to_string(),
            decision: self.decision.as_str().to_owned(),
        };
        (self.record)(self.datasource.clone(), record)
            .await
            .map_err(|error| {
                eprintln!("nasaga-host: effect write failed: {error:#}");
                SagaExecutionError::Retryable {
                    code: "host_effect_write_failed",
                }
            })?;
        crate::faults::reached("step"); // a crash point (src/faults.rs)
        Ok(())
    }

    fn forward(&self) -> SagaResult<()> {
        match self.decision {
            Decision::Succeeded => Ok(SagaOutcome::Succeeded(())),
            Decision::Rejected => Ok(SagaOutcome::Rejected { code: self.code }),
            Decision::Unknown => Ok(SagaOutcome::Unknown { code: self.code }),
            Decision::Halted => Ok(SagaOutcome::Halted { code: self.code }),
            _ => Err(SagaExecutionError::Retryable { code: self.code }),
        }
    }
}

impl SagaStep for HarnessStep<'_> {
    type Command = serde_json::Value;
    type Success = ();
    type Compensation = serde_json::Value;

    async fn execute(&self, context: &SagaContext, _command: serde_json::Value) -> SagaResult<()> {
        self.effect(context).await?;
        self.forward()
    }

    async fn compensate(
        &self,
        context: &SagaContext,
        _command: serde_json::Value,
    ) -> CompensationResult {
        self.effect(context).await?;
        match self.decision {
            Decision::Succeeded => Ok(CompensationOutcome::Succeeded),
            Decision::Unknown => Ok(CompensationOutcome::Unknown { code: self.code }),
            Decision::Halted => Ok(CompensationOutcome::Halted { code: self.code }),
            _ => Err(SagaExecutionError::Retryable { code: self.code }),
        }
    }
}

impl SagaResolveStep for HarnessStep<'_> {
    type Command = serde_json::Value;
    type Success = ();

    async fn resolve(&self, context: &SagaContext, _command: serde_json::Value) -> SagaResult<()> {
        self.effect(context).await?;
        self.forward()
    }
}

impl SagaCancelStep for HarnessStep<'_> {
    type Command = serde_json::Value;

    async fn cancel(&self, context: &SagaContext, _command: serde_json::Value) -> CancelResult {
        self.effect(context).await?;
        match self.decision {
            Decision::CancelConfirmed => Ok(CancelOutcome::CancelConfirmed),
            Decision::AlreadySucceeded => Ok(CancelOutcome::AlreadyTerminal(
                TerminalForwardOutcome::Succeeded,
            )),
            Decision::AlreadyRejected => Ok(CancelOutcome::AlreadyTerminal(
                TerminalForwardOutcome::Rejected { code: self.code },
            )),
            Decision::AlreadyHalted => Ok(CancelOutcome::AlreadyTerminal(
                TerminalForwardOutcome::Halted { code: self.code },
            )),
            Decision::ResolutionPending => Ok(CancelOutcome::ResolutionPending { code: self.code }),
            _ => Err(SagaExecutionError::Retryable { code: self.code }),
        }
    }
}
