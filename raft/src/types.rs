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
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} peers={:?}", self.name, self.peer_urls)
    }
}

/// What applying one log entry produced: `Some` for a client command, `None` for the blank and
/// membership entries openraft writes itself (nobody waits for those).
pub type Response = Option<Output>;

openraft::declare_raft_types!(
    /// Raft types of k3rs: log entries carry [`k3rs_storage::Command`]s.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = NodeId,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Shorthands for openraft's generic types instantiated with [`TypeConfig`].
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, NodeInfo>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, NodeInfo>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;
