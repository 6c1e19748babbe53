//! Definitions and the catalog: the wrapper's own publish/activate/deprecate/retire and
//! capability calls, and the registry swap a host owes after each change.

use nasaga_core::{ServiceIdentity, WorkflowDefinition};
use nasaga_runtime_core::{
    select_capability_routes, CapabilityDescriptor, DefinitionActivationGate, DefinitionArtifact,
    DefinitionLifecycleOperation, DefinitionPublishDisposition, DynamicCatalogSnapshot,
};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use crate::convert::{self, DefinitionSpec};
use crate::engine::Engine;
use crate::host::{Host, Namespace};
use crate::protocol::{bad, Args, HostError};

const DEFAULT_TRANSPORT: &str = "grpc";

/// The result-credential digest an owner's capability carries and the activation gate accepts:
/// a stand-in for the transport credential (this host delivers in-process, no transport).
fn result_contract_digest(owner: &str) -> String {
    hex::encode(Sha256::digest(
        format!("ratchet-result-contract:{owner}").as_bytes(),
    ))
}

fn key<'a>(args: &Args<'a>) -> anyhow::Result<(&'a str, &'a str, u32)> {
    Ok((
        args.str("tenant")?,
        args.str("workflow")?,
        args.u32_or("version", 0)?,
    ))
}

fn operation(args: &Args<'_>) -> anyhow::Result<Option<DefinitionLifecycleOperation>> {
    let Some(raw) = args.opt("operation") else {
        return Ok(None);
    };
    let op = Args(raw);
    DefinitionLifecycleOperation::new(
        op.str("expected_sha256")?,
        op.str("operation_id")?,
        op.str("reason")?,
    )
    .map(Some)
    .map_err(|e| bad(format!("operation: {e}")))
}

fn identity(text: &str) -> anyhow::Result<ServiceIdentity> {
    ServiceIdentity::new(text).map_err(convert::contract)
}

pub fn snapshot_json(snapshot: &DynamicCatalogSnapshot) -> Value {
    json!({
        "generation": snapshot.generation,
        "snapshot_digest": snapshot.snapshot_digest,
        "definitions": snapshot.definition_records,
        "capabilities": snapshot.capabilities.iter().map(|c| json!({
            "descriptor": c.descriptor,
            "accepted_until_ms": c.accepted_until_ms,
            "capability_digest": c.capability_digest,
        })).collect::<Vec<_>>(),
        "registry": snapshot.registry.definitions_with_tenants().map(|(tenant, d)| {
            let mut v = convert::definition(d);
            v["tenant"] = json!(tenant);
            v
        }).collect::<Vec<_>>(),
    })
}

/// A capability for one step of `definition`, owned by the step's owner.
fn descriptor_for(
    tenant: &str,
    definition: &WorkflowDefinition,
    step: &str,
    args: &Args<'_>,
) -> anyhow::Result<CapabilityDescriptor> {
    let step_def = definition
        .steps()
        .iter()
        .find(|s| s.name().as_str() == step)
        .ok_or_else(|| bad(format!("definition has no step {step}")))?;
    let owner = step_def.owner().as_str().to_owned();
    let contract = step_def.payload_contract();
    Ok(CapabilityDescriptor {
        payload_contract: (contract != &nasaga_core::SagaPayloadContract::default())
            .then(|| contract.clone()),
        tenant: tenant.to_owned(),
        replica_identity: args
            .opt_str("replica")?
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{owner}-r1")),
        workflow: definition.name().as_str().to_owned(),
        definition_version: definition.version().get(),
        step: step.to_owned(),
        compensation: step_def.compensation().into(),
        cancel_mode: step_def.cancel_mode().into(),
        allow_unknown: step_def.resolution().allow_unknown(),
        resolution_mode: step_def.resolution().mode().map(Into::into),
        transport: args
            .opt_str("transport")?
            .unwrap_or(DEFAULT_TRANSPORT)
            .to_owned(),
        endpoint: args
            .opt_str("endpoint")?
            .map(str::to_owned)
            .unwrap_or_else(|| format!("https://{owner}.ratchet.invalid")),
        effective_saga_base_path: args.opt_str("base_path")?.map(str::to_owned),
        result_contract_digest: Some(result_contract_digest(&owner)),
        route_generation: 1,
        requested_lease_ms: args.opt_i64("lease_ms")?.unwrap_or(120_000).max(1) as u64,
        owner,
    })
}

impl<E: Engine> Host<E> {
    /// Reloads the catalog and swaps the orchestrator's registry (catalog + static).
    pub async fn refresh_registry(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns_mut(args)?;
        let snapshot = E::load_dynamic_catalog(&namespace.orch.datasource).await?;
        for definition in snapshot.registry.definitions() {
            namespace.remember(definition);
        }
        namespace.catalog_registry = snapshot.registry.clone();
        namespace.install_registry()?;
        Ok(snapshot_json(&snapshot))
    }

    /// `register_definition {namespace, definition}`: straight into the registry, no catalog.
    pub fn register_definition(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let spec: DefinitionSpec = args.parse("definition")?;
        let definition = convert::workflow_definition(&spec)?;
        let namespace = self.ns_mut(args)?;
        if !namespace
            .static_defs
            .iter()
            .any(|d| d.digest() == definition.digest())
        {
            namespace.static_defs.push(definition.clone());
        }
        if let Err(error) = namespace.install_registry() {
            namespace
                .static_defs
                .retain(|d| d.digest() != definition.digest());
            return Err(
                HostError::new("definition.registry_rejected", format!("{error:#}")).into(),
            );
        }
        namespace.remember(&definition);
        Ok(convert::definition(&definition))
    }

    /// `publish_definition {namespace, definition}` → candidate (`publish_definition_for`).
    pub async fn publish_definition(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let spec: DefinitionSpec = args.parse("definition")?;
        let definition = convert::workflow_definition(&spec)?;
        let namespace = self.ns_mut(args)?;
        let tenant = spec
            .tenant
            .as_deref()
            .ok_or_else(|| bad("definition.tenant is required"))?;
        let owner = spec
            .workflow_owner
            .clone()
            .unwrap_or_else(|| namespace.orch_identity.as_str().to_owned());
        let artifact = DefinitionArtifact::from_definition(tenant, owner.clone(), &definition);
        let (disposition, record) =
            E::publish_definition(&namespace.orch.datasource, &identity(&owner)?, &artifact)
                .await?;
        namespace.remember(&definition);
        Ok(json!({
            "disposition": match disposition {
                DefinitionPublishDisposition::Published => "published",
                DefinitionPublishDisposition::Duplicate => "duplicate",
            },
            "record": record,
            "definition": convert::definition(&definition),
        }))
    }

    async fn definition_of(
        namespace: &Namespace<E>,
        (tenant, workflow, version): (&str, &str, u32),
    ) -> anyhow::Result<(DefinitionArtifact, WorkflowDefinition)> {
        let record = E::load_definition(&namespace.orch.datasource, tenant, workflow, version)
            .await?
            .ok_or(nasaga_runtime_core::DefinitionCatalogError::NotFound)?;
        let definition = record.artifact.to_definition()?;
        Ok((record.artifact, definition))
    }

    /// `register_capability {namespace, tenant, workflow, version, step, transport?, endpoint?,
    /// replica?, lease_ms?, actor?}` (`register_capability_for`; `actor` defaults to the owner).
    pub async fn register_capability(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let key = key(args)?;
        let (_, definition) = Self::definition_of(namespace, key).await?;
        let descriptor = descriptor_for(key.0, &definition, args.str("step")?, args)?;
        let actor = identity(args.opt_str("actor")?.unwrap_or(&descriptor.owner))?;
        let receipt =
            E::register_capability(&namespace.orch.datasource, &actor, &descriptor).await?;
        Ok(json!({"receipt": receipt, "descriptor": descriptor}))
    }

    /// `activate_definition {namespace, tenant, workflow, version, transport?,
    /// register_capabilities?, actor?, operation?}`: registers each step's capability (unless
    /// told not to), loads the catalog snapshot, acknowledges it as the orchestrator's one
    /// replica, builds the `DefinitionActivationGate`, activates, and swaps the registry.
    pub async fn activate_definition(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let key = key(args)?;
        let transport = args.opt_str("transport")?.unwrap_or(DEFAULT_TRANSPORT);
        let namespace = self.ns(args)?;
        let ds = namespace.orch.datasource.clone();
        let (artifact, definition) = Self::definition_of(namespace, key).await?;
        let mut receipts = Vec::new();
        if args.bool_or("register_capabilities", true)? {
            for step in definition.steps() {
                let descriptor = descriptor_for(key.0, &definition, step.name().as_str(), args)?;
                let receipt = E::register_capability(&ds, step.owner(), &descriptor).await?;
                receipts.push(receipt);
            }
        }
        let snapshot = E::load_dynamic_catalog(&ds).await?;
        let mut gate = DefinitionActivationGate::new(
            namespace.orch_identity.clone(),
            snapshot.generation,
            snapshot.snapshot_digest.clone(),
            transport,
        )?;
        let mut owners: Vec<&str> = definition
            .steps()
            .iter()
            .map(|s| s.owner().as_str())
            .collect();
        owners.dedup();
        for owner in owners {
            gate = gate.with_result_contract_digest(owner, result_contract_digest(owner))?;
        }
        let replica = format!("{}-r1", namespace.orch_identity.as_str());
        E::acknowledge_generation(
            &ds,
            &namespace.orch_identity,
            &replica,
            snapshot.generation,
            &snapshot.snapshot_digest,
            gate.activation_contract_digest(),
            60_000,
        )
        .await?;
        let actor = identity(args.opt_str("actor")?.unwrap_or(&artifact.workflow_owner))?;
        let record =
            E::activate_definition(&ds, &actor, &gate, key, operation(args)?.as_ref()).await?;
        let refreshed = self.refresh_registry(args).await?;
        Ok(json!({"record": record, "capabilities": receipts, "catalog": refreshed}))
    }

    /// `deprecate_definition {namespace, tenant, workflow, version, actor?, operation?}`.
    pub async fn deprecate_definition(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let key = key(args)?;
        let namespace = self.ns(args)?;
        let (artifact, _) = Self::definition_of(namespace, key).await?;
        let actor = identity(args.opt_str("actor")?.unwrap_or(&artifact.workflow_owner))?;
        let record = E::deprecate_definition(
            &namespace.orch.datasource,
            &actor,
            key,
            operation(args)?.as_ref(),
        )
        .await?;
        let refreshed = self.refresh_registry(args).await?;
        Ok(json!({"record": record, "catalog": refreshed}))
    }

    /// `retire_definition {namespace, tenant, workflow, version, actor?, operation}`
    /// (nasaga only offers retirement with an operation: expected digest, id, reason).
    pub async fn retire_definition(&mut self, args: &Args<'_>) -> anyhow::Result<Value> {
        let key = key(args)?;
        let namespace = self.ns(args)?;
        let (artifact, _) = Self::definition_of(namespace, key).await?;
        let actor = identity(args.opt_str("actor")?.unwrap_or(&artifact.workflow_owner))?;
        let op = operation(args)?.ok_or_else(|| bad("retire_definition needs `operation`"))?;
        let record = E::retire_definition(&namespace.orch.datasource, &actor, key, &op).await?;
        let refreshed = self.refresh_registry(args).await?;
        Ok(json!({"record": record, "catalog": refreshed}))
    }

    /// `load_definition {namespace, tenant, workflow, version}` → the catalog record or null.
    pub async fn load_definition(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let (tenant, workflow, version) = key(args)?;
        let namespace = self.ns(args)?;
        let record =
            E::load_definition(&namespace.orch.datasource, tenant, workflow, version).await?;
        Ok(json!({"record": record}))
    }

    /// `load_dynamic_catalog {namespace}` → the `DynamicCatalogSnapshot` (not installed).
    pub async fn load_dynamic_catalog(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        Ok(snapshot_json(
            &E::load_dynamic_catalog(&namespace.orch.datasource).await?,
        ))
    }

    /// `select_capability_routes {namespace, tenant, workflow, version, step, transport?}`.
    pub async fn select_routes(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let key = key(args)?;
        let namespace = self.ns(args)?;
        let snapshot = E::load_dynamic_catalog(&namespace.orch.datasource).await?;
        let (_, definition) = Self::definition_of(namespace, key).await?;
        let step_name = args.str("step")?;
        let step = definition
            .steps()
            .iter()
            .find(|s| s.name().as_str() == step_name)
            .ok_or_else(|| bad(format!("definition has no step {step_name}")))?;
        let transport = args.opt_str("transport")?.unwrap_or(DEFAULT_TRANSPORT);
        let routes =
            select_capability_routes(&snapshot.capabilities, transport, key.0, &definition, step)?;
        Ok(json!({"routes": routes}))
    }

    /// `verify_startup {namespace}`: nasaga's startup precheck against the current registry.
    pub async fn verify_startup(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        namespace.orchestrator.verify_startup().await?;
        Ok(json!({"verified": true}))
    }
}
