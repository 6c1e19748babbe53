//! nasaga's Redis Streams connector (feature `redis-stream`) under the harness (docs/transports.md).
//!
//! Per namespace one stream set: a `nadis` client on the Redis under test and, per participant
//! owner, one command stream (`<prefix>:{<owner>}:cmd`, its dead letters `..:dlt` and markers
//! `..:dlt-marker`, one hash tag) carrying exactly that owner's step of one definition, as
//! nasaga's route contract asks; one `SagaRedisStreamPublisher` per stream (HMAC, nasaga's own
//! signature) and the named `SagaRedisStreamCommandConsumer`s of the owner's group. Nothing of
//! the consumer is re-implemented: a poll is nasaga's `poll_once` (XAUTOCLAIM of idle entries,
//! XREADGROUP, the closed verdict, XACK or its DLT+XACK script), a trim is
//! `safe_trim_by_group_frontier`, a backlog `stream_group_backlog`.
//!
//! The handler behind the consumer is nasaga's participant runtime on the owner's datasource with
//! the harness's step (`step.rs`): each poll says what the business code answers.
//!
//! Ops: `stream_open`, `stream_dispatch`, `stream_poll`, `stream_trim`, `stream_backlog`,
//! `stream_close`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use nadis::client::RedisClient;
use naoutbox_core::{OutboxEvent, OutboxPublishError, OutboxPublisher};
use nasaga_core::{DefinitionVersion, ServiceIdentity, StepName, WorkflowName};
use nasaga_runtime_core::{
    safe_trim_by_group_frontier, stream_group_backlog, ParticipantCommandTrust, ParticipantHandled,
    ParticipantRuntime, SagaCommandEnvelope, SagaCommandHandler, SagaRedisStreamCommandConsumer,
    SagaRedisStreamPublisher, SagaStreamAuth, SagaStreamConsumerConfig, SagaStreamVerificationKey,
    COMMAND_EVENT_TYPE,
};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{bad, Args, HostError};
use crate::sets::Registry;
use crate::step::{Decision, HarnessStep};

/// The harness's step behind a stream consumer or a gRPC command listener (`grpc.rs`): what it
/// answers is set before each poll or call.
pub struct StreamStep<E: Engine> {
    pub owner: String,
    pub datasource: String,
    pub trusts: Vec<ParticipantCommandTrust>,
    pub decision: Mutex<Decision>,
    pub calls: AtomicU32,
    pub _engine: std::marker::PhantomData<fn() -> E>,
}

impl<E: Engine> StreamStep<E> {
    /// The owner's business step behind a connector: succeeds until the harness decides otherwise.
    pub fn new(owner: &str, datasource: &str, trusts: Vec<ParticipantCommandTrust>) -> Self {
        Self {
            owner: owner.to_owned(),
            datasource: datasource.to_owned(),
            trusts,
            decision: Mutex::new(Decision::Succeeded),
            calls: AtomicU32::new(0),
            _engine: std::marker::PhantomData,
        }
    }
}

impl<E: Engine> SagaCommandHandler for StreamStep<E> {
    async fn handle_authenticated_command(
        &self,
        envelope: &SagaCommandEnvelope,
        producer: &ServiceIdentity,
    ) -> anyhow::Result<ParticipantHandled> {
        let decision = *self
            .decision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let runtime = ParticipantRuntime::<E::Backend>::with_datasource(
            &self.owner,
            self.trusts.clone(),
            &self.datasource,
        )?;
        let step = HarnessStep::deciding(decision, &self.datasource, &self.calls, E::record_effect);
        let authenticated = runtime.authenticate(producer)?;
        match envelope.phase.as_str() {
            "compensate" => authenticated.compensate(&step, envelope).await,
            "cancel" => authenticated.cancel_local(envelope).await,
            _ => authenticated.execute(&step, envelope, false).await,
        }
    }
}

/// One owner's command stream: its names, publisher and consumers.
struct OwnerStreams<E: Engine> {
    stream: String,
    dlt: String,
    group: String,
    step: Arc<StreamStep<E>>,
    publisher: SagaRedisStreamPublisher,
    consumers: BTreeMap<String, Arc<SagaRedisStreamCommandConsumer<StreamStep<E>>>>,
}

struct StreamSet<E: Engine> {
    client: Arc<RedisClient>,
    owners: BTreeMap<String, OwnerStreams<E>>,
    /// step name -> owner: the router in front of the per-stream publishers.
    steps: BTreeMap<String, String>,
    marker: String,
}

static SETS: Registry = Registry::new("stream", "host.no_streams", "stream_open first");

fn set_of<E: Engine>(namespace: &str) -> anyhow::Result<Arc<StreamSet<E>>> {
    SETS.get::<StreamSet<E>>(namespace)
}

fn hex_key(value: &Value) -> anyhow::Result<Vec<u8>> {
    let text = value
        .as_str()
        .ok_or_else(|| bad("a key secret is hex text"))?;
    hex::decode(text).map_err(|_| bad("a key secret is hex text"))
}

/// `signing: {key_id, secret}` and `verifying: {key_id: secret}` (secrets in hex).
fn auths(
    args: &Args<'_>,
    producer: &ServiceIdentity,
) -> anyhow::Result<(SagaStreamAuth, SagaStreamAuth)> {
    let signing = Args(args.value("signing")?);
    let publish = SagaStreamAuth::Hmac {
        key_id: signing.str("key_id")?.to_owned(),
        key: hex_key(signing.value("secret")?)?,
    };
    let mut keys = BTreeMap::new();
    let verifying = args
        .value("verifying")?
        .as_object()
        .ok_or_else(|| bad("verifying: {key_id: secret}"))?;
    for (key_id, secret) in verifying {
        keys.insert(
            key_id.clone(),
            SagaStreamVerificationKey::new(producer.clone(), hex_key(secret)?)?,
        );
    }
    Ok((publish, SagaStreamAuth::HmacKeyring { keys }))
}

/// Routes each command event to the stream of the owner of its step (the host's router; the
/// XADD and the signature are nasaga's publisher's).
struct Router<'a, E: Engine>(&'a StreamSet<E>);

#[async_trait::async_trait]
impl<E: Engine> OutboxPublisher for Router<'_, E> {
    async fn publish(&self, event: &OutboxEvent) -> Result<(), OutboxPublishError> {
        let step = serde_json::from_slice::<Value>(&event.payload)
            .ok()
            .and_then(|v| v.get("step").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let owner = self
            .0
            .steps
            .get(&step)
            .and_then(|owner| self.0.owners.get(owner))
            .ok_or_else(|| OutboxPublishError::new("no stream for this step"))?;
        owner.publisher.publish(event).await
    }
}

impl<E: Engine> Host<E> {
    /// `stream_open {namespace, redis_url, prefix, routes: [{owner, step}], consumers: [name],
    /// group, min_idle_ms, signing, verifying}`: the namespace's stream set (see module doc).
    pub async fn stream_open(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let prefix = args.str("prefix")?;
        let marker = format!("ratchet-{}", namespace.name);
        let config: nadis::config::RedisConfig = serde_json::from_value(json!({
            "url": args.str("redis_url")?,
            "namespace": marker,
            "profile": "RustV2",
        }))
        .map_err(|e| bad(format!("redis config: {e}")))?;
        let client = RedisClient::connect(config)
            .await
            .map_err(|e| HostError::new("host.redis", format!("redis connect failed: {e}")))?;
        let producer = namespace.orch_identity.clone();
        let (publish, verify) = auths(args, &producer)?;
        let group = args.str("group")?.to_owned();
        let min_idle_ms = args.opt_i64("min_idle_ms")?.unwrap_or(1).max(1) as u64;
        let names = args.str_list("consumers")?;
        let [definition] = namespace.known.values().collect::<Vec<_>>()[..] else {
            return Err(bad("stream_open needs exactly one known definition"));
        };
        let mut trusts = Vec::new();
        trusts.push(ParticipantCommandTrust::new(
            producer.clone(),
            definition.name().clone(),
            definition.version(),
            definition.digest(),
        )?);
        let mut owners = BTreeMap::new();
        let mut steps = BTreeMap::new();
        for route in args
            .value("routes")?
            .as_array()
            .ok_or_else(|| bad("routes: [...]"))?
        {
            let route = Args(route);
            let owner = route.str("owner")?.to_owned();
            let step = route.str("step")?.to_owned();
            let role = namespace.owner(&owner)?;
            let base = format!("{prefix}:{{{owner}}}");
            let stream = format!("{base}:cmd");
            let dlt = format!("{base}:dlt");
            let handler = Arc::new(StreamStep::<E>::new(
                &owner,
                &role.datasource,
                trusts.clone(),
            ));
            let publisher = SagaRedisStreamPublisher::new(
                Arc::clone(&client),
                BTreeMap::from([(COMMAND_EVENT_TYPE.to_owned(), stream.clone())]),
                publish.clone(),
                None,
            )?;
            let mut consumers = BTreeMap::new();
            for name in &names {
                let consumer = SagaRedisStreamCommandConsumer::new(
                    Arc::clone(&handler),
                    SagaStreamConsumerConfig {
                        stream: stream.clone(),
                        dlt_stream: dlt.clone(),
                        marker_prefix: format!("{base}:dlt-marker"),
                        group: group.clone(),
                        consumer: name.clone(),
                        batch: 10,
                        block_ms: 1,
                        handler_timeout_ms: 30_000,
                        min_idle_ms,
                        replay_from_beginning: true,
                        marker_ttl_seconds: 3_600,
                        auth: verify.clone(),
                        producer: producer.clone(),
                        key_tag: None,
                    },
                    WorkflowName::new(definition.name().as_str())?,
                    DefinitionVersion::new(definition.version().get())?,
                    definition.digest(),
                    StepName::new(&step)?,
                )?;
                consumer.ensure_group(&client).await?;
                consumers.insert(name.clone(), Arc::new(consumer));
            }
            steps.insert(step, owner.clone());
            owners.insert(
                owner,
                OwnerStreams {
                    stream,
                    dlt,
                    group: group.clone(),
                    step: handler,
                    publisher,
                    consumers,
                },
            );
        }
        let streams: BTreeMap<String, Value> = owners
            .iter()
            .map(|(o, s)| {
                (
                    o.clone(),
                    json!({"stream": s.stream, "dead_letters": s.dlt}),
                )
            })
            .collect();
        let set = StreamSet::<E> {
            client,
            owners,
            steps,
            marker: format!("nasa:protocol:ratchet-{}", namespace.name),
        };
        SETS.insert(namespace.name.clone(), set);
        Ok(json!({"streams": streams}))
    }

    /// `stream_dispatch {namespace, limit?}`: nasaga's outbox dispatcher on the orchestrator's
    /// outbox, publishing through the stream publishers.
    pub async fn stream_dispatch(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let report = E::dispatch_outbox(
            &namespace.orch.datasource,
            &Router(&set),
            args.u32_or("limit", 100)?,
        )
        .await?;
        Ok(json!({
            "published": report.published,
            "total": report.total,
            "failed": report.first_error.is_some(),
        }))
    }

    /// `stream_poll {namespace, owner, consumer, decision?}`: one `poll_once` round.
    pub async fn stream_poll(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let owner = set
            .owners
            .get(args.str("owner")?)
            .ok_or_else(|| bad("no stream for this owner"))?;
        let consumer = owner
            .consumers
            .get(args.str("consumer")?)
            .ok_or_else(|| bad("no such consumer"))?;
        let text = args.opt_str("decision")?.unwrap_or("succeeded");
        let decision =
            Decision::parse(text).ok_or_else(|| bad(format!("unknown decision {text}")))?;
        *owner
            .step
            .decision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = decision;
        let before = owner.step.calls.load(Ordering::SeqCst);
        let report = consumer.poll_once(&set.client).await?;
        Ok(json!({
            "acked": report.acked,
            "dead_lettered": report.dead_lettered,
            "retained": report.retained,
            "reclaimed": report.reclaimed,
            "deleted_pending": report.deleted_pending,
            "auth_rejected": report.auth_rejected,
            "handled": report.handled,
            "handler_calls": owner.step.calls.load(Ordering::SeqCst) - before,
        }))
    }

    /// `stream_trim {namespace, owner}`: `safe_trim_by_group_frontier` on the owner's stream.
    pub async fn stream_trim(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let owner = set
            .owners
            .get(args.str("owner")?)
            .ok_or_else(|| bad("no stream for this owner"))?;
        let removed = safe_trim_by_group_frontier(&set.client, &owner.stream).await?;
        Ok(json!({"removed": removed}))
    }

    /// `stream_backlog {namespace, owner, group?, now_ms}`: `stream_group_backlog`.
    pub async fn stream_backlog(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let owner = set
            .owners
            .get(args.str("owner")?)
            .ok_or_else(|| bad("no stream for this owner"))?;
        let group = args.opt_str("group")?.unwrap_or(&owner.group);
        let (pending, age) =
            stream_group_backlog(&set.client, &owner.stream, group, args.i64("now_ms")?).await?;
        Ok(json!({"pending": pending, "oldest_age_ms": age}))
    }

    /// `stream_close {namespace}`: forgets the set and deletes nadis's protocol marker key (the
    /// harness deletes its streams).
    pub async fn stream_close(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?;
        if let Some(set) = SETS.remove::<StreamSet<E>>(name) {
            let mut del = redis::cmd("DEL");
            del.arg(&set.marker);
            let _: Result<i64, _> = set.client.execute_raw(&del).await;
            set.client.shutdown().await;
        }
        Ok(json!({"closed": true}))
    }
}
