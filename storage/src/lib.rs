//! k3rs-storage: the MVCC key-value state machine on sled, with etcd v3 semantics.
//!
//! No networking, no Raft: [`Store::apply_batch`] is a deterministic function of the store's
//! state and the commands; the Raft layer calls it with committed log entries and an opaque
//! `meta` blob (its last-applied log id and membership) that is persisted atomically with the
//! batch. Reads ([`Store::range`]) and watches ([`Store::watch`]) see only applied state.

pub mod types;
pub mod watch;

mod compact;
mod dbdir;
mod keyindex;
mod kv;
mod lease;
mod range;
mod reader;
mod record;
mod revision;
mod snapshot;
mod state;
mod store;
mod txn;
mod writer;

pub use store::{Error, Result, Store};
pub use types::*;
pub use watch::{Event, EventKind, WatchBatch, WatchRequest, Watcher};
