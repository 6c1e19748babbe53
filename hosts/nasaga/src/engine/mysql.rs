//! MariaDB/MySQL: one database per (namespace, role), pools from natx, nasaga-runtime.

use std::future::Future;
use std::str::FromStr;

use naoutbox_core::{DispatchReport, OutboxPublisher};
use nasaga_core::ServiceIdentity;
use nasaga_runtime as wrapper;
use nasaga_runtime_core::{
    CapabilityDescriptor, CapabilityReceipt, DefinitionActivationGate, DefinitionArtifact,
    DefinitionLifecycleOperation, DefinitionPublishDisposition, DefinitionRecord,
    DynamicCatalogSnapshot,
};
use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection, Row};

use super::{BoxFut, EffectRecord, Engine, Target, EFFECT_TABLE};
use crate::readback::{self, Kind, Query};

pub struct MySql {
    /// The server DSN (RATCHET_MYSQL_DSN); pools replace its database per container.
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
        readback::select_list(query, true),
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
    let mut connection = natx::conn_for(datasource).await?;
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
            && identifier.len() <= 64
            && identifier
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "database name must be [a-z0-9_]{{1,64}}"
    );
    Ok(format!("`{identifier}`"))
}

impl Engine for MySql {
    type Backend = wrapper::MySqlSagaBackend;
    type Pool = sqlx::MySqlPool;

    fn name(&self) -> &'static str {
        "mysql"
    }

    async fn server_version(&self) -> anyhow::Result<String> {
        let mut connection = sqlx::MySqlConnection::connect(&self.dsn).await?;
        let version: String = sqlx::query_scalar("SELECT version()")
            .fetch_one(&mut connection)
            .await?;
        connection.close().await?;
        Ok(version)
    }

    async fn prepare_container(&self, container: &str, create: bool) -> anyhow::Result<()> {
        let name = quoted(container)?;
        let mut connection = sqlx::MySqlConnection::connect(&self.dsn).await?;
        let found: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
        )
        .bind(container)
        .fetch_one(&mut connection)
        .await?;
        let exists = found > 0;
        let result = match (create, exists) {
            (true, true) => Err(crate::protocol::HostError::new(
                "host.namespace_exists",
                format!("database {container} already exists"),
            )
            .into()),
            (false, false) => Err(crate::protocol::HostError::new(
                "host.namespace_missing",
                format!("database {container} does not exist"),
            )
            .into()),
            (true, false) => sqlx::query(AssertSqlSafe(format!(
                "CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
            )))
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
        let mut connection = sqlx::MySqlConnection::connect(&self.dsn).await?;
        sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}")))
            .execute(&mut connection)
            .await?;
        connection.close().await?;
        Ok(())
    }

    fn slot_pool(&self, target: Target, max_connections: u32) -> anyhow::Result<Self::Pool> {
        let options = sqlx::mysql::MySqlConnectOptions::from_str(&self.dsn)?;
        Ok(sqlx::mysql::MySqlPoolOptions::new()
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
                let database = target.lock().unwrap_or_else(|e| e.into_inner()).0.clone();
                Box::pin(async move {
                    sqlx::query(AssertSqlSafe(format!("USE `{database}`")))
                        .execute(&mut *connection)
                        .await?;
                    let current: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
                        .fetch_one(&mut *connection)
                        .await?;
                    if current.as_deref() == Some(database.as_str()) {
                        Ok(())
                    } else {
                        Err(sqlx::Error::Protocol(format!(
                            "database {database} is unavailable"
                        )))
                    }
                })
            })
            .connect_lazy_with(options))
    }

    fn register_pool(datasource: &str, pool: Self::Pool) -> anyhow::Result<()> {
        natx::try_init_datasource(datasource, pool)
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

    async fn schema_steps(datasource: &str, orchestrator: bool) -> anyhow::Result<Value> {
        // The calls of nasaga-runtime 2.0.2's ensure_{orchestrator,participant}_schema_for
        // (src/lib.rs:256-281) that are public, on one connection as the wrapper makes them;
        // its HTTP replay table and (orchestrator) its catalog are private to the wrapper.
        let mut steps = Vec::new();
        {
            let mut connection = natx::conn_for(datasource).await?;
            let store = if orchestrator {
                nasaga_mysql::MySqlSagaStore::ensure_schema_on_connection(&mut connection).await
            } else {
                nasaga_mysql::MySqlSagaStore::ensure_participant_schema_on_connection(
                    &mut connection,
                )
                .await
            };
            steps.push(super::schema_step(
                if orchestrator {
                    "MySqlSagaStore::ensure_schema_on_connection"
                } else {
                    "MySqlSagaStore::ensure_participant_schema_on_connection"
                },
                store.map_err(anyhow::Error::from),
            ));
            let inbox =
                nainbox_mysql::MySqlInbox::ensure_schema_on_connection(&mut connection).await;
            steps.push(super::schema_step(
                "MySqlInbox::ensure_schema_on_connection",
                inbox.map_err(anyhow::Error::from),
            ));
            let outbox =
                naoutbox_mysql::MySqlOutbox::ensure_schema_on_connection(&mut connection).await;
            steps.push(super::schema_step(
                "MySqlOutbox::ensure_schema_on_connection",
                outbox.map_err(anyhow::Error::from),
            ));
        }
        let (call, whole) = if orchestrator {
            (
                "nasaga_runtime::ensure_orchestrator_schema_for",
                wrapper::ensure_orchestrator_schema_for(datasource).await,
            )
        } else {
            (
                "nasaga_runtime::ensure_participant_schema_for",
                wrapper::ensure_participant_schema_for(datasource).await,
            )
        };
        steps.push(super::schema_step(call, whole));
        let mut connection = natx::conn_for(datasource).await?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() \
             ORDER BY TABLE_NAME",
        )
        .fetch_all(connection.as_mut())
        .await?;
        let triggers: Vec<String> = sqlx::query_scalar(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() \
             ORDER BY TRIGGER_NAME",
        )
        .fetch_all(connection.as_mut())
        .await?;
        Ok(serde_json::json!({"steps": steps, "tables": tables, "triggers": triggers}))
    }

    async fn ensure_effect_table(datasource: &str) -> anyhow::Result<()> {
        let mut connection = natx::conn_for(datasource).await?;
        sqlx::query(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {EFFECT_TABLE} (\
             seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, saga_id VARCHAR(256) NOT NULL, \
             step VARCHAR(128) NOT NULL, phase VARCHAR(16) NOT NULL, attempt BIGINT NOT NULL, \
             effect_id CHAR(36) NOT NULL, command_id CHAR(36) NOT NULL, decision VARCHAR(64) NOT NULL) \
             ENGINE=InnoDB"
        )))
        .execute(connection.as_mut())
        .await?;
        Ok(())
    }

    fn record_effect(datasource: String, e: EffectRecord) -> BoxFut<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let mut connection = natx::mandatory_conn_for(&datasource).await?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {EFFECT_TABLE} (saga_id, step, phase, attempt, effect_id, command_id, decision) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"
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
        natx::run_for(datasource, async {
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
        let outbox = naoutbox_mysql::MySqlOutbox::with_datasource(datasource)?;
        Ok(outbox.dispatch_batch(publisher, limit).await?)
    }

    async fn outbox_rows(
        datasource: &str,
        after_id: i64,
        pending_only: bool,
    ) -> anyhow::Result<Vec<Value>> {
        let filter = if pending_only {
            "id > ? AND dispatched = 0 AND dead = 0"
        } else {
            "id > ?"
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
                    "saga_id = ?",
                    &[Bind::Str(id)],
                )
                .await
            }
            None => fetch(datasource, &readback::TIMERS, "1 = 1", &[]).await,
        }
    }

    async fn inbox_rows(datasource: &str) -> anyhow::Result<Vec<Value>> {
        fetch(datasource, &readback::INBOX, "1 = 1", &[]).await
    }

    async fn effect_rows(datasource: &str) -> anyhow::Result<Vec<Value>> {
        fetch(datasource, &readback::EFFECTS, "1 = 1", &[]).await
    }

    async fn gate_rows(datasource: &str, saga_id: Option<&str>) -> anyhow::Result<Vec<Value>> {
        match saga_id {
            Some(id) => {
                fetch(
                    datasource,
                    &readback::GATES,
                    "saga_id = ?",
                    &[Bind::Str(id)],
                )
                .await
            }
            None => fetch(datasource, &readback::GATES, "1 = 1", &[]).await,
        }
    }
}
