//! ratchet-nasaga-host: the real nasaga Orchestrator and participant runtime, driven over
//! JSON lines on stdin/stdout (docs/nasaga.md).
//!
//! `ratchet-nasaga-host --engine postgres|mysql [--dsn DSN]`. One request per line, answered
//! in order, one at a time: each op runs to completion before the next line is read, so the
//! host is deterministic and synchronous per call. Logs go to stderr. A panic inside an op is
//! caught at the op boundary and answered as `host.internal`; end of input closes every pool.

mod convert;
mod descriptors;
mod engine;
mod faults; // crash points (issue 20 item 4)
mod grpc;
mod host;
mod kafka; // nasaga's Kafka command consumer (feature `kafka`)
mod metrics;
mod ops;
mod protocol;
mod readback;
mod sets; // the connector sets kept per namespace
mod step;
mod transport;
mod versions;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{classify, error_line, ok_line, Args};

/// Polls a future inside `catch_unwind`, turning a panic into `Err(message)`.
struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned()))),
        }
    }
}

async fn answer<E: Engine>(host: &mut Host<E>, line: &str) -> (String, bool) {
    let request: Value = match serde_json::from_str(line) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return (
                error_line(
                    &Value::Null,
                    "host.bad_request",
                    "a request must be a JSON object",
                ),
                false,
            )
        }
        Err(e) => {
            return (
                error_line(&Value::Null, "host.bad_request", &format!("not JSON: {e}")),
                false,
            )
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(op) = request.get("op").and_then(Value::as_str).map(str::to_owned) else {
        return (
            error_line(&id, "host.bad_request", "`op` must be a string"),
            false,
        );
    };
    let args = Args(&request);
    let result = CatchPanic(Box::pin(host.dispatch(&op, &args))).await;
    let line = match result {
        Ok(Ok(body)) => ok_line(&id, body),
        Ok(Err(error)) => {
            let kind = classify(&error);
            eprintln!("nasaga-host: {op} failed ({kind}): {error:#}");
            error_line(&id, kind, &format!("{error:#}"))
        }
        Err(panic) => {
            eprintln!("nasaga-host: {op} panicked: {panic}");
            error_line(&id, "host.internal", &format!("panic: {panic}"))
        }
    };
    (line, op == "shutdown")
}

async fn serve<E: Engine>(engine: E) -> anyhow::Result<()> {
    let mut host = Host::new(engine);
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let (response, stop) = answer(&mut host, &line).await;
        stdout.write_all(response.as_bytes()).await?;
        stdout.write_all(b"\n").await?;
        stdout.flush().await?;
        if stop {
            return Ok(());
        }
    }
    host.close_all().await;
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: ratchet-nasaga-host --engine postgres|mysql [--dsn DSN]");
    std::process::exit(2);
}

fn main() {
    let mut engine = None;
    let mut dsn = None;
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--engine" => engine = argv.next(),
            "--dsn" => dsn = argv.next(),
            _ => usage(),
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("nasaga-host: no tokio runtime: {error}");
            std::process::exit(2);
        }
    };
    // Same env vars and defaults as impls/endpoints.py.
    let env_or = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    let result = match engine.as_deref() {
        Some("postgres") => runtime.block_on(serve(engine::pg::Pg {
            dsn: dsn.unwrap_or_else(|| {
                env_or(
                    "RATCHET_PG_DSN",
                    "postgresql://ratchet:ratchet@127.0.0.1:15432/ratchet",
                )
            }),
        })),
        Some("mysql") => runtime.block_on(serve(engine::mysql::MySql {
            dsn: dsn.unwrap_or_else(|| {
                env_or(
                    "RATCHET_MYSQL_DSN",
                    "mysql://ratchet:ratchet@127.0.0.1:13306/ratchet",
                )
            }),
        })),
        _ => usage(),
    };
    if let Err(error) = result {
        eprintln!("nasaga-host: {error:#}");
        std::process::exit(1);
    }
}
