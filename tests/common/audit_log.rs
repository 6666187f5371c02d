//! Reading an audit log (`audit.k8s.io/v1` Event JSON lines) the server under test writes.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every event in the log (none while it does not exist yet).
pub fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Waits (bounded, 20 s) for an event matching `pred`; panics with the log otherwise.
pub fn wait_event(log: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(e) = events(log).into_iter().find(&pred) {
            return e;
        }
        if Instant::now() > deadline {
            panic!(
                "no audit event for {what}; log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The string at JSON pointer `ptr` ("" when absent).
pub fn s<'a>(e: &'a Value, ptr: &str) -> &'a str {
    e.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}
