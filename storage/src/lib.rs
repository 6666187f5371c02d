//! k3rs-storage: the MVCC key-value state machine on sled, with etcd v3 semantics.
//!
//! No networking, no Raft: [`Store::apply_batch`] is a deterministic function of the store's
//! state and the commands; the Raft layer calls it with committed log entries and an opaque
//! `meta` blob (its last-applied log id and membership) that is persisted atomically with the
//! batch. Reads ([`Store::range`]) and watches ([`Store::watch`]) see only applied state.
//!
//! # Layout
//! `keyindex` (etcd's treeIndex: key → generations of revisions, in memory, no values),
//! `revision`/`record` (on-disk encoding), `state` (in-memory state, rebuilt on open),
//! `writer` (a batch being applied: overlay of pending records, events), `commit` (its sled
//! write, which may finish after the outputs are returned), `kv`/`txn`/`lease`/
//! `compact`/`alarm` (the commands), `range` (reads), `watch` (the hub), `snapshot` and
//! `dbdir` (export/import, defragmentation, database generations), `hash` (etcd's `HashKV`
//! and `Hash` over etcd's encoding of the data), `history` (the retained history in etcd's
//! terms, for etcd-format snapshots).
//!
//! # Where the store checks what etcd checks elsewhere
//! etcd's gRPC layer rejects empty keys, `ignore_value` with a value, `ignore_lease` with a
//! lease, more than 128 ops per txn level and duplicate keys in a txn; here these are
//! [`RequestError`]s of the command, so the outcome is part of the replicated result.
//!
//! # Deliberate differences from etcd
//! - A txn whose `ignore_*` put targets a key that an earlier delete of the same txn removed
//!   (possible only with a `range_end` of `[0]`, which etcd's duplicate check compares
//!   literally) fails with `KeyNotFound`; etcd panics there.
//! - Sorting is stable (ties keep key order); etcd's sort is unstable for more than 12 keys.
//! - `LeaseGrant { id: 0 }` picks IDs from a persisted counter, not at random.

pub mod bytes_form;
pub mod types;
pub mod watch;

mod alarm;
mod commit;
mod compact;
mod dbdir;
mod disk_size;
pub mod etcd_layout;
pub mod hash;
mod history;
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

pub use commit::PendingCommit;
pub use hash::KvHash;
pub use history::{HistoryRecord, HistoryState};
pub use snapshot::{SnapshotExport, SnapshotInfo};
pub use store::{Error, Result, Store};
pub use types::*;
pub use watch::{Event, EventKind, WatchBatch, WatchRequest, Watcher};
