//! The MVCC store through its public API: key-value, txn, lease, watch, compaction, alarm,
//! hash and snapshot semantics with exact expected values, a model-based property test, robustness
//! against arbitrary input and crash consistency (one test binary; each file is a module).

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

mod alarm;
mod compact;
mod crash;
mod deferred;
mod hash;
mod kv;
mod lease;
mod model;
mod robustness;
mod snapshot;
mod txn;
mod watch;
