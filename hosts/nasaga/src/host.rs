//! The host: namespaces, their datasources and runtimes, and the op table.
//!
//! A namespace is one harness example's world: an orchestrator datasource (schema/database
//! `nsg_<ns>_orch`) and one datasource per participant owner (`nsg_<ns>_<owner>`), each created
//! by the wrapper's own `ensure_*_schema_for`.
//!
//! Datasource names are process-global, registered once, and natx-core caps a process at 128
//! of them (`MAX_MANAGED_DATASOURCES * 2` observation slots). So the host registers *slots*
//! (`slot.<n>`), each with its own tiny pool whose new connections are pointed at the container
//! the slot currently serves; a namespace borrows one slot per role and gives it back on close,
//! after its idle connections are closed. A run can open and close any number of namespaces in
//! one process; at most `128 / (1 + owners)` are open at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nasaga_backend::{TimerClaimBatch, TimerFencingTokenIssuer};
use nasaga_core::{ServiceIdentity, WorkflowDefinition};
use nasaga_runtime_core::{
    DefinitionRegistry, Orchestrator, OrchestratorConfig, ParticipantCommandTrust, TenantActionRate,
};
use serde_json::{json, Value};

use crate::engine::{Engine, Target};
use crate::protocol::{bad, Args, HostError};

/// A registered datasource name with its pool, lent to one namespace role at a time.
pub struct Slot<E: Engine> {
    pub datasource: String,
    pub pool: E::Pool,
    pub target: Target,
    pub in_use: bool,
}

/// One datasource of a namespace: the slot it borrowed and the container it points at.
pub struct Role {
    pub datasource: String,
    pub container: String,
    pub slot: usize,
}

pub struct Namespace<E: Engine> {
    pub name: String,
    pub orch: Role,
    pub owners: BTreeMap<String, Role>,
    pub orch_identity: ServiceIdentity,
    /// Shared with the gRPC result listeners (`grpc.rs`).
    pub orchestrator: std::sync::Arc<Orchestrator<E::Backend>>,
    /// Definitions registered directly (`register_definition`), outside the catalog.
    pub static_defs: Vec<WorkflowDefinition>,
    /// The registry last loaded from the catalog (`load_dynamic_catalog_for`).
    pub catalog_registry: DefinitionRegistry,
    /// Every definition this host has seen for the namespace, by digest: participant trust
    /// and step lookup (cancel mode, allow_unknown) use it.
    pub known: BTreeMap<String, WorkflowDefinition>,
    /// Timer claims held by this host: nasaga's fencing tokens cannot be copied or rebuilt.
    pub claims: BTreeMap<String, TimerClaimBatch>,
    /// Step-handler invocations per owner (including ones whose transaction rolled back).
    pub calls: BTreeMap<String, AtomicU32>,
}

impl<E: Engine> Namespace<E> {
    /// A participant's trust in the orchestrator's commands, one per definition this host has
    /// seen; refused when there is none (a participant needs at least one).
    pub fn command_trusts(&self) -> anyhow::Result<Vec<ParticipantCommandTrust>> {
        let mut trusts = Vec::new();
        for definition in self.known.values() {
            trusts.push(ParticipantCommandTrust::new(
                self.orch_identity.clone(),
                definition.name().clone(),
                definition.version(),
                definition.digest(),
            )?);
        }
        if trusts.is_empty() {
            return Err(HostError::new(
                "host.no_definitions",
                "no definition is known yet: a participant needs at least one command trust",
            )
            .into());
        }
        Ok(trusts)
    }

    pub fn owner(&self, owner: &str) -> anyhow::Result<&Role> {
        self.owners.get(owner).ok_or_else(|| {
            HostError::new(
                "host.unknown_owner",
                format!("namespace {} has no participant {owner}", self.name),
            )
            .into()
        })
    }

    /// The datasource for a role name: `orchestrator` or a participant owner.
    pub fn role(&self, role: &str) -> anyhow::Result<&Role> {
        if role == "orchestrator" {
            Ok(&self.orch)
        } else {
            self.owner(role)
        }
    }

    /// Swaps in the registry the orchestrator uses: the catalog's plus the static ones.
    pub fn install_registry(&self) -> anyhow::Result<()> {
        let mut registry = self.catalog_registry.clone();
        for definition in &self.static_defs {
            registry.register(definition.clone())?;
        }
        self.orchestrator.replace_registry(registry);
        Ok(())
    }

    pub fn remember(&mut self, definition: &WorkflowDefinition) {
        self.known
            .entry(definition.digest())
            .or_insert_with(|| definition.clone());
    }
}

pub struct Host<E: Engine> {
    pub engine: E,
    pub namespaces: BTreeMap<String, Namespace<E>>,
    pub issuer: TimerFencingTokenIssuer,
    seq: AtomicU64,
    pub slots: Vec<Slot<E>>,
}

fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The container prefix: MariaDB's grant for the ratchet user must cover `ratchet\_nsg\_%`.
fn container_prefix(engine: &str) -> &'static str {
    if engine == "mysql" {
        "ratchet_nsg_"
    } else {
        "nsg_"
    }
}

fn orchestrator_config(args: &Args<'_>) -> anyhow::Result<OrchestratorConfig> {
    let mut config = OrchestratorConfig::default();
    let Some(raw) = args.opt("config") else {
        return Ok(config);
    };
    let c = Args(raw);
    config.cancel_max_attempts = c.u32_or("cancel_max_attempts", config.cancel_max_attempts)?;
    config.compensate_max_attempts =
        c.u32_or("compensate_max_attempts", config.compensate_max_attempts)?;
    config.resolve_max_attempts = c.u32_or("resolve_max_attempts", config.resolve_max_attempts)?;
    config.timer_claim_limit = c.u32_or("timer_claim_limit", config.timer_claim_limit)?;
    if let Some(v) = c.opt_i64("timer_lease_ms")? {
        config.timer_lease_ms = v;
    }
    if let Some(v) = c.opt_i64("pause_backoff_ms")? {
        config.pause_backoff_ms = v;
    }
    config.enable_manual_close = c.bool_or("enable_manual_close", config.enable_manual_close)?;
    if c.opt("tenant_quotas").is_some() {
        config.tenant_quotas = c.parse("tenant_quotas")?;
    }
    if let Some(rates) = c.opt("tenant_action_rates") {
        let rates: BTreeMap<String, (u64, i64)> = serde_json::from_value(rates.clone())
            .map_err(|_| bad("tenant_action_rates: {tenant: [max_actions, window_ms]}"))?;
        config.tenant_action_rates = rates
            .into_iter()
            .map(|(t, (max_actions, window_ms))| {
                (
                    t,
                    TenantActionRate {
                        max_actions,
                        window_ms,
                    },
                )
            })
            .collect();
    }
    Ok(config)
}

impl<E: Engine> Host<E> {
    pub fn new(engine: E) -> Self {
        Self {
            engine,
            namespaces: BTreeMap::new(),
            issuer: TimerFencingTokenIssuer::new(),
            seq: AtomicU64::new(0),
            slots: Vec::new(),
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn ns(&self, args: &Args<'_>) -> anyhow::Result<&Namespace<E>> {
        let name = args.str("namespace")?;
        self.namespaces.get(name).ok_or_else(|| {
            HostError::new(
                "host.unknown_namespace",
                format!("namespace {name} is not open"),
            )
            .into()
        })
    }

    pub fn ns_mut(&mut self, args: &Args<'_>) -> anyhow::Result<&mut Namespace<E>> {
        let name = args.str("namespace")?;
        self.namespaces.get_mut(name).ok_or_else(|| {
            HostError::new(
                "host.unknown_namespace",
                format!("namespace {name} is not open"),
            )
            .into()
        })
    }

    pub async fn hello(&self) -> anyhow::Result<Value> {
        Ok(json!({
            "engine": self.engine.name(),
            "server_version": self.engine.server_version().await?,
            "crates": crate::versions::crate_versions(),
            "protocol": 1,
            "pid": std::process::id(),
        }))
    }

    /// Lends a free slot (registering a new one if none is free) pointed at `container`.
    fn borrow_slot(&mut self, container: &str) -> anyhow::Result<usize> {
        if let Some(index) = self.slots.iter().position(|s| !s.in_use) {
            let slot = &mut self.slots[index];
            *slot.target.lock().unwrap_or_else(|e| e.into_inner()) =
                (container.to_owned(), std::time::Instant::now());
            slot.in_use = true;
            return Ok(index);
        }
        let target: Target = std::sync::Arc::new(std::sync::Mutex::new((
            container.to_owned(),
            std::time::Instant::now(),
        )));
        let datasource = format!("slot.{}", self.slots.len());
        let pool = self.engine.slot_pool(target.clone(), 2)?;
        E::register_pool(&datasource, pool.clone()).map_err(|error| {
            HostError::new(
                "host.datasource_capacity",
                format!(
                    "cannot register datasource {datasource}: {error:#} (close namespaces first)"
                ),
            )
        })?;
        self.slots.push(Slot {
            datasource,
            pool,
            target,
            in_use: true,
        });
        Ok(self.slots.len() - 1)
    }

    /// Closes the slot's idle connections and makes it free again.
    async fn return_slot(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            E::drain_pool(&slot.pool).await;
            slot.in_use = false;
        }
    }

    async fn open_role(
        &mut self,
        ns: &str,
        role: &str,
        create: bool,
        created: &mut Vec<String>,
    ) -> anyhow::Result<Role> {
        let container = format!("{}{ns}_{role}", container_prefix(self.engine.name()));
        self.engine.prepare_container(&container, create).await?;
        if create {
            created.push(container.clone());
        }
        let slot = self.borrow_slot(&container)?;
        let datasource = self.slots[slot].datasource.clone();
        let schema = async {
            if role == "orch" {
                E::ensure_orchestrator_schema(&datasource).await
            } else {
                E::ensure_participant_schema(&datasource).await?;
                E::ensure_effect_table(&datasource).await
            }
        }
        .await;
        if let Err(error) = schema {
            self.return_slot(slot).await;
            return Err(error);
        }
        Ok(Role {
            datasource,
            container,
            slot,
        })
    }

    /// `schema_steps {namespace, role: "orchestrator"|"participant"}`: the wrapper's schema calls
    /// one by one on a fresh database `<namespace>_probe`, dropped afterwards
    /// (`Engine::schema_steps`, docs/nasaga-findings.md N-02).
    pub async fn schema_steps(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?;
        if !valid_name(name, 32) {
            return Err(bad("namespace must be [a-z0-9_]{1,32}"));
        }
        let orchestrator = match args.str("role")? {
            "orchestrator" => true,
            "participant" => false,
            other => {
                return Err(bad(format!(
                    "role must be orchestrator or participant, not {other}"
                )))
            }
        };
        let container = format!("{}{name}_probe", container_prefix(self.engine.name()));
        self.engine.prepare_container(&container, true).await?;
        let report = match self.borrow_slot(&container) {
            Ok(slot) => {
                let datasource = self.slots[slot].datasource.clone();
                let report = E::schema_steps(&datasource, orchestrator).await;
                self.return_slot(slot).await;
                report
            }
            Err(error) => Err(error),
        };
        let dropped = self.engine.drop_container(&container).await;
        let report = report?;
        dropped?;
        Ok(report)
    }

    /// `open_namespace {namespace, owners, mode: "create"|"attach", orchestrator_identity, config}`
    pub async fn open_namespace(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?.to_owned();
        if !valid_name(&name, 32) {
            return Err(bad("namespace must be [a-z0-9_]{1,32}"));
        }
        if self.namespaces.contains_key(&name) {
            return Err(
                HostError::new("host.namespace_open", format!("{name} is already open")).into(),
            );
        }
        let create = match args.opt_str("mode")?.unwrap_or("create") {
            "create" => true,
            "attach" => false,
            other => return Err(bad(format!("mode must be create or attach, not {other}"))),
        };
        let owners = args.str_list("owners")?;
        for owner in &owners {
            if !valid_name(owner, 16) || owner == "orch" {
                return Err(bad("owners must be [a-z0-9_]{1,16} and not `orch`"));
            }
        }
        let orch_identity = ServiceIdentity::new(
            args.opt_str("orchestrator_identity")?
                .unwrap_or("orchestrator"),
        )
        .map_err(crate::convert::contract)?;
        let config = orchestrator_config(args)?;

        let mut opened: Vec<Role> = Vec::new();
        let mut created: Vec<String> = Vec::new();
        let mut result: anyhow::Result<()> = Ok(());
        for role in std::iter::once("orch").chain(owners.iter().map(String::as_str)) {
            match self.open_role(&name, role, create, &mut created).await {
                Ok(opened_role) => opened.push(opened_role),
                Err(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        let slots: Vec<usize> = opened.iter().map(|role| role.slot).collect();
        let finished = match result {
            Ok(()) => {
                Self::finish_open(name.clone(), create, opened, &owners, orch_identity, config)
                    .await
            }
            Err(error) => Err(error),
        };
        match finished {
            Ok((namespace, body)) => {
                self.namespaces.insert(name, namespace);
                Ok(body)
            }
            Err(error) => {
                // A failed open leaves nothing behind: slots returned, containers it created
                // dropped — also when it fails after the schemas, at the catalog read.
                for slot in slots {
                    self.return_slot(slot).await;
                }
                for container in &created {
                    if let Err(drop_error) = self.engine.drop_container(container).await {
                        eprintln!(
                            "nasaga-host: dropping {container} after a failed open: {drop_error:#}"
                        );
                    }
                }
                Err(error)
            }
        }
    }

    /// The rest of `open_namespace` once every role's schema is there: the orchestrator and the
    /// catalog the database already holds.
    async fn finish_open(
        name: String,
        create: bool,
        opened: Vec<Role>,
        owners: &[String],
        orch_identity: ServiceIdentity,
        config: OrchestratorConfig,
    ) -> anyhow::Result<(Namespace<E>, Value)> {
        let mut roles = opened.into_iter();
        let orch = roles.next().ok_or_else(|| bad("no orchestrator role"))?;
        let owners_map: BTreeMap<String, Role> = owners.iter().cloned().zip(roles).collect();
        let orchestrator = std::sync::Arc::new(Orchestrator::<E::Backend>::with_datasource(
            DefinitionRegistry::new(),
            config,
            &orch.datasource,
        )?);
        let mut namespace = Namespace {
            name: name.clone(),
            orch,
            calls: owners
                .iter()
                .map(|o| (o.clone(), AtomicU32::new(0)))
                .collect(),
            owners: owners_map,
            orch_identity,
            orchestrator,
            static_defs: Vec::new(),
            catalog_registry: DefinitionRegistry::new(),
            known: BTreeMap::new(),
            claims: BTreeMap::new(),
        };
        // A fresh host resumes from the database: load whatever the catalog already holds.
        let snapshot = E::load_dynamic_catalog(&namespace.orch.datasource).await?;
        for definition in snapshot.registry.definitions() {
            namespace.remember(definition);
        }
        namespace.catalog_registry = snapshot.registry;
        namespace.install_registry()?;
        let body = json!({
            "namespace": name,
            "mode": if create { "create" } else { "attach" },
            "orchestrator": {"datasource": namespace.orch.datasource, "container": namespace.orch.container},
            "participants": namespace.owners.iter().map(|(o, r)| (o.clone(), json!({"datasource": r.datasource, "container": r.container}))).collect::<serde_json::Map<_, _>>(),
            "catalog_generation": snapshot.generation,
        });
        Ok((namespace, body))
    }

    /// `close_namespace {namespace, drop}`: closes the pools (and drops the containers).
    pub async fn close_namespace(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?;
        let drop_data = args.bool_or("drop", false)?;
        let namespace = self.namespaces.remove(name).ok_or_else(|| {
            anyhow::Error::from(HostError::new(
                "host.unknown_namespace",
                format!("namespace {name} is not open"),
            ))
        })?;
        let mut roles = vec![namespace.orch];
        roles.extend(namespace.owners.into_values());
        for role in &roles {
            self.return_slot(role.slot).await;
        }
        if drop_data {
            for role in &roles {
                self.engine.drop_container(&role.container).await?;
            }
        }
        Ok(json!({"closed": name, "dropped": drop_data}))
    }

    pub async fn close_all(&mut self) {
        let names: Vec<String> = self.namespaces.keys().cloned().collect();
        for name in names {
            let request = json!({"namespace": name});
            if let Err(error) = self.close_namespace(&Args(&request)).await {
                eprintln!("nasaga-host: closing {name}: {error:#}");
            }
        }
    }

    /// `stats`: open namespaces, slots, and the connections their pools hold.
    pub fn stats(&self) -> Value {
        let size = |in_use: bool| -> u32 {
            self.slots
                .iter()
                .filter(|s| s.in_use == in_use)
                .map(|s| E::pool_size(&s.pool))
                .sum()
        };
        json!({
            "namespaces_open": self.namespaces.len(),
            "datasource_slots": self.slots.len(),
            "datasource_slots_in_use": self.slots.iter().filter(|s| s.in_use).count(),
            "connections_open": size(true),
            "connections_held_by_free_slots": size(false),
        })
    }
}
