//! etcd's corruption checks over `HashKV` (`etcdserver/corrupt.go`):
//! - [`periodic`]: `--experimental-corrupt-check-time`, the leader compares every member's
//!   hash at one revision and raises CORRUPT for a member whose data differs (by quorum,
//!   [`quorum`]: a corrupted leader names itself);
//! - [`initial`]: `--experimental-initial-corrupt-check`, a restarting member compares its
//!   own hash with its peers' before it serves, and refuses to start if they differ.
//!
//! Both ask peers over their etcd client URLs ([`PeerHashes`]) and decide without I/O
//! (`periodic::decide`, `quorum::check_peer_hashes`, `initial::mismatches`), so the decisions are unit-tested with exact
//! values; the multi-member behaviour is tested end to end in `tests/ha/ha_corrupt.rs`.

pub mod initial;
mod peers;
pub mod periodic;
pub mod quorum;

pub use initial::{check_initial, InitialCheckError};
pub use peers::{PeerHash, PeerHashError, PeerHashes};
pub use periodic::{decide, run};
pub use quorum::{check_peer_hashes, Verdict};

use std::sync::Arc;

use k3rs_raft::Node;
use k3rs_storage::KvHash;

use crate::error::EtcdError;

/// This member's `HashKV` at `revision` (0: its current revision), off the async threads.
async fn local_hash(node: &Arc<Node>, revision: i64) -> Result<KvHash, EtcdError> {
    let node = node.clone();
    tokio::task::spawn_blocking(move || node.store().hash_kv(revision))
        .await
        .map_err(|e| EtcdError::Internal(format!("hash task: {e}")))??
        .map_err(EtcdError::from)
}
