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
//! - `network` (client) and `peer_server`: the peer transport, tonic with mutual TLS on the
//!   peer port; `peer` holds its configuration and the requests followers forward to the
//!   leader (`forward`): proposals, ReadIndex, lease keep-alives, membership changes.
//! - `proposer`: batches concurrent clients' commands into one log entry.
//! - `membership`: etcd's rules for membership changes; `cluster_reset`: quorum-loss recovery;
//!   `restore`: a member directory made from a datastore snapshot.
//! - [`Node`] ties them together.
//!
//! # openraft pitfalls, handled deliberately
//! - **Two leaders in one term**: openraft 0.9 allows it by default; the `single-term-leader`
//!   feature (standard Raft) is on in the workspace (see [`types::TypeConfig`]).
//! - **Stale reads**: the state machine is read only after [`Node::read_barrier`] (ReadIndex:
//!   the leader's read index, on the leader or asked by a follower), except for etcd's
//!   `serializable` reads, which are local by definition. openraft restores a restarted
//!   leader in its old term without a blank entry, so its read index can lag behind writes
//!   acknowledged before the crash: `read_index` raises it to the log's tail at startup.
//! - **A leader's own fsync before replication**: published 0.9 sends a leader's entries to
//!   the followers only after its own log flush; the workspace patches openraft
//!   (`vendor/openraft/K3RS-PATCH.md`) so the leader replicates while it flushes and counts
//!   itself in the quorum once flushed (tests hold a member's WAL syncs with the
//!   `fault-injection` feature, `fault`).
//! - **Snapshot install blocking the core**: snapshots stream in 1 MiB chunks into a file;
//!   the import runs on a blocking thread (`StateMachine::install_snapshot`) while the Raft
//!   core keeps handling heartbeats and votes; `peer_server` logs how long it took.

use std::path::PathBuf;
use std::time::Duration;

mod cluster_reset;
pub mod conn_limit;
mod failure;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod forward;
mod leader_changes;
mod lessor;
mod log_store;
mod low_priority;
pub mod membership;
mod network;
mod node;
mod paced_sync;
pub mod peer;
mod peer_server;
mod proposal_stats;
mod proposer;
mod read_index;
pub mod restore;
mod snapshot;
pub mod stages;
mod state_machine;
pub mod types;
mod wal;

pub use membership::MembershipError;
pub use node::Node;
pub use peer::{Bootstrap, PeerConfig, PeerTls};
pub use stages::{Stage, Stages};
pub use wal::{FsyncHistogram, FsyncSnapshot};

/// Raft node identity.
pub type NodeId = u64;

/// How to run one Raft member.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Directory that holds `wal/`, `sm/` (the sled state machine) and `snapshots/`.
    pub data_dir: PathBuf,
    /// This member's id (a joining member's is assigned by the cluster).
    pub node_id: NodeId,
    /// Name reported by MemberList.
    pub name: String,
    /// URLs reported by MemberList.
    pub peer_urls: Vec<String>,
    /// Client URLs reported by MemberList.
    pub client_urls: Vec<String>,
    /// How often the leader sends heartbeats.
    pub heartbeat_interval: Duration,
    /// How long a follower waits for the leader before standing for election.
    pub election_timeout: Duration,
    /// Take a snapshot (and purge the WAL) after this many applied log entries. An entry holds
    /// the commands of concurrent clients proposed together, so under load it covers many
    /// writes; a snapshot is also taken when the WAL outgrows the store (see `node`).
    pub snapshot_entries: u64,
}

/// Why a Raft operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No leader is known now; retry.
    #[error("raft: no leader")]
    NoLeader,
    /// The member is shutting down.
    #[error("raft: stopped")]
    Stopped,
    /// The operation did not finish in time.
    #[error("raft: timed out")]
    Timeout,
    /// openraft reported a fatal error (its message).
    #[error("raft fatal: {0}")]
    Fatal(String),
    /// Raft stopped because the datastore's files failed (a WAL or store write, ENOSPC, EIO):
    /// this member answers nothing any more; stop the process (see [`Node::failed`]).
    #[error("the datastore cannot write: {0}")]
    StorageFailed(String),
    /// The state machine store failed.
    #[error(transparent)]
    Storage(#[from] k3rs_storage::Error),
}

/// A Raft result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Point-in-time status, for etcd's Maintenance.Status.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// This member.
    pub member_id: NodeId,
    /// The leader, when one is known.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// The last committed log index.
    pub commit_index: u64,
    /// The last applied log index.
    pub applied_index: u64,
}

/// A member as reported by MemberList.
#[derive(Debug, Clone)]
pub struct Member {
    /// The member id.
    pub id: NodeId,
    /// The member's name.
    pub name: String,
    /// Its peer URLs.
    pub peer_urls: Vec<String>,
    /// Its client URLs.
    pub client_urls: Vec<String>,
    /// Whether it is a learner (not voting).
    pub is_learner: bool,
}
