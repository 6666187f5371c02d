//! The openraft type configuration: what a log entry carries and how members are described.

use std::fmt;

use k3rs_storage::{Command, Output};
use serde::{Deserialize, Serialize};

use crate::NodeId;

/// A member's address book entry, replicated in membership log entries.
///
/// Like openraft's `BasicNode`, but with what etcd's MemberList reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The member's name.
    pub name: String,
    /// Its peer URLs.
    pub peer_urls: Vec<String>,
    /// Its client URLs.
    pub client_urls: Vec<String>,
    /// Added as a voter through etcd's MemberAdd: joined as a learner, and the leader promotes
    /// it once it has caught up (see `membership`). Never cleared (harmless once a voter).
    #[serde(default)]
    pub auto_promote: bool,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} peers={:?}", self.name, self.peer_urls)
    }
}

/// The payload of one log entry: commands of concurrent clients proposed together.
///
/// openraft 0.9 awaits the log flush of each append before taking the next client write, so
/// one entry per command would cost one fdatasync per command whatever the WAL does. Batching
/// proposals (see `proposer`) is what lets many clients share one fdatasync and one
/// `Store::apply_batch`. Each command still gets its own revision.
pub type Proposal = Vec<Command>;

/// What applying one log entry produced: one output per command (none for the blank and
/// membership entries openraft writes itself).
pub type Response = Vec<Output>;

openraft::declare_raft_types!(
    /// Raft types of k3rs: log entries carry batches of [`k3rs_storage::Command`]s.
    ///
    /// The `single-term-leader` feature (standard Raft: one leader per term) changes the
    /// serialized form of `LogId` and `Vote`, i.e. of the WAL and vote files: it must never be
    /// toggled for an existing data directory.
    pub TypeConfig:
        D = Proposal,
        R = Response,
        NodeId = NodeId,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Shorthands for openraft's generic types instantiated with [`TypeConfig`].
pub type Entry = openraft::Entry<TypeConfig>;
/// A log entry's id.
pub type LogId = openraft::LogId<NodeId>;
/// A vote.
pub type Vote = openraft::Vote<NodeId>;
/// A membership as stored.
pub type StoredMembership = openraft::StoredMembership<NodeId, NodeInfo>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, NodeInfo>;
/// A storage error.
pub type StorageError = openraft::StorageError<NodeId>;
/// The Raft handle.
pub type Raft = openraft::Raft<TypeConfig>;
