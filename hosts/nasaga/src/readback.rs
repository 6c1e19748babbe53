//! Raw read-backs of nasaga's tables, with the same portable column set on both engines.
//!
//! Each column is selected as text (or bytes) by an engine-specific expression and typed here,
//! so a row reads the same whether PostgreSQL or MariaDB stored it. The tables and columns are
//! listed in docs/nasaga.md ("Read-backs").

use serde_json::{Map, Value};

/// How a column's text is typed in the response.
#[derive(Clone, Copy)]
pub enum Kind {
    Int,
    Str,
    Bool,
    Bytes,
}

/// One column: the response name, its PostgreSQL and its MySQL select expression.
pub struct Col {
    pub name: &'static str,
    pub pg: &'static str,
    pub my: &'static str,
    pub kind: Kind,
}

const fn col(name: &'static str, pg: &'static str, my: &'static str, kind: Kind) -> Col {
    Col { name, pg, my, kind }
}

/// A read-back query: table, columns, and the ordering, qualified by the table so that it
/// sorts the stored values, not the text aliases of the same name.
pub struct Query {
    pub table: &'static str,
    pub cols: &'static [Col],
    pub order_by: &'static str,
}

pub const OUTBOX: Query = Query {
    table: "outbox_event",
    order_by: "outbox_event.id",
    cols: &[
        col("id", "id::TEXT", "CAST(id AS CHAR)", Kind::Int),
        col("event_id", "event_id", "event_id", Kind::Str),
        col("event_type", "event_type", "event_type", Kind::Str),
        col("aggregate_id", "aggregate_id", "aggregate_id", Kind::Str),
        col("tenant", "tenant", "tenant", Kind::Str),
        col("payload", "payload", "payload", Kind::Bytes),
        col(
            "dispatched",
            "dispatched::TEXT",
            "CAST(dispatched AS CHAR)",
            Kind::Bool,
        ),
        col("dead", "dead::TEXT", "CAST(dead AS CHAR)", Kind::Bool),
        col(
            "attempts",
            "attempts::TEXT",
            "CAST(attempts AS CHAR)",
            Kind::Int,
        ),
    ],
};

pub const TIMERS: Query = Query {
    table: "saga_timer",
    order_by: "saga_timer.due_at, saga_timer.timer_id",
    cols: &[
        col("timer_id", "timer_id", "timer_id", Kind::Str),
        col("saga_id", "saga_id", "saga_id", Kind::Str),
        col("scope_kind", "scope_kind", "scope_kind", Kind::Str),
        col("scope_key", "scope_key", "scope_key", Kind::Str),
        col("kind", "kind", "kind", Kind::Str),
        col(
            "attempt",
            "attempt_no::TEXT",
            "CAST(attempt_no AS CHAR)",
            Kind::Int,
        ),
        col(
            "due_at_ms",
            "due_at::TEXT",
            "CAST(due_at AS CHAR)",
            Kind::Int,
        ),
        col(
            "available_at_ms",
            "available_at::TEXT",
            "CAST(available_at AS CHAR)",
            Kind::Int,
        ),
        col("state", "state", "state", Kind::Str),
        col(
            "expected_saga_version",
            "expected_saga_version::TEXT",
            "CAST(expected_saga_version AS CHAR)",
            Kind::Int,
        ),
        col(
            "generation",
            "generation::TEXT",
            "CAST(generation AS CHAR)",
            Kind::Int,
        ),
        col("owner", "owner", "owner", Kind::Str),
        col("fencing_token", "fencing_token", "fencing_token", Kind::Str),
        col(
            "claimed_until_ms",
            "claimed_until::TEXT",
            "CAST(claimed_until AS CHAR)",
            Kind::Int,
        ),
    ],
};

pub const INBOX: Query = Query {
    table: "inbox_message",
    order_by: "inbox_message.consumer_name, inbox_message.message_id",
    cols: &[
        col("consumer", "consumer_name", "consumer_name", Kind::Str),
        col("message_id", "message_id", "message_id", Kind::Str),
    ],
};

pub const GATES: Query = Query {
    table: "saga_participant_step",
    order_by: "saga_participant_step.saga_id, saga_participant_step.step_name",
    cols: &[
        col("saga_id", "saga_id", "saga_id", Kind::Str),
        col("step", "step_name", "step_name", Kind::Str),
        col("tenant", "tenant_id", "tenant_id", Kind::Str),
        col("workflow", "workflow_name", "workflow_name", Kind::Str),
        col(
            "definition_version",
            "definition_version::TEXT",
            "CAST(definition_version AS CHAR)",
            Kind::Int,
        ),
        col(
            "definition_digest",
            "definition_digest",
            "definition_digest",
            Kind::Str,
        ),
        col(
            "forward_status",
            "forward_status",
            "forward_status",
            Kind::Str,
        ),
        col("cancel_status", "cancel_status", "cancel_status", Kind::Str),
        col(
            "compensation_status",
            "compensation_status",
            "compensation_status",
            Kind::Str,
        ),
        col(
            "resolution_status",
            "resolution_status",
            "resolution_status",
            Kind::Str,
        ),
        col(
            "execute_effect_id",
            "execute_effect_id",
            "execute_effect_id",
            Kind::Str,
        ),
        col(
            "cancel_effect_id",
            "cancel_effect_id",
            "cancel_effect_id",
            Kind::Str,
        ),
        col(
            "compensate_effect_id",
            "compensate_effect_id",
            "compensate_effect_id",
            Kind::Str,
        ),
        col(
            "resolve_effect_id",
            "resolve_effect_id",
            "resolve_effect_id",
            Kind::Str,
        ),
    ],
};

pub const EFFECTS: Query = Query {
    table: crate::engine::EFFECT_TABLE,
    order_by: "ratchet_effect.seq",
    cols: &[
        col("seq", "seq::TEXT", "CAST(seq AS CHAR)", Kind::Int),
        col("saga_id", "saga_id", "saga_id", Kind::Str),
        col("step", "step", "step", Kind::Str),
        col("phase", "phase", "phase", Kind::Str),
        col(
            "attempt",
            "attempt::TEXT",
            "CAST(attempt AS CHAR)",
            Kind::Int,
        ),
        col("effect_id", "effect_id", "effect_id", Kind::Str),
        col("command_id", "command_id", "command_id", Kind::Str),
        col("decision", "decision", "decision", Kind::Str),
    ],
};

/// The SELECT list for one engine (`mysql = false` is PostgreSQL).
pub fn select_list(query: &Query, mysql: bool) -> String {
    query
        .cols
        .iter()
        .map(|c| {
            let expr = if mysql { c.my } else { c.pg };
            format!("{expr} AS {}", c.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Types one fetched column.
pub fn typed(kind: Kind, text: Option<String>, bytes: Option<Vec<u8>>) -> Value {
    match kind {
        Kind::Bytes => match bytes {
            Some(b) => crate::engine::payload_json(&b),
            None => Value::Null,
        },
        Kind::Str => text.map(Value::String).unwrap_or(Value::Null),
        Kind::Int => match text {
            Some(t) => t
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or(Value::String(t)),
            None => Value::Null,
        },
        Kind::Bool => match text.as_deref() {
            Some("true") | Some("t") | Some("1") => Value::Bool(true),
            Some(_) => Value::Bool(false),
            None => Value::Null,
        },
    }
}

/// Builds a JSON object from typed values in column order.
pub fn object(query: &Query, values: Vec<Value>) -> Value {
    let mut map = Map::new();
    for (c, v) in query.cols.iter().zip(values) {
        map.insert(c.name.to_owned(), v);
    }
    Value::Object(map)
}
