//! PostgreSQL: one schema per (namespace, role), pools from natx-pgsql, nasaga-runtime-pgsql.

use std::future::Future;
use std::str::FromStr;

use naoutbox_core::{DispatchReport, OutboxPublisher};
use nasaga_core::ServiceIdentity;
use nasaga_runtime_core::{
    CapabilityDescriptor, CapabilityReceipt, DefinitionActivationGate, DefinitionArtifact,
    DefinitionLifecycleOperation, DefinitionPublishDisposition, DefinitionRecord,
    DynamicCatalogSnapshot,
};
use nasaga_runtime_pgsql as wrapper;
use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection, Row};

use super::{BoxFut, EffectRecord, Engine, Target, EFFECT_TABLE};
use crate::readback::{self, Kind, Query};

pub struct Pg {
    /// The server DSN (RATCHET_PG_DSN); pools add `search_path` per schema.
    pub dsn: String,
}

enum Bind<'a> {
    Str(&'a str),
    Int(i64),
}

async fn fetch(
    datasource: &str,
    query: &Query,
    filter: &str,
    binds: &[Bind<'_>],
) -> anyhow::Result<Vec<Value>> {
    let sql = format!(
        "SELECT {} FROM {} WHERE {filter} ORDER BY {}",
        readback::select_list(query, false),
        query.table,
        query.order_by
    );
    let mut q = sqlx::query(AssertSqlSafe(sql));
    for bind in binds {
        q = match bind {
            Bind::Str(s) => q.bind(s.to_string()),
            Bind::Int(n) => q.bind(*n),
        };
    }
    let mut connection = natx_pgsql::conn_for(datasource).await?;
    let rows = q.fetch_all(connection.as_mut()).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(query.cols.len());
        for (i, c) in query.cols.iter().enumerate() {
            let v = match c.kind {
                Kind::Bytes => readback::typed(c.kind, None, row.try_get::<Option<Vec<u8>>, _>(i)?),
                _ => readback::typed(c.kind, row.try_get::<Option<String>, _>(i)?, None),
            };
            values.push(v);
        }
        out.push(readback::object(query, values));
    }
    Ok(out)
}

fn quoted(identifier: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !identifier.is_empty()
            && identifier.len() <= 63
            && identifier
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "schema name must be [a-z0-9_]{{1,63}}"
    );
    Ok(format!("\"{identifier}\""))
}

impl Engine for Pg {
    type Backend = wrapper::PgSagaBackend;
    type Pool = sqlx::PgPool;

    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn server_version(&self) -> anyhow::Result<String> {
        let mut connection = sqlx::PgConnection::connect(&self.dsn).await?;
        let version: String = sqlx::query_scalar("SELECT version()")
            .fetch_one(&mut connection)
            .await?;
        connection.close().await?;
        Ok(version)
    }

    async fn prepare_container(&self, container: &str, create: bool) -> anyhow::Result<()> {
        let name = quoted(container)?;
        let mut connection = sqlx::PgConnection::connect(&self.dsn).await?;
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                .bind(container)
                .fetch_one(&mut connection)
                .await?;
        let result = match (create, exists) {
            (true, true) => Err(crate::protocol::HostError::new(
                "host.namespace_exists",
                format!("schema {container} already exists"),
            )
            .into()),
            (false, false) => Err(crate::protocol::HostError::new(
                "host.namespace_missing",
                format!("schema {container} does not exist"),
            )
            .into()),
            (true, false) => sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {name}")))
                .execute(&mut connection)
                .await
                .map(drop)
                .map_err(anyhow::Error::from),
            (false, true) => Ok(()),
        };
        connection.close().await?;
        result
    }

    async fn drop_container(&self, container: &str) -> anyhow::Result<()> {
        let name = quoted(container)?;
        let mut connection = sqlx::PgConnection::connect(&self.dsn).await?;
        sqlx::query(AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE"
        )))
        .execute(&mut connection)
        .await?;
        connection.close().await?;
        Ok(())
    }

    fn slot_pool(&self, target: Target, max_connections: u32) -> anyhow::Result<Self::Pool> {
        let options = sqlx::postgres::PgConnectOptions::from_str(&self.dsn)?;
        Ok(sqlx::postgres::PgPoolOptions::new()
            .max_connections(max_connections)
            .min_connections(0)
            // An open namespace that sits idle gives its connections back to the shared server.
            .idle_timeout(std::time::Duration::from_secs(30))
            .acquire_timeout(std::time::Duration::from_secs(10))
            .before_acquire({
                let target = target.clone();
                move |_, meta| {
                    let fresh = !super::predates_switch(&target, meta.age);
                    Box::pin(async move { Ok(fresh) })
                }
            })
            .after_connect(move |connection, _| {
                let schema = target.lock().unwrap_or_else(|e| e.into_inner()).0.clone();
                Box::pin(async move {
                    sqlx::query(AssertSqlSafe(format!("SET search_path TO \"{schema}\"")))
                        .execute(&mut *connection)
                        .await?;
                    let current: Option<String> = sqlx::query_scalar("SELECT current_schema()")
                        .fetch_one(&mut *connection)
                        .await?;
                    if current.as_deref() == Some(schema.as_str()) {
                        Ok(())
                    } else {
                        Err(sqlx::Error::Protocol(format!(
                            "schema {schema} is unavailable"
                        )))
                    }
                })
            })
            .connect_lazy_with(options))
    }

    fn register_pool(datasource: &str, pool: Self::Pool) -> anyhow::Result<()> {
        natx_pgsql::try_init_datasource(datasource, pool)
    }

    async fn drain_pool(pool: &Self::Pool) {
        // Connections on their way back to the pool (returned by spawned tasks) land first.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        while let Some(connection) = pool.try_acquire() {
            let _ = connection.close().await;
        }
    }

    fn pool_size(pool: &Self::Pool) -> u32 {
        pool.size()
    }

    async fn ensure_orchestrator_schema(datasource: &str) -> anyhow::Result<()> {
        wrapper::ensure_orchestrator_schema_for(datasource).await
    }

    async fn ensure_participant_schema(datasource: &str) -> anyhow::Result<()> {
        wrapper::ensure_participant_schema_for(datasource).await
    }

    async fn schema_steps(_datasource: &str, _orchestrator: bool) -> anyhow::Result<Value> {
        Err(crate::protocol::bad(
            "schema_steps is an op of the mysql engine (docs/nasaga-findings.md N-02)",
        ))
    }

    async fn ensure_effect_table(datasource: &str) -> anyhow::Result<()> {
        let mut connection = natx_pgsql::conn_for(datasource).await?;
        sqlx::query(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {EFFECT_TABLE} (\
             seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, saga_id TEXT NOT NULL, \
             step TEXT NOT NULL, phase TEXT NOT NULL, attempt BIGINT NOT NULL, \
             effect_id TEXT NOT NULL, command_id TEXT NOT NULL, decision TEXT NOT NULL)"
        )))
        .execute(connection.as_mut())
        .await?;
        Ok(())
    }

    fn record_effect(datasource: String, e: EffectRecord) -> BoxFut<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let mut connection = natx_pgsql::mandatory_conn_for(&datasource).await?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {EFFECT_TABLE} (saga_id, step, phase, attempt, effect_id, command_id, decision) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)"
            )))
            .bind(e.saga_id)
            .bind(e.step)
            .bind(e.phase)
            .bind(e.attempt)
            .bind(e.effect_id)
            .bind(e.command_id)
            .bind(e.decision)
            .execute(connection.as_mut())
            .await?;
            Ok(())
        })
    }

    async fn run_outer<T>(
        datasource: &str,
        commit: bool,
        body: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        natx_pgsql::run_for(datasource, async {
            let value = body.await?;
            if commit {
                Ok(value)
            } else {
                Err(crate::protocol::HostError::new(
                    "host.outer_rolled_back",
                    "the outer transaction was rolled back as the request asked",
                )
                .into())
            }
        })
        .await
    }

    async fn publish_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        artifact: &DefinitionArtifact,
    ) -> anyhow::Result<(DefinitionPublishDisposition, DefinitionRecord)> {
        wrapper::publish_definition_for(datasource, actor, artifact).await
    }

    async fn register_capability(
        datasource: &str,
        actor: &ServiceIdentity,
        descriptor: &CapabilityDescriptor,
    ) -> anyhow::Result<CapabilityReceipt> {
        wrapper::register_capability_for(datasource, actor, descriptor).await
    }

    async fn load_dynamic_catalog(datasource: &str) -> anyhow::Result<DynamicCatalogSnapshot> {
        wrapper::load_dynamic_catalog_for(datasource).await
    }

    async fn load_definition(
        datasource: &str,
        tenant: &str,
        workflow: &str,
        version: u32,
    ) -> anyhow::Result<Option<DefinitionRecord>> {
        wrapper::load_definition_for(datasource, tenant, workflow, version).await
    }

    async fn acknowledge_generation(
        datasource: &str,
        service: &ServiceIdentity,
        replica: &str,
        generation: u64,
        digest: &str,
        activation_contract_digest: &str,
        lease_ms: u64,
    ) -> anyhow::Result<i64> {
        wrapper::acknowledge_catalog_generation_for(
            datasource,
            service,
            replica,
            generation,
            digest,
            activation_contract_digest,
            lease_ms,
        )
        .await
    }

    async fn activate_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        gate: &DefinitionActivationGate,
        (tenant, workflow, version): (&str, &str, u32),
        operation: Option<&DefinitionLifecycleOperation>,
    ) -> anyhow::Result<DefinitionRecord> {
        match operation {
            Some(op) => {
                wrapper::activate_definition_with_operation_for(
                    datasource, actor, gate, tenant, workflow, version, op,
                )
                .await
            }
            None => {
                wrapper::activate_definition_for(datasource, actor, gate, tenant, workflow, version)
                    .await
            }
        }
    }

    async fn deprecate_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        (tenant, workflow, version): (&str, &str, u32),
        operation: Option<&DefinitionLifecycleOperation>,
    ) -> anyhow::Result<DefinitionRecord> {
        match operation {
            Some(op) => {
                wrapper::deprecate_definition_with_operation_for(
                    datasource, actor, tenant, workflow, version, op,
                )
                .await
            }
            None => {
                wrapper::deprecate_definition_for(datasource, actor, tenant, workflow, version)
                    .await
            }
        }
    }

    async fn retire_definition(
        datasource: &str,
        actor: &ServiceIdentity,
        (tenant, workflow, version): (&str, &str, u32),
        operation: &DefinitionLifecycleOperation,
    ) -> anyhow::Result<DefinitionRecord> {
        wrapper::retire_definition_with_operation_for(
            datasource, actor, tenant, workflow, version, operation,
        )
        .await
    }

    async fn dispatch_outbox(
        datasource: &str,
        publisher: &(dyn OutboxPublisher + Sync),
        limit: u32,
    ) -> anyhow::Result<DispatchReport> {
        let outbox = naoutbox_pgsql::PgOutbox::with_datasource(datasource)?;
        Ok(outbox.dispatch_batch(publisher, limit).await?)
    }

    async fn outbox_rows(
        datasource: &str,
        after_id: i64,
        pending_only: bool,
    ) -> anyhow::Result<Vec<Value>> {
        let filter = if pending_only {
            "id > $1 AND NOT dispatched AND NOT dead"
        } else {
            "id > $1"
        };
        fetch(
            datasource,
            &readback::OUTBOX,
            filter,
            &[Bind::Int(after_id)],
        )
        .await
    }

    async fn timer_rows(datasource: &str, saga_id: Option<&str>) -> anyhow::Result<Vec<Value>> {
        match saga_id {
            Some(id) => {
                fetch(
                    datasource,
                    &readback::TIMERS,
                    "saga_id = $1",
                    &[Bind::Str(id)],
                )
                .await
            }
            None => fetch(datasource, &readback::TIMERS, "TRUE", &[]).await,
        }
    }

    async fn inbox_rows(datasource: &str) -> anyhow::Result<Vec<Value>> {
        fetch(datasource, &readback::INBOX, "TRUE", &[]).await
    }

    async fn effect_rows(datasource: &str) -> anyhow::Result<Vec<Value>> {
        fetch(datasource, &readback::EFFECTS, "TRUE", &[]).await
    }

    async fn gate_rows(datasource: &str, saga_id: Option<&str>) -> anyhow::Result<Vec<Value>> {
        match saga_id {
            Some(id) => {
                fetch(
                    datasource,
                    &readback::GATES,
                    "saga_id = $1",
                    &[Bind::Str(id)],
                )
                .await
            }
            None => fetch(datasource, &readback::GATES, "TRUE", &[]).await,
        }
    }
}
