//! Crash points: where the harness kills the host in the middle of a unit (issue 20, item 4).
//!
//! `arm_crash_point {point, at, signal_path}` arms one point; the `at`-th time the host reaches
//! it inside a later call, the host creates `signal_path` (its text: point, arrival, pid) and
//! stops dead: the thread sleeps, so nothing more is sent on any connection and every open
//! transaction stays open. The harness, which watches for the file while it waits for the
//! call's answer, then sends SIGKILL: the process dies holding its transaction, the database
//! rolls it back when the socket closes, and a fresh host resumes from the database.
//!
//! Points (`step` and `eligibility` lie before nasaga sends COMMIT, so what the killed call wrote
//! never commits; `kafka_committed` lies after it):
//!
//! * `step`: the participant's step handler, right after it wrote its business row through
//!   nasaga's participant transaction (Inbox claim and gate written, result Outbox not yet);
//! * `eligibility`: the host's eligibility check of an orchestrator unit (start, result),
//!   which nasaga calls before the body, on every poll of the transaction body and once
//!   before it decides to commit (`run_authorized_for`, `rt/transaction.rs:85`);
//! * `kafka_committed`: nasaga's Kafka command consumer (src/kafka.rs), right after the
//!   participant's transaction committed and before nasaga's manual ACK, so before nafka
//!   commits the offset: the one point that lies after COMMIT (the redelivery must be absorbed).
//!
//! `disarm_crash_point {}` → `{armed, arrivals}`: what the last armed point saw (a call that
//! never reached its `at`-th arrival leaves it armed until then). No saga logic here: the
//! host only stops where it already has control.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::protocol::{bad, Args};

const POINTS: &[&str] = &["step", "eligibility", "kafka_committed"];
/// A host stopped at a point exits by itself if nobody kills it (its client died): a host
/// never outlives its run.
const STOPPED_AT_MOST: Duration = Duration::from_secs(120);

struct Armed {
    point: String,
    at: u32,
    arrivals: u32,
    signal: PathBuf,
}

static ARMED: Mutex<Option<Armed>> = Mutex::new(None);

/// `arm_crash_point {point: "step"|"eligibility", at: n >= 1, signal_path}` → `{armed: point, at}`.
pub fn arm(args: &Args<'_>) -> anyhow::Result<Value> {
    let point = args.str("point")?;
    if !POINTS.contains(&point) {
        return Err(bad(format!("`point` must be one of {}", POINTS.join(", "))));
    }
    let at = args.u32_or("at", 1)?;
    if at == 0 {
        return Err(bad("`at` counts arrivals from 1"));
    }
    let signal = PathBuf::from(args.str("signal_path")?);
    let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
    *armed = Some(Armed {
        point: point.to_owned(),
        at,
        arrivals: 0,
        signal,
    });
    Ok(json!({"armed": point, "at": at}))
}

/// `disarm_crash_point {}` → `{armed: point | null, arrivals}`.
pub fn disarm() -> Value {
    let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
    match armed.take() {
        Some(a) => json!({"armed": a.point, "arrivals": a.arrivals}),
        None => json!({"armed": null, "arrivals": 0}),
    }
}

/// Called where the host has control inside a nasaga call; stops the host at the armed arrival.
pub fn reached(point: &str) {
    let signal = {
        let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = armed.as_mut() else { return };
        if a.point != point {
            return;
        }
        a.arrivals += 1;
        if a.arrivals != a.at {
            return;
        }
        let stop = armed.take().map(|a| (a.signal, a.arrivals));
        stop
    };
    let Some((path, arrival)) = signal else {
        return;
    };
    let text = format!("{point} {arrival} {}\n", std::process::id());
    // Written aside and renamed: the client polls for the file and reads it at once, so it must
    // never see the file before its text.
    let aside = path.with_extension("tmp");
    if let Err(error) = std::fs::write(&aside, text).and_then(|()| std::fs::rename(&aside, &path)) {
        eprintln!("nasaga-host: crash point {point}: cannot signal {path:?}: {error}");
        std::process::exit(3);
    }
    eprintln!(
        "nasaga-host: stopped at crash point {point} (arrival {arrival}), waiting for SIGKILL"
    );
    let parent = std::os::unix::process::parent_id();
    let since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if std::os::unix::process::parent_id() != parent || since.elapsed() > STOPPED_AT_MOST {
            eprintln!("nasaga-host: nobody killed the host at its crash point; exiting");
            std::process::exit(3);
        }
    }
}
