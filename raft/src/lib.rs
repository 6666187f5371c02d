//! k3rs-raft: replicates `k3rs-storage` commands with openraft.
//!
//! A single server is a Raft cluster of one, on the same code path as HA.
//!
//! # Layout
//! - `wal`: our own write-ahead log (segments, CRC framing, group-commit fdatasync), holding
//!   the Raft log and vote; `log_store` adapts it to openraft.
//! - `state_machine`: applies committed entries to [`k3rs_storage::Store`] in batches, with the
//!   applied log id stored atomically in the same batch; builds and installs snapshots
//!   (`snapshot`).
//! - `lessor`: lease deadlines (leader-only, in memory) and the expiry loop.
//! - `network`: the peer transport (none yet: a cluster of one).
//! - `proposer`: batches concurrent clients' commands into one log entry.
//! - [`Node`] ties them together.

use std::path::PathBuf;
use std::time::Duration;

mod lessor;
mod log_store;
mod network;
mod node;
mod proposer;
mod snapshot;
mod state_machine;
pub mod types;
mod wal;

pub use node::Node;

/// Raft node identity.
pub type NodeId = u64;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Directory that holds `wal/`, `sm/` (the sled state machine) and `snapshots/`.
    pub data_dir: PathBuf,
    pub node_id: NodeId,
    /// Name reported by MemberList.
    pub name: String,
    /// URLs reported by MemberList.
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub heartbeat_interval: Duration,
    pub election_timeout: Duration,
    /// Take a snapshot (and purge the WAL) after this many applied log entries. An entry holds
    /// the commands of concurrent clients proposed together, so under load it covers many
    /// writes; a snapshot is also taken every 256 MiB of proposed commands.
    pub snapshot_entries: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("raft: no leader")]
    NoLeader,
    #[error("raft: stopped")]
    Stopped,
    #[error("raft: timed out")]
    Timeout,
    #[error("raft fatal: {0}")]
    Fatal(String),
    #[error(transparent)]
    Storage(#[from] k3rs_storage::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Point-in-time status, for etcd's Maintenance.Status.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub member_id: NodeId,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
}

/// A member as reported by MemberList.
#[derive(Debug, Clone)]
pub struct Member {
    pub id: NodeId,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}
