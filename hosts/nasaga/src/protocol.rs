//! The control protocol: one JSON request per stdin line, one JSON response per stdout line.
//!
//! A request is `{"id": <any JSON>, "op": "<name>", ...arguments}`; the response echoes the
//! `id` and carries either `"ok": {...}` or `"error": {"kind": <closed set>, "message": ..}`.
//! Error kinds are `<layer>.<reason>`; the layer says whose verdict it is:
//!
//! - `host.*`: the request itself (malformed, unknown op or namespace, a claim handle the host
//!   no longer holds, the harness-drawn eligibility answer `false`, an outer transaction the
//!   request asked to roll back, a panic caught at the op boundary);
//! - `start.*`, `command.*`, `result.*`, `management.*`, `concurrency.*`, `catalog.*`,
//!   `transaction.*`, `definition.*`: nasaga's own closed error types, found in the error chain
//!   (`StartSagaError`, `SagaCommandProcessingError`, ...), named after their variants;
//! - `step.retryable`: the harness step answered `retryable`, so the participant transaction
//!   rolled back (nasaga returns this as a plain error);
//! - `backend.*`: `SagaBackendError` kinds; `store.*`: a store's own `SagaStoreError`
//!   (`store.schema_contract_invalid` when its schema verification refuses the database);
//!   `database.access_denied` / `database.error`: anything else from the driver.

use nasaga_backend::{SagaBackendError, SagaBackendErrorKind};
use nasaga_runtime_core::{
    DefinitionCatalogError, SagaCommandProcessingError, SagaConcurrencyError, SagaManagementError,
    SagaResultProcessingError, SagaTransactionError, StartSagaError,
};
use serde_json::{json, Value};

/// A request-level failure the host itself decides (the `host.*` layer).
#[derive(Debug, Clone)]
pub struct HostError {
    pub kind: &'static str,
    pub message: String,
}

impl HostError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new("host.bad_request", message)
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for HostError {}

/// Shorthand for a `host.bad_request` error.
pub fn bad(message: impl Into<String>) -> anyhow::Error {
    HostError::bad_request(message).into()
}

/// The closed kind of an error chain: the first typed nasaga error wins, in this order.
pub fn classify(error: &anyhow::Error) -> &'static str {
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<HostError>() {
            return e.kind;
        }
    }
    if let Some(e) = StartSagaError::from_error(error) {
        return match e {
            StartSagaError::DefinitionInactive => "start.definition_inactive",
            StartSagaError::InvalidPayload => "start.invalid_payload",
            StartSagaError::DefinitionEmpty => "start.definition_empty",
            StartSagaError::RequestConflict => "start.request_conflict",
            StartSagaError::TenantQuotaExceeded => "start.tenant_quota_exceeded",
            _ => "start.other",
        };
    }
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<SagaCommandProcessingError>() {
            return match e {
                SagaCommandProcessingError::ProducerUnauthorized => "command.producer_unauthorized",
                SagaCommandProcessingError::IdentityInvalid => "command.identity_invalid",
                SagaCommandProcessingError::RouteUnauthorized => "command.route_unauthorized",
                SagaCommandProcessingError::ContractInvalid => "command.contract_invalid",
                _ => "command.other",
            };
        }
        if let Some(e) = cause.downcast_ref::<SagaResultProcessingError>() {
            return match e {
                SagaResultProcessingError::Paused => "result.paused",
                SagaResultProcessingError::AuthorityUnavailable => "result.authority_unavailable",
                SagaResultProcessingError::ProducerUnauthorized => "result.producer_unauthorized",
                SagaResultProcessingError::IdentityInvalid => "result.identity_invalid",
                SagaResultProcessingError::ContractInvalid => "result.contract_invalid",
                _ => "result.other",
            };
        }
        if let Some(e) = cause.downcast_ref::<SagaManagementError>() {
            return match e {
                SagaManagementError::InvalidContext => "management.invalid_context",
                SagaManagementError::PermissionDenied => "management.permission_denied",
                SagaManagementError::NotFound => "management.not_found",
                SagaManagementError::RateLimitExceeded => "management.rate_limit_exceeded",
                SagaManagementError::PreconditionFailed => "management.precondition_failed",
                SagaManagementError::OperationConflict => "management.operation_conflict",
                _ => "management.other",
            };
        }
        if let Some(e) = cause.downcast_ref::<SagaConcurrencyError>() {
            return match e {
                SagaConcurrencyError::StaleSnapshot => "concurrency.stale_snapshot",
                SagaConcurrencyError::DuplicateTrigger => "concurrency.duplicate_trigger",
                _ => "concurrency.other",
            };
        }
        if let Some(e) = cause.downcast_ref::<DefinitionCatalogError>() {
            return match e {
                DefinitionCatalogError::InvalidArgument => "catalog.invalid_argument",
                DefinitionCatalogError::PermissionDenied => "catalog.permission_denied",
                DefinitionCatalogError::NotFound => "catalog.not_found",
                DefinitionCatalogError::FailedPrecondition => "catalog.failed_precondition",
                DefinitionCatalogError::DigestConflict => "catalog.digest_conflict",
                DefinitionCatalogError::PreconditionFailed => "catalog.precondition_failed",
                DefinitionCatalogError::OperationConflict => "catalog.operation_conflict",
                _ => "catalog.other",
            };
        }
        if let Some(e) = cause.downcast_ref::<SagaTransactionError>() {
            return match e {
                SagaTransactionError::RollbackOnly => "transaction.rollback_only",
                SagaTransactionError::CommitRejected => "transaction.commit_rejected",
                SagaTransactionError::CommitUncertain => "transaction.commit_uncertain",
                SagaTransactionError::RollbackFailed => "transaction.rollback_failed",
                SagaTransactionError::Infrastructure => "transaction.infrastructure",
            };
        }
        if let Some(e) = cause.downcast_ref::<SagaBackendError>() {
            return match e.kind() {
                SagaBackendErrorKind::NotFound => "backend.not_found",
                SagaBackendErrorKind::Conflict => "backend.conflict",
                SagaBackendErrorKind::Fenced => "backend.fenced",
                SagaBackendErrorKind::Retryable => "backend.retryable",
                SagaBackendErrorKind::OutcomeUnknown => "backend.outcome_unknown",
                SagaBackendErrorKind::Infrastructure => "backend.infrastructure",
            };
        }
        if let Some(e) = cause.downcast_ref::<nasaga_pgsql::SagaStoreError>() {
            return store_kind(&e.to_string());
        }
        if let Some(e) = cause.downcast_ref::<nasaga_mysql::SagaStoreError>() {
            return store_kind(&e.to_string());
        }
        if let Some(e) = cause.downcast_ref::<sqlx::Error>() {
            let denied = e.as_database_error().is_some_and(|d| {
                // PostgreSQL insufficient_privilege; MySQL/MariaDB ER_DBACCESS_DENIED_ERROR.
                matches!(d.code().as_deref(), Some("42501"))
                    || d.message().contains("Access denied")
            });
            return if denied {
                "database.access_denied"
            } else {
                "database.error"
            };
        }
    }
    // nasaga returns these as plain `anyhow!` errors; their text is the only signal.
    if error
        .chain()
        .any(|cause| cause.to_string().ends_with("schema contract is invalid"))
    {
        // nasaga-runtime's own schema checks (e.g. its HTTP replay table, src/lib.rs:288).
        return "store.schema_contract_invalid";
    }
    if error
        .chain()
        .any(|cause| cause.to_string().starts_with("retryable "))
    {
        return "step.retryable";
    }
    "host.internal"
}

/// nasaga's stores report schema verification failures as a plain `SagaStoreError` text.
fn store_kind(text: &str) -> &'static str {
    if text.contains("contract is invalid") {
        "store.schema_contract_invalid"
    } else {
        "store.error"
    }
}

/// The response line for a successful op.
pub fn ok_line(id: &Value, body: Value) -> String {
    json!({"id": id, "ok": body}).to_string()
}

/// The response line for a failed op.
pub fn error_line(id: &Value, kind: &str, message: &str) -> String {
    json!({"id": id, "error": {"kind": kind, "message": message}}).to_string()
}

/// Typed access to request arguments: every getter fails as `host.bad_request`.
pub struct Args<'a>(pub &'a Value);

impl<'a> Args<'a> {
    pub fn opt(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    pub fn str(&self, key: &str) -> anyhow::Result<&'a str> {
        self.opt(key)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("`{key}` must be a string")))
    }

    pub fn opt_str(&self, key: &str) -> anyhow::Result<Option<&'a str>> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| bad(format!("`{key}` must be a string"))),
        }
    }

    pub fn i64(&self, key: &str) -> anyhow::Result<i64> {
        self.opt(key)
            .and_then(Value::as_i64)
            .ok_or_else(|| bad(format!("`{key}` must be an integer")))
    }

    pub fn opt_i64(&self, key: &str) -> anyhow::Result<Option<i64>> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| bad(format!("`{key}` must be an integer"))),
        }
    }

    pub fn u32_or(&self, key: &str, default: u32) -> anyhow::Result<u32> {
        match self.opt(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad(format!("`{key}` must be a non-negative 32-bit integer"))),
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> anyhow::Result<bool> {
        match self.opt(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| bad(format!("`{key}` must be a boolean"))),
        }
    }

    pub fn value(&self, key: &str) -> anyhow::Result<&'a Value> {
        self.opt(key)
            .ok_or_else(|| bad(format!("`{key}` is required")))
    }

    pub fn parse<T: serde::de::DeserializeOwned>(&self, key: &str) -> anyhow::Result<T> {
        serde_json::from_value(self.value(key)?.clone())
            .map_err(|e| bad(format!("`{key}` is malformed: {e}")))
    }

    pub fn str_list(&self, key: &str) -> anyhow::Result<Vec<String>> {
        match self.opt(key) {
            None => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| bad(format!("`{key}` must be a list of strings"))),
        }
    }
}
