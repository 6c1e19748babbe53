//! The host: namespaces, their datasources and runtimes, and the op table.
//!
//! A namespace is one harness example's world: an orchestrator datasource (schema/database
//! `nsg_<ns>_orch`) and one datasource per participant owner (`nsg_<ns>_<owner>`), each created
//! by the wrapper's own `ensure_*_schema_for`. Datasource names are process-global and can be
//! registered once, so each open gets a fresh name (`<ns>.<role>.g<seq>`); closing a namespace
//! closes its pools (the name stays registered, pointing at a closed pool).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nasaga_backend::{TimerClaimBatch, TimerFencingTokenIssuer};
use nasaga_core::{ServiceIdentity, WorkflowDefinition};
use nasaga_runtime_core::{DefinitionRegistry, Orchestrator, OrchestratorConfig, TenantActionRate};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::protocol::{bad, Args, HostError};

/// One datasource of a namespace.
pub struct Role<E: Engine> {
    pub datasource: String,
    pub container: String,
    pub pool: E::Pool,
}

pub struct Namespace<E: Engine> {
    pub name: String,
    pub orch: Role<E>,
    pub owners: BTreeMap<String, Role<E>>,
    pub orch_identity: ServiceIdentity,
    pub orchestrator: Orchestrator<E::Backend>,
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
    pub fn owner(&self, owner: &str) -> anyhow::Result<&Role<E>> {
        self.owners.get(owner).ok_or_else(|| {
            HostError::new(
                "host.unknown_owner",
                format!("namespace {} has no participant {owner}", self.name),
            )
            .into()
        })
    }

    /// The datasource for a role name: `orchestrator` or a participant owner.
    pub fn role(&self, role: &str) -> anyhow::Result<&Role<E>> {
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
    /// Pools of closed namespaces, kept so `stats` can show they hold no connection.
    closed_pools: Vec<E::Pool>,
}

fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
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
            closed_pools: Vec::new(),
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn ns(&self, args: &Args<'_>) -> anyhow::Result<&Namespace<E>> {
        let name = args.str("namespace")?;
        self.namespaces.get(name).ok_or_else(|| {
            HostError::new("host.unknown_namespace", format!("namespace {name} is not open")).into()
        })
    }

    pub fn ns_mut(&mut self, args: &Args<'_>) -> anyhow::Result<&mut Namespace<E>> {
        let name = args.str("namespace")?;
        self.namespaces.get_mut(name).ok_or_else(|| {
            HostError::new("host.unknown_namespace", format!("namespace {name} is not open")).into()
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

    async fn open_role(
        &self,
        ns: &str,
        role: &str,
        create: bool,
        created: &mut Vec<String>,
    ) -> anyhow::Result<Role<E>> {
        let container = format!("{}{ns}_{role}", container_prefix(self.engine.name()));
        self.engine.prepare_container(&container, create).await?;
        if create {
            created.push(container.clone());
        }
        let datasource = format!("{ns}.{role}.g{}", self.next_seq());
        let pool = self.engine.register_pool(&datasource, &container, 2)?;
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
            E::close_pool(&pool).await;
            return Err(error);
        }
        Ok(Role {
            datasource,
            container,
            pool,
        })
    }

    /// `open_namespace {namespace, owners, mode: "create"|"attach", orchestrator_identity, config}`
    pub async fn open_namespace(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?.to_owned();
        if !valid_name(&name, 32) {
            return Err(bad("namespace must be [a-z0-9_]{1,32}"));
        }
        if self.namespaces.contains_key(&name) {
            return Err(HostError::new("host.namespace_open", format!("{name} is already open")).into());
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

        let mut opened: Vec<Role<E>> = Vec::new();
        let mut created: Vec<String> = Vec::new();
        let result: anyhow::Result<()> = async {
            opened.push(self.open_role(&name, "orch", create, &mut created).await?);
            for owner in &owners {
                opened.push(self.open_role(&name, owner, create, &mut created).await?);
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
            // A failed open leaves nothing behind: pools closed, containers it created dropped.
            for role in &opened {
                E::close_pool(&role.pool).await;
            }
            for container in &created {
                if let Err(drop_error) = self.engine.drop_container(container).await {
                    eprintln!("nasaga-host: dropping {container} after a failed open: {drop_error:#}");
                }
            }
            return Err(error);
        }
        let mut roles = opened.into_iter();
        let orch = roles.next().ok_or_else(|| bad("no orchestrator role"))?;
        let owners_map: BTreeMap<String, Role<E>> = owners.iter().cloned().zip(roles).collect();
        let orchestrator = Orchestrator::<E::Backend>::with_datasource(
            DefinitionRegistry::new(),
            config,
            &orch.datasource,
        )?;
        let mut namespace = Namespace {
            name: name.clone(),
            orch,
            calls: owners.iter().map(|o| (o.clone(), AtomicU32::new(0))).collect(),
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
        self.namespaces.insert(name, namespace);
        Ok(body)
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
            E::close_pool(&role.pool).await;
            if drop_data {
                self.engine.drop_container(&role.container).await?;
            }
        }
        self.closed_pools.extend(roles.into_iter().map(|r| r.pool));
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

    /// `stats`: open namespaces and the connections their pools hold (closed pools included).
    pub fn stats(&self) -> Value {
        let open: u32 = self
            .namespaces
            .values()
            .flat_map(|n| std::iter::once(&n.orch).chain(n.owners.values()))
            .map(|r| E::pool_size(&r.pool))
            .sum();
        let closed: u32 = self.closed_pools.iter().map(E::pool_size).sum();
        json!({
            "namespaces_open": self.namespaces.len(),
            "datasources_registered": self.seq.load(Ordering::Relaxed),
            "connections_open": open,
            "connections_held_by_closed_pools": closed,
        })
    }
}
