//! The nasaga crate versions this binary was built with, read from the committed Cargo.lock.

use serde_json::{Map, Value};

const LOCK: &str = include_str!("../Cargo.lock");

/// `{crate: version}` for every nasaga/natx/nainbox/naoutbox package in the lock file.
pub fn crate_versions() -> Value {
    let mut versions = Map::new();
    let mut name: Option<&str> = None;
    for line in LOCK.lines() {
        if let Some(rest) = line.strip_prefix("name = \"") {
            name = rest.strip_suffix('"');
        } else if let (Some(n), Some(rest)) = (name, line.strip_prefix("version = \"")) {
            if ["nasaga", "natx", "nainbox", "naoutbox", "sqlx"]
                .iter()
                .any(|prefix| n == *prefix || n.starts_with(&format!("{prefix}-")))
            {
                if let Some(version) = rest.strip_suffix('"') {
                    versions.insert(n.to_owned(), Value::String(version.to_owned()));
                }
            }
            name = None;
        }
    }
    Value::Object(versions)
}
