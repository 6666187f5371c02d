//! The API server's view of its datastore: exactly the etcd v3 operations kube-apiserver
//! sends (see `etcd-semantics.md`), behind one trait with two implementations:
//! [`Embedded`] (the in-process Raft store, no gRPC hop) and [`EtcdClient`] (an external etcd).
//!
//! # Guarantees (both implementations; checked by `tests/datastore_conformance.rs`)
//! - Reads are linearizable (the embedded store passes a Raft read barrier first).
//! - `create` is `Txn(If MOD(key)==0 Then Put Else Range)`, `update`/`delete` are
//!   `Txn(If MOD(key)==rev Then Put|Delete Else Range)`: one revision per successful write,
//!   and a failed precondition returns the key's current state.
//! - Every response carries the store revision it was served at.
//! - Watches are ordered, gap-free and end with [`WatchItem::Compacted`] when their start was
//!   compacted away.

pub mod compactor;
mod embedded;
pub mod encryption;
mod etcd;
pub mod quota;

/// etcd v3 `mvccpb` messages (KeyValue, Event), generated from `proto/mvccpb/kv.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod mvccpb {
    include!(concat!(env!("OUT_DIR"), "/mvccpb.rs"));
}

/// etcd v3 `etcdserverpb` messages, tonic servers and clients (KV, Watch, Lease, Cluster,
/// Maintenance), generated from `proto/etcdserverpb/rpc.proto`. Wire-compatible with etcd.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod etcdpb {
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
}

use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub use embedded::Embedded;
pub use etcd::{channel as etcd_channel, EtcdClient, EtcdTls};
pub use k3rs_storage::KeyValue;

/// Datastore failures that are not an answer about the data itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The requested revision was compacted away.
    #[error("mvcc: required revision has been compacted (compacted at {compact_revision})")]
    Compacted {
        /// The oldest revision still kept.
        compact_revision: i64,
    },
    /// The requested revision is newer than the store.
    #[error("mvcc: required revision is a future revision")]
    FutureRevision,
    /// No leader, connection lost, storage failure: retry later.
    #[error("datastore unavailable: {0}")]
    Unavailable(String),
}

/// How the API answers a datastore failure (kube-apiserver's storage error mapping).
impl From<Error> for k3rs_apimachinery::status::ApiError {
    fn from(e: Error) -> k3rs_apimachinery::status::ApiError {
        match e {
            Error::Compacted { .. } => k3rs_apimachinery::status::ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ),
            Error::FutureRevision => {
                k3rs_apimachinery::status::ApiError::timeout("Too large resource version")
            }
            Error::Unavailable(m) => k3rs_apimachinery::status::ApiError::unavailable(m),
        }
    }
}

/// A datastore result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A range over `[key, range_end)` (kube-apiserver's list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// First key (the prefix, or a continue key).
    pub key: Vec<u8>,
    /// Exclusive end (usually `prefix_end(prefix)`).
    pub range_end: Vec<u8>,
    /// 0 = no limit.
    pub limit: i64,
    /// 0 = latest.
    pub revision: i64,
}

/// What a list returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListResponse {
    /// The keys, in key order.
    pub kvs: Vec<KeyValue>,
    /// Whether `limit` cut the result.
    pub more: bool,
    /// Number of keys in the range, ignoring `limit`.
    pub count: i64,
    /// Store revision the response was served at (the header revision).
    pub revision: i64,
}

/// The outcome of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Applied at `revision` (the new `mod_revision`; for a delete, the delete revision).
    Done {
        /// The write's revision.
        revision: i64,
    },
    /// The precondition failed: the key's current state (None = absent) at `revision`.
    Conflict {
        /// The key as it is.
        current: Option<KeyValue>,
        /// The store's revision when it was read.
        revision: i64,
    },
}

/// One change of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Created or modified; `prev` is the previous version when asked and known.
    Put {
        /// The key as written.
        kv: KeyValue,
        /// The version before.
        prev: Option<KeyValue>,
    },
    /// Deleted at `revision`; `prev` is the last version when asked and known.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// The delete's revision.
        revision: i64,
        /// The last version.
        prev: Option<KeyValue>,
    },
}

impl Event {
    /// The key changed.
    pub fn key(&self) -> &[u8] {
        match self {
            Event::Put { kv, .. } => &kv.key,
            Event::Delete { key, .. } => key,
        }
    }

    /// The revision of the change.
    pub fn revision(&self) -> i64 {
        match self {
            Event::Put { kv, .. } => kv.mod_revision,
            Event::Delete { revision, .. } => *revision,
        }
    }
}

/// What a watch stream yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchItem {
    /// Events of whole revisions, in order.
    Events(Vec<Event>),
    /// Everything up to `revision` was delivered (an etcd progress notification).
    Progress {
        /// The store revision reached.
        revision: i64,
    },
    /// The watch could not continue from its next revision; it is over.
    Compacted {
        /// The oldest revision still kept.
        compact_revision: i64,
    },
    /// The connection to the store failed; the watch is over.
    Failed(String),
}

/// A watch over a prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchRequest {
    /// First key watched.
    pub key: Vec<u8>,
    /// Exclusive end (empty: only `key`).
    pub range_end: Vec<u8>,
    /// First revision to deliver (inclusive); 0 = changes after now.
    pub start_revision: i64,
    /// Deliver each event's previous version.
    pub prev_kv: bool,
    /// Ask for periodic progress notifications.
    pub progress_notify: bool,
}

/// The write of a guarded transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardedOp {
    /// Write `value` under `lease` (0: none).
    Put {
        /// The value.
        value: Vec<u8>,
        /// The lease.
        lease: i64,
    },
    /// Delete the key.
    Delete,
}

/// etcd semantics as kube-apiserver uses them. Object-safe: the API server holds an
/// `Arc<dyn Datastore>`.
pub trait Datastore: Send + Sync + 'static {
    /// `Range(key, limit=1)`: the key's latest version, with the header revision.
    fn get(&self, key: &[u8]) -> BoxFuture<'_, Result<(Option<KeyValue>, i64)>>;

    /// `Range(key, range_end, limit, revision)`.
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListResponse>>;

    /// `Txn(If MOD(key)==mod_revision Then <op> Else Range(key))`: the one conditional write
    /// kube-apiserver issues (create guards with `mod_revision == 0`).
    fn guarded(
        &self,
        key: &[u8],
        mod_revision: i64,
        op: GuardedOp,
    ) -> BoxFuture<'_, Result<WriteOutcome>>;

    /// `Txn(If MOD(key)==0 Then Put(key, value, lease) Else Range(key))`.
    fn create(
        &self,
        key: &[u8],
        value: Vec<u8>,
        lease: i64,
    ) -> BoxFuture<'_, Result<WriteOutcome>> {
        self.guarded(key, 0, GuardedOp::Put { value, lease })
    }

    /// `Txn(If MOD(key)==mod_revision Then Put(key, value) Else Range(key))`.
    fn update(
        &self,
        key: &[u8],
        mod_revision: i64,
        value: Vec<u8>,
    ) -> BoxFuture<'_, Result<WriteOutcome>> {
        self.guarded(key, mod_revision, GuardedOp::Put { value, lease: 0 })
    }

    /// `Txn(If MOD(key)==mod_revision Then DeleteRange(key) Else Range(key))`.
    fn delete(&self, key: &[u8], mod_revision: i64) -> BoxFuture<'_, Result<WriteOutcome>> {
        self.guarded(key, mod_revision, GuardedOp::Delete)
    }

    /// Starts a watch. Errors with `Compacted` when the start revision is gone.
    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<BoxStream<'static, WatchItem>>>;

    /// Grants a lease of `ttl` seconds (raised to the store's minimum) and returns its ID.
    /// Keys written with it are deleted when it expires (kube-apiserver's event TTL).
    fn grant_lease(&self, ttl: i64) -> BoxFuture<'_, Result<i64>>;

    /// The store's current revision (linearizable).
    fn current_revision(&self) -> BoxFuture<'_, Result<i64>>;

    /// Compacts history below `revision`.
    fn compact(&self, revision: i64) -> BoxFuture<'_, Result<()>>;
}

/// The exclusive end of the range of every key starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"/registry/pods/"), b"/registry/pods0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
