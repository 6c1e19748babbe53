//! Durable timers at exact harness time: claim with an issued fencing token, fire, release.
//!
//! nasaga's `run_due_timers` adds real elapsed monotonic time to `now_ms`; for exact control the
//! host claims through the store's `claim_due_timers` itself and keeps the batch (nasaga's
//! `TimerFencingToken` is neither `Clone` nor constructible from text), handing the harness a
//! claim handle. A stale handle's token reaches nasaga's fencing check unchanged.

use nasaga_backend::{SagaBackend, SagaBackendFactory, SagaTimerStore, TimerFencing};
use nasaga_runtime_core::TimerOutcome;
use serde_json::{json, Value};

use crate::convert;
use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{Args, HostError};

fn unknown_claim(claim: &str) -> anyhow::Error {
    HostError::new(
        "host.unknown_claim",
        format!("this host holds no timer claim {claim} (released, or claimed by another host)"),
    )
    .into()
}

impl<E: Engine> Host<E> {
    /// `claim_due_timers {namespace, owner, now_ms, lease_ms?, limit?}` → `{claim, token, timers}`.
    pub async fn claim_due_timers(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let owner = args.str("owner")?.to_owned();
        let now_ms = args.i64("now_ms")?;
        let lease_ms = args.opt_i64("lease_ms")?.unwrap_or(60_000);
        let limit = args.u32_or("limit", 32)?;
        let token = self.issuer.issue(&owner, now_ms);
        let handle = format!("claim-{}", self.next_seq());
        let namespace = self.ns_mut(args)?;
        let backend = E::Backend::backend_for(&namespace.orch.datasource)?;
        let batch = backend
            .store()
            .claim_due_timers(&owner, token, now_ms, lease_ms, limit)
            .await?;
        let body = json!({
            "claim": handle,
            "owner": owner,
            "token": batch.token().persistence_value(),
            "timers": batch.timers().iter().map(convert::timer).collect::<Vec<_>>(),
        });
        namespace.claims.insert(handle, batch);
        Ok(body)
    }

    /// `fire_timer {namespace, claim, timer_id, now_ms}` → nasaga's `Orchestrator::fire_timer`
    /// with the claim's token: `applied` (with status) or `skipped_paused`,
    /// `skipped_fencing_lost`, `skipped_stale`.
    pub async fn fire_timer(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let claim = args.str("claim")?;
        let batch = namespace
            .claims
            .get(claim)
            .ok_or_else(|| unknown_claim(claim))?;
        let timer_id = args.str("timer_id")?;
        let timer = batch
            .timers()
            .iter()
            .find(|t| t.timer_id == timer_id)
            .ok_or_else(|| {
                HostError::new(
                    "host.unknown_timer",
                    format!("claim {claim} holds no timer {timer_id}"),
                )
            })?;
        let outcome = namespace
            .orchestrator
            .fire_timer(timer, batch.token(), args.i64("now_ms")?)
            .await?;
        Ok(match outcome {
            TimerOutcome::Applied { status } => {
                json!({"outcome": "applied", "status": status.as_str()})
            }
            TimerOutcome::SkippedPaused => json!({"outcome": "skipped_paused", "status": null}),
            TimerOutcome::SkippedFencingLost => {
                json!({"outcome": "skipped_fencing_lost", "status": null})
            }
            TimerOutcome::SkippedStale => json!({"outcome": "skipped_stale", "status": null}),
        })
    }

    /// `release_timer {namespace, claim, timer_id, now_ms, available_at_ms}` → `applied`/`lost`.
    pub async fn release_timer(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let claim = args.str("claim")?;
        let batch = namespace
            .claims
            .get(claim)
            .ok_or_else(|| unknown_claim(claim))?;
        let backend = E::Backend::backend_for(&namespace.orch.datasource)?;
        let fencing = backend
            .store()
            .release_timer(
                args.str("timer_id")?,
                batch.token(),
                args.i64("now_ms")?,
                args.i64("available_at_ms")?,
            )
            .await?;
        Ok(
            json!({"outcome": match fencing { TimerFencing::Applied => "applied", TimerFencing::Lost => "lost" }}),
        )
    }

    /// `drop_claim {namespace, claim}`: forgets a claim (its lease simply runs out).
    pub fn drop_claim(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let claim = args.str("claim")?.to_owned();
        let namespace = self.ns_mut(args)?;
        let dropped = namespace.claims.remove(&claim).is_some();
        Ok(json!({"dropped": dropped}))
    }

    /// `run_due_timers {namespace, owner, now_ms}`: nasaga's own claim-and-fire loop (its due
    /// times drift by the real time the loop takes).
    pub async fn run_due_timers(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let applied = namespace
            .orchestrator
            .run_due_timers(args.str("owner")?, args.i64("now_ms")?)
            .await?;
        Ok(json!({"applied": applied}))
    }
}
