//! k3rs-raft: replicates `k3rs-storage` commands with openraft (STUB: signatures are the contract).
//!
//! A single server is a Raft cluster of one, on the same code path as HA.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k3rs_storage::{Command, Output, Store};

pub mod types;
mod wal;

/// Raft node identity.
pub type NodeId = u64;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Directory that holds `wal/` and `sm/` (the sled state machine).
    pub data_dir: PathBuf,
    pub node_id: NodeId,
    /// Name reported by MemberList.
    pub name: String,
    /// URLs reported by MemberList.
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub heartbeat_interval: Duration,
    pub election_timeout: Duration,
    /// Take a snapshot (and purge the WAL) after this many applied entries.
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

pub struct Node {}

impl Node {
    /// Opens the WAL and state machine (replaying the WAL past the applied index), starts Raft,
    /// and initializes a single-member cluster on first start.
    pub async fn start(_cfg: NodeConfig) -> Result<Arc<Node>> {
        unimplemented!()
    }

    /// Proposes a command, waits until it is committed and applied, returns its output.
    pub async fn write(&self, _cmd: Command) -> Result<Output> {
        unimplemented!()
    }

    /// Linearizable read barrier: returns once the local state machine reflects every write
    /// committed before the call (ReadIndex via `ensure_linearizable`).
    pub async fn read_barrier(&self) -> Result<()> {
        unimplemented!()
    }

    /// The applied state, for reads after `read_barrier` and for watches.
    pub fn store(&self) -> &Arc<Store> {
        unimplemented!()
    }

    pub fn status(&self) -> Status {
        unimplemented!()
    }

    pub fn members(&self) -> Vec<Member> {
        unimplemented!()
    }

    /// Renews a lease's deadline (leader only). Returns the TTL in seconds, or None if unknown.
    pub async fn lease_keep_alive(&self, _id: i64) -> Result<Option<i64>> {
        unimplemented!()
    }

    /// Seconds left before the lease expires, or None if unknown.
    pub fn lease_remaining(&self, _id: i64) -> Option<i64> {
        unimplemented!()
    }

    /// Stops Raft and flushes the state machine.
    pub async fn shutdown(&self) -> Result<()> {
        unimplemented!()
    }
}
