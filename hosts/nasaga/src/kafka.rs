//! nasaga's Kafka command consumer (feature `kafka`, crate `nafka`) under the harness
//! (docs/transports.md, "nasaga's Kafka connector").
//!
//! Per namespace one consumer set: a `nafka::KafkaProxy` on the broker under test and, for one
//! participant owner, nasaga's `SagaKafkaCommandConsumer` on that owner's command topic (its
//! route: the orchestrator's identity, the one known definition, the owner's step), registered
//! in nafka's hosted consumer runtime with its group. Nothing of the delivery is re-implemented:
//! nafka's owner thread polls, pauses and seeks a partition whose record failed, backs off,
//! produces dead letters (`<topic>.DLT`, durability first) and commits the contiguous done
//! frontier; nasaga's adapter decides each record's verdict and calls the manual ACK only after
//! the participant's transaction committed or the inbox absorbed a duplicate.
//!
//! The consumer runs by itself (it is not stepped): the harness publishes, waits and reads the
//! broker raw (committed offsets, dead letters) and the participant's database. What the host
//! adds is observation: a thin `SingleConsumer` in front of nasaga's records each delivery's
//! partition, offset, attempt and result in a journal, and the handler (nasaga's participant
//! runtime with the harness's step, `step.rs`) answers by a plan the harness set per saga when it
//! published: fail transiently `fail` times, then `decision`. After a unit committed the handler
//! passes the crash point `kafka_committed` (src/faults.rs): between the database commit and
//! the offset commit.
//!
//!
//! A second member (`kafka_join`): another `KafkaProxy` and nasaga consumer in the same group,
//! sharing the handler (plans, journal), so the group rebalances and a partition is handed over;
//! a plan's `hold` keeps its first attempt's unit running (before its transaction) until
//! `kafka_release`, so the hand-over happens while that unit runs. `kafka_leave` closes it.
//! While it joins, the host watches the first member's group health (`watch_revoke`): when
//! nafka's owner thread published the revoke, and what it had paused just before.
//!
//! Ops: `kafka_open`, `kafka_dispatch`, `kafka_journal`, `kafka_wait`, `kafka_join`,
//! `kafka_release`, `kafka_leave`, `kafka_close`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nafka::{
    AckMode, ConsumerRuntime, GroupHealth, GroupSpec, KafkaProxy, KafkaRecord, SingleConsumer,
};
use naoutbox_core::{OutboxEvent, OutboxPublishError, OutboxPublisher};
use nasaga_core::{DefinitionVersion, ServiceIdentity, StepName, WorkflowName};
use nasaga_runtime_core::{
    CommandDeliveryPolicy, ParticipantCommandTrust, ParticipantHandled, ParticipantRuntime,
    SagaCommandEnvelope, SagaCommandHandler, SagaCommandRoute, SagaKafkaCommandConsumer,
    SagaKafkaCommandConsumerConfig, COMMAND_EVENT_TYPE,
};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{bad, Args, HostError};
use crate::sets::Registry;
use crate::step::{Decision, HarnessStep};

/// What the business code answers for one saga's command: `fail` transient failures, then
/// `decision`.
#[derive(Clone, Copy)]
struct Plan {
    fail: u32,
    decision: Decision,
    /// The first attempt waits (its unit begun, nothing written) until `kafka_release`.
    hold: bool,
}

/// How long a held unit waits for `kafka_release` at most.
const HOLD_LIMIT: Duration = Duration::from_secs(20);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The harness's step behind nasaga's Kafka consumer, answering by the saga's plan.
struct KafkaStep<E: Engine> {
    owner: String,
    datasource: String,
    trusts: Vec<ParticipantCommandTrust>,
    plans: Mutex<BTreeMap<String, Plan>>,
    attempts: Mutex<BTreeMap<String, u32>>,
    calls: AtomicU32,
    journal: Mutex<Vec<Value>>,
    /// Held sagas -> released yet (`Plan::hold`, `kafka_release`).
    held: Mutex<BTreeMap<String, bool>>,
    /// A planted bug of the harness's own (`kafka_open planted_bug: "skip_unit"`): the handler
    /// answers "duplicate" without running the unit, so nasaga acknowledges a record whose unit
    /// never committed. The suite must catch it (S-KAFKA-02); nasaga's code is untouched.
    skip_units: bool,
    _engine: std::marker::PhantomData<fn() -> E>,
}

impl<E: Engine> SagaCommandHandler for KafkaStep<E> {
    async fn handle_authenticated_command(
        &self,
        envelope: &SagaCommandEnvelope,
        producer: &ServiceIdentity,
    ) -> anyhow::Result<ParticipantHandled> {
        let saga = envelope.saga_id.to_string();
        if self.skip_units {
            return Ok(ParticipantHandled::Duplicate);
        }
        let plan = lock(&self.plans).get(&saga).copied().unwrap_or(Plan {
            fail: 0,
            decision: Decision::Succeeded,
            hold: false,
        });
        let attempt = {
            let mut attempts = lock(&self.attempts);
            let n = attempts.entry(saga.clone()).or_insert(0);
            *n += 1;
            *n
        };
        if plan.hold && attempt == 1 {
            self.hold(&saga).await;
        }
        let decision = if attempt <= plan.fail {
            Decision::Retryable
        } else {
            plan.decision
        };
        let runtime = ParticipantRuntime::<E::Backend>::with_datasource(
            &self.owner,
            self.trusts.clone(),
            &self.datasource,
        )?;
        let step = HarnessStep::deciding(decision, &self.datasource, &self.calls, E::record_effect);
        let authenticated = runtime.authenticate(producer)?;
        let result = authenticated.execute(&step, envelope, false).await;
        let outcome = match &result {
            Ok(ParticipantHandled::Duplicate) => "duplicate",
            Ok(_) => "committed",
            Err(_) => "not_committed",
        };
        lock(&self.journal).push(json!({
            "kind": "handled", "saga": saga, "attempt": attempt,
            "decision": decision.as_str(), "outcome": outcome,
        }));
        if result.is_ok() {
            crate::faults::reached("kafka_committed"); // between COMMIT and the offset commit
        }
        result
    }
}

impl<E: Engine> KafkaStep<E> {
    /// The unit has begun and waits for `kafka_release` (or `HOLD_LIMIT`) before it goes on.
    async fn hold(&self, saga: &str) {
        lock(&self.held).insert(saga.to_owned(), false);
        lock(&self.journal).push(json!({"kind": "held", "saga": saga}));
        let deadline = Instant::now() + HOLD_LIMIT;
        while Instant::now() < deadline && !lock(&self.held).get(saga).copied().unwrap_or(true) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lock(&self.journal).push(json!({"kind": "released", "saga": saga}));
    }
}

/// nasaga's consumer with a journal of what nafka handed it (partition, offset, attempt, result).
struct Journaled<E: Engine> {
    inner: SagaKafkaCommandConsumer<KafkaStep<E>>,
    step: Arc<KafkaStep<E>>,
    started: Instant,
    /// Which member of the group delivered (`c1`, or `c2` once `kafka_join` ran).
    member: &'static str,
    /// A planted bug of the harness's own (`kafka_join planted_bug: "trust_old_owner"`): this
    /// member acknowledges, without running it, a record whose unit the handler has begun for
    /// another member (a held unit), as if the old owner's unit were done. nasaga's code is
    /// untouched; the suite must catch the offset moving past a unit not committed (S-KAFKA-02).
    trust_old_owner: bool,
}

impl<E: Engine> SingleConsumer for Journaled<E> {
    type Message = SagaCommandEnvelope;

    fn topics(&self) -> Vec<String> {
        self.inner.topics()
    }
    fn event(&self) -> String {
        self.inner.event()
    }
    fn group(&self) -> GroupSpec {
        self.inner.group()
    }
    fn id(&self) -> &'static str {
        self.inner.id()
    }
    fn ack_mode(&self) -> AckMode {
        self.inner.ack_mode()
    }

    async fn consume(&self, record: KafkaRecord<Self::Message>) -> nafka::Result<()> {
        let entry = json!({
            "kind": "delivered",
            "saga": record.value.saga_id.to_string(),
            "partition": record.ctx.partition,
            "offset": record.ctx.offset,
            "delivery_attempt": record.ctx.delivery_attempt,
            "member": self.member,
        });
        let saga = record.value.saga_id.to_string();
        let running_elsewhere = lock(&self.step.held).get(&saga) == Some(&false);
        let result = if self.trust_old_owner && running_elsewhere {
            record.ack()
        } else {
            self.inner.consume(record).await
        };
        let mut entry = entry;
        entry["ok"] = json!(result.is_ok());
        entry["error"] = json!(result.as_ref().err().map(error_kind));
        entry["at_ms"] = json!(self.started.elapsed().as_millis() as u64);
        lock(&self.step.journal).push(entry);
        result
    }
}

/// The closed kind of nafka's error, never its text.
fn error_kind(error: &nafka::NafkaError) -> &'static str {
    match error {
        nafka::NafkaError::HandlerDeadLetter(_) => "dead_letter",
        nafka::NafkaError::HandlerDeferred(_) => "deferred",
        // the record's partition was revoked while its unit ran: the old generation's ACK is refused
        nafka::NafkaError::AckExpired => "ack_expired",
        nafka::NafkaError::Broker(_) => "retry",
        _ => "other",
    }
}

struct KafkaSet<E: Engine> {
    proxy: KafkaProxy,
    consumers: Option<ConsumerRuntime>,
    step: Arc<KafkaStep<E>>,
    topic: String,
    /// What `kafka_join` needs to open a second member like the first.
    config: SagaKafkaCommandConsumerConfig,
    kafka: Value,
    started: Instant,
    /// The second member of the group (`kafka_join`), until `kafka_leave`.
    joined: Option<(KafkaProxy, ConsumerRuntime)>,
}

static SETS: Registry = Registry::new("kafka", "host.no_kafka", "kafka_open first");

fn set_of<E: Engine>(namespace: &str) -> anyhow::Result<Arc<Mutex<KafkaSet<E>>>> {
    SETS.get::<Mutex<KafkaSet<E>>>(namespace)
}

/// Publishes each command event to the owner's topic, keyed by its saga (the partition is the
/// broker client's murmur2 of the key), after noting the saga's plan for the handler.
struct Publisher<'a, E: Engine> {
    proxy: &'a KafkaProxy,
    step: &'a KafkaStep<E>,
    topic: &'a str,
    /// saga id -> (plan, partition); a saga not named succeeds, on its key's partition.
    plans: BTreeMap<String, (Plan, Option<i32>)>,
    sent: Mutex<Vec<Value>>,
}

#[async_trait::async_trait]
impl<E: Engine> OutboxPublisher for Publisher<'_, E> {
    async fn publish(&self, event: &OutboxEvent) -> Result<(), OutboxPublishError> {
        let envelope: Value = serde_json::from_slice(&event.payload)
            .map_err(|_| OutboxPublishError::new("the command payload is not JSON"))?;
        let saga = envelope
            .get("saga_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (plan, partition) = self.plans.get(&saga).copied().unwrap_or((
            Plan {
                fail: 0,
                decision: Decision::Succeeded,
                hold: false,
            },
            None,
        ));
        lock(&self.step.plans).insert(saga.clone(), plan);
        let mut record = self
            .proxy
            .publish_raw(self.topic, &event.payload)
            .event(COMMAND_EVENT_TYPE)
            .key(saga.clone());
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        let delivery = record
            .send()
            .await
            .map_err(|_| OutboxPublishError::new("the broker did not acknowledge the command"))?;
        lock(&self.sent).push(json!({
            "saga": saga,
            "partition": delivery.partition,
            "offset": delivery.offset,
            "payload": String::from_utf8_lossy(&event.payload),
        }));
        Ok(())
    }
}

/// One member of the group: a `KafkaProxy` on `kafka` (the client named `client`) and nasaga's
/// command consumer behind the journal, started in nafka's runtime.
async fn start_member<E: Engine>(
    kafka: Value,
    step: &Arc<KafkaStep<E>>,
    config: SagaKafkaCommandConsumerConfig,
    started: Instant,
    member: &'static str,
    trust_old_owner: bool,
) -> anyhow::Result<(KafkaProxy, ConsumerRuntime)> {
    let kafka: nafka::KafkaConfig =
        serde_json::from_value(kafka).map_err(|e| bad(format!("kafka config: {e}")))?;
    let proxy = KafkaProxy::connect(kafka)
        .map_err(|e| HostError::new("host.kafka", format!("kafka connect failed: {e}")))?;
    let consumer = Journaled {
        inner: SagaKafkaCommandConsumer::new(Arc::clone(step), config),
        step: Arc::clone(step),
        started,
        member,
        trust_old_owner,
    };
    let consumers = proxy
        .consumers()
        .register(consumer)?
        .start()
        .await
        .map_err(|e| HostError::new("host.kafka", format!("consumer start failed: {e}")))?;
    Ok((proxy, consumers))
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

fn paused_of(health: &GroupHealth) -> Value {
    let paused: Vec<Value> = health
        .paused
        .iter()
        .map(|(tp, reason)| json!([tp.partition, format!("{reason:?}")]))
        .collect();
    json!(paused)
}

/// What the first member did while the second joined, read from its group health every 2 ms
/// on a thread of its own (so nothing the join does on the host's runtime delays a look) until
/// `watching` drops: `revoked_ms` (the set's clock), the first look at which its assignment was no
/// longer the one it held when the join began (the eager revoke as nafka's owner thread publishes
/// it, so at or after the revoke itself), or null; `held`, that assignment; `then`, the one seen
/// at that look; `paused`, its paused partitions and nafka's reasons at the look before.
fn watch_revoke(
    first: KafkaProxy,
    group: String,
    started: Instant,
    watching: Arc<AtomicBool>,
) -> Value {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return Value::Null;
    };
    let look = || runtime.block_on(first.group_health(&group)).ok();
    let Some(mut last) = look() else {
        return Value::Null;
    };
    let partitions = |h: &GroupHealth| h.assignment.iter().map(|tp| tp.partition).collect();
    let held: Vec<i32> = partitions(&last);
    loop {
        std::thread::sleep(Duration::from_millis(2));
        let Some(now) = look() else {
            break;
        };
        let then: Vec<i32> = partitions(&now);
        if then != held {
            let at = elapsed_ms(started);
            return json!({"revoked_ms": at, "held": held, "then": then, "paused": paused_of(&last)});
        }
        last = now;
        if !watching.load(Ordering::SeqCst) {
            break;
        }
    }
    json!({"revoked_ms": null, "held": held, "paused": paused_of(&last)})
}

impl<E: Engine> Host<E> {
    /// `kafka_open {namespace, bootstrap, topic, owner, step, group, client, instance?,
    /// backoff_ms, heartbeat_ms?, max_retries, planted_bug?}`: nasaga's command consumer for `owner` on `topic`, started in nafka's
    /// runtime (see module doc). The topic and its `.DLT` exist already (the harness's).
    pub async fn kafka_open(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let topic = args.str("topic")?.to_owned();
        let owner = args.str("owner")?.to_owned();
        let step_name = args.str("step")?.to_owned();
        let role = namespace.owner(&owner)?;
        let producer = namespace.orch_identity.clone();
        let [definition] = namespace.known.values().collect::<Vec<_>>()[..] else {
            return Err(bad("kafka_open needs exactly one known definition"));
        };
        let trusts = vec![ParticipantCommandTrust::new(
            producer.clone(),
            definition.name().clone(),
            definition.version(),
            definition.digest(),
        )?];
        let step = Arc::new(KafkaStep::<E> {
            owner: owner.clone(),
            datasource: role.datasource.clone(),
            trusts,
            plans: Mutex::new(BTreeMap::new()),
            attempts: Mutex::new(BTreeMap::new()),
            calls: AtomicU32::new(0),
            journal: Mutex::new(Vec::new()),
            held: Mutex::new(BTreeMap::new()),
            skip_units: match args.opt_str("planted_bug")? {
                None | Some("trust_old_owner") => false, // trust_old_owner: `kafka_join`'s
                Some("skip_unit") => true,
                Some(other) => return Err(bad(format!("unknown planted bug {other}"))),
            },
            _engine: std::marker::PhantomData,
        });
        let route = SagaCommandRoute::new(
            producer,
            WorkflowName::new(definition.name().as_str())?,
            DefinitionVersion::new(definition.version().get())?,
            definition.digest(),
            StepName::new(&step_name)?,
        )?;
        let config = SagaKafkaCommandConsumerConfig::new(
            BTreeMap::from([(topic.clone(), route)]),
            args.str("group")?,
            CommandDeliveryPolicy {
                max_retries: args.u32_or("max_retries", 16)?,
            },
        )?;
        let backoff = args.opt_i64("backoff_ms")?.unwrap_or(300).max(1);
        let heartbeat = args.opt_i64("heartbeat_ms")?.unwrap_or(1000).max(1);
        // Static membership (`instance`): a host started after a kill takes the dead member's
        // place at once instead of waiting out its session.
        let mut consumer_properties = serde_json::Map::new();
        if let Some(instance) = args.opt_str("instance")? {
            consumer_properties.insert("group.instance.id".into(), json!(instance));
        }
        // Small intervals so a run settles in well under a second; the semantics are nafka's.
        let kafka = json!({
            "client_name": args.str("client")?,
            "bootstrap_servers": args.str("bootstrap")?,
            "producer": {"acks": "all", "enable_idempotence": true, "linger_ms": 0,
                         "request_timeout_ms": 5000, "delivery_timeout_ms": 10000},
            "consumer": {"auto_offset_reset": "earliest", "session_timeout_ms": 6000,
                         "heartbeat_interval_ms": heartbeat, "fetch_wait_max_ms": 20,
                         "properties": consumer_properties},
            "behavior": {"commit_interval_ms": 50, "poll_timeout_ms": 20,
                         "start_consume_delay_ms": 0, "consume_retry_backoff_ms": backoff,
                         "max_consume_attempts": 0, "rebalance_commit_timeout_ms": 3000,
                         "dlt_retry_initial_ms": 100, "dlt_retry_max_ms": 1000,
                         "shutdown_timeout_ms": 10000, "publish_timeout_ms": 10000,
                         "control_timeout_ms": 10000},
            "properties": {"log_level": "3"},
        });
        let started = Instant::now();
        let (proxy, consumers) =
            start_member(kafka.clone(), &step, config.clone(), started, "c1", false).await?;
        let groups = consumers.groups().to_vec();
        let set = KafkaSet::<E> {
            proxy,
            consumers: Some(consumers),
            step,
            topic,
            config,
            kafka,
            started,
            joined: None,
        };
        SETS.insert(namespace.name.clone(), Mutex::new(set));
        Ok(json!({"groups": groups}))
    }

    /// `kafka_dispatch {namespace, plans?: {saga_id: {fail, decision, partition}}, limit?}`:
    /// nasaga's outbox dispatcher on the orchestrator's outbox, publishing each command (its
    /// saga's plan noted first) → `{published: [{saga, partition, offset, payload}]}`.
    pub async fn kafka_dispatch(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let (proxy, step, topic) = {
            let guard = lock(&set);
            (
                guard.proxy.clone(),
                Arc::clone(&guard.step),
                guard.topic.clone(),
            )
        };
        let mut plans = BTreeMap::new();
        if let Ok(given) = args.value("plans") {
            for (saga, plan) in given
                .as_object()
                .ok_or_else(|| bad("plans: {saga: plan}"))?
            {
                let plan = Args(plan);
                let text = plan.opt_str("decision")?.unwrap_or("succeeded");
                let decision =
                    Decision::parse(text).ok_or_else(|| bad(format!("unknown decision {text}")))?;
                let partition = plan.opt_i64("partition")?.map(|p| p as i32);
                let fail = plan.u32_or("fail", 0)?;
                let hold = plan.0.get("hold").and_then(Value::as_bool).unwrap_or(false);
                let plan = Plan {
                    fail,
                    decision,
                    hold,
                };
                plans.insert(saga.clone(), (plan, partition));
            }
        }
        let publisher = Publisher {
            proxy: &proxy,
            step: &step,
            topic: &topic,
            plans,
            sent: Mutex::new(Vec::new()),
        };
        let report = E::dispatch_outbox(
            &namespace.orch.datasource,
            &publisher,
            args.u32_or("limit", 100)?,
        )
        .await?;
        let sent = std::mem::take(&mut *lock(&publisher.sent));
        Ok(json!({"published": sent, "failed": report.first_error.is_some()}))
    }

    /// `kafka_journal {namespace}` → `{entries: [...], calls}`: what happened since the last
    /// read (deliveries with their result, handler outcomes), drained.
    pub async fn kafka_journal(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let step = Arc::clone(&lock(&set).step);
        let entries = std::mem::take(&mut *lock(&step.journal));
        Ok(json!({"entries": entries, "calls": step.calls.load(Ordering::SeqCst)}))
    }

    /// `kafka_wait {ms}`: the host idles while its consumer runs (a call the harness can hold a
    /// crash point's `kill_at` on).
    pub async fn kafka_wait(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let ms = args.opt_i64("ms")?.unwrap_or(100).clamp(0, 60_000) as u64;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(json!({"waited_ms": ms}))
    }

    /// `kafka_join {namespace, client, client_id_prefix?, planted_bug?}` → `{assignment:
    /// [partition], began_ms, assigned_ms, first}`: a second member of the group (another client,
    /// dynamic membership so `kafka_leave` hands its partitions back at once) sharing the handler;
    /// returns once nafka reports it assigned. `client_id_prefix`: nafka's, in front of its
    /// `client.id` (the broker's name for a dynamic member, so its place in the assignor's order).
    /// `began_ms`, `assigned_ms`: the set's clock (the journal's `at_ms`); `first`: what the first
    /// member did meanwhile (`watch_revoke`).
    /// Planted bug `trust_old_owner`: see `Journaled::trust_old_owner`.
    pub async fn kafka_join(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let (mut kafka, step, config, started, group, first) = {
            let guard = lock(&set);
            (
                guard.kafka.clone(),
                Arc::clone(&guard.step),
                guard.config.clone(),
                guard.started,
                guard
                    .consumers
                    .as_ref()
                    .and_then(|c| c.groups().first().cloned()),
                guard.proxy.clone(),
            )
        };
        let group = group.ok_or_else(|| bad("kafka_join: the first member has no group"))?;
        kafka["client_name"] = json!(args.str("client")?);
        kafka["consumer"]["properties"] = json!({});
        if let Some(prefix) = args.opt_str("client_id_prefix")? {
            kafka["client_id_prefix"] = json!(prefix);
        }
        let trust = match args.opt_str("planted_bug")? {
            Some("trust_old_owner") => true,
            None | Some("skip_unit") => false,
            Some(other) => return Err(bad(format!("unknown planted bug {other}"))),
        };
        let began_ms = elapsed_ms(started);
        let watching = Arc::new(AtomicBool::new(true));
        let watcher = {
            let (group, watching) = (group.clone(), Arc::clone(&watching));
            std::thread::spawn(move || watch_revoke(first, group, started, watching))
        };
        let joined = async {
            let (proxy, consumers) =
                start_member(kafka, &step, config, started, "c2", trust).await?;
            let deadline = Instant::now() + Duration::from_secs(30);
            let ready = proxy
                .await_group_ready(
                    &group,
                    nafka::ReadyRequirement::Assigned { min_partitions: 1 },
                    deadline,
                )
                .await
                .map_err(|e| {
                    HostError::new(
                        "host.kafka",
                        format!("the second member got no partition: {e}"),
                    )
                })?;
            anyhow::Ok((proxy, consumers, ready, elapsed_ms(started)))
        }
        .await;
        watching.store(false, Ordering::SeqCst);
        // The watcher's next look sees the flag: a wait of a few milliseconds at most.
        let watched = watcher.join().unwrap_or(Value::Null);
        let (proxy, consumers, ready, assigned_ms) = joined?;
        let assignment: Vec<i32> = ready.assignment.iter().map(|tp| tp.partition).collect();
        lock(&set).joined = Some((proxy, consumers));
        Ok(json!({"assignment": assignment, "began_ms": began_ms,
                  "assigned_ms": assigned_ms, "first": watched}))
    }

    /// `kafka_release {namespace}` → `{released}`: every held unit goes on.
    pub async fn kafka_release(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let step = Arc::clone(&lock(&set).step);
        let mut held = lock(&step.held);
        let released = held.values().filter(|r| !**r).count();
        held.values_mut().for_each(|r| *r = true);
        Ok(json!({"released": released}))
    }

    /// `kafka_leave {namespace, partitions?}` → `{left}`: the second member shut down (its
    /// partitions go back to the first at the next rebalance); with `partitions`, returns once the
    /// first member holds that many again, so what the harness does next meets no rebalance.
    pub async fn kafka_leave(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let (joined, first, group) = {
            let mut guard = lock(&set);
            let group = guard
                .consumers
                .as_ref()
                .and_then(|c| c.groups().first().cloned());
            (guard.joined.take(), guard.proxy.clone(), group)
        };
        let left = joined.is_some();
        if let Some((proxy, consumers)) = joined {
            drop(consumers);
            let _ = proxy.shutdown().await;
        }
        if let (Some(partitions), Some(group), true) = (args.opt_i64("partitions")?, group, left) {
            let deadline = Instant::now() + Duration::from_secs(30);
            let wanted = nafka::ReadyRequirement::Assigned {
                min_partitions: partitions.max(1) as usize,
            };
            first
                .await_group_ready(&group, wanted, deadline)
                .await
                .map_err(|e| {
                    HostError::new(
                        "host.kafka",
                        format!("the first member did not get its partitions back: {e}"),
                    )
                })?;
        }
        Ok(json!({"left": left}))
    }

    /// `kafka_close {namespace}`: nafka's shutdown (consumers stopped, the done frontier
    /// committed, producers flushed), the set forgotten.
    pub async fn kafka_close(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?;
        if let Some(set) = SETS.remove::<Mutex<KafkaSet<E>>>(name) {
            let (proxy, consumers, joined) = {
                let mut guard = lock(&set);
                (
                    guard.proxy.clone(),
                    guard.consumers.take(),
                    guard.joined.take(),
                )
            };
            lock(&lock(&set).step.held)
                .values_mut()
                .for_each(|r| *r = true);
            if let Some((proxy, consumers)) = joined {
                drop(consumers);
                let _ = proxy.shutdown().await;
            }
            drop(consumers);
            let _ = proxy.shutdown().await;
        }
        Ok(json!({"closed": true}))
    }
}
