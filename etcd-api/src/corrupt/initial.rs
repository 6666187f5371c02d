//! The startup corruption check (etcd's `--experimental-initial-corrupt-check`,
//! `CheckInitialHashKV`): a restarting member compares its `HashKV` with every peer's at its
//! own revision before it serves clients, and refuses to start if one differs.
//!
//! # Guarantees
//! - [`mismatches`] is etcd's decision, without I/O: a peer differs when its hash at the
//!   local revision is different *and* its compacted revision is the same as the local one
//!   (with another compaction the hashes cover different records and prove nothing).
//! - Peers that do not answer, are behind the local revision (`future revision`) or have
//!   compacted it away are skipped with a warning, as in etcd: the check passes when no
//!   answering peer differs, also when none answers.
//!
//! # Where k3rs differs
//! etcd checks before its Raft node starts. k3rs starts Raft first (a restarted member
//! catches up with the leader before [`k3rs_raft::Node::start_member`] returns) and checks
//! before it serves the etcd API or the Kubernetes API; a member that fails the check stops
//! Raft again and exits without having served a client.

use std::sync::Arc;

use k3rs_raft::Node;
use k3rs_storage::KvHash;

use super::{local_hash, PeerHash, PeerHashes};
use crate::error::EtcdError;

/// Why the startup check refuses to let this member start.
#[derive(Debug, thiserror::Error)]
pub enum InitialCheckError {
    /// A peer's hash differs at the same revision and compaction: this member's data (or the
    /// peer's) is corrupt. etcd's message, with the members named.
    #[error(
        "{member_id:x} found data inconsistency with peers (different HashKV at revision \
         {revision} on {}): remove this member and join it again with a fresh data dir",
        fmt_ids(.peers)
    )]
    Mismatch {
        /// This member.
        member_id: u64,
        /// The revision compared.
        revision: i64,
        /// The peers whose hash differs.
        peers: Vec<u64>,
    },
    /// The local store could not be hashed.
    #[error("hashing the local store: {0}")]
    LocalHash(#[source] EtcdError),
}

fn fmt_ids(ids: &[u64]) -> String {
    let ids: Vec<String> = ids.iter().map(|id| format!("{id:x}")).collect();
    ids.join(", ")
}

/// etcd's decision: the peers whose hash differs from `local` at the same compaction.
pub fn mismatches(local: KvHash, peers: &[PeerHash]) -> Vec<u64> {
    peers
        .iter()
        .filter(|p| p.hash != local.hash && p.compact_revision == local.compact_revision)
        .map(|p| p.member_id)
        .collect()
}

/// Compares this member's `HashKV` with every other member's (learners included, as etcd
/// asks every peer) at this member's current revision.
pub async fn check_initial(node: &Arc<Node>, peers: &PeerHashes) -> Result<(), InitialCheckError> {
    let me = node.status().member_id;
    tracing::info!(member = %format!("{me:x}"), "starting initial corruption check");
    let local = local_hash(node, 0)
        .await
        .map_err(InitialCheckError::LocalHash)?;
    let mut answers = Vec::new();
    for m in node.members().iter().filter(|m| m.id != me) {
        let peer = format!("{:x}", m.id);
        match peers.fetch(m, local.current_revision).await {
            Ok(answer) => {
                if answer.hash != local.hash && answer.compact_revision != local.compact_revision {
                    tracing::warn!(%peer, local_compact = local.compact_revision, peer_compact = answer.compact_revision, "found different compact revision values from remote peer");
                }
                answers.push(answer);
            }
            Err(e) => {
                tracing::warn!(%peer, revision = local.current_revision, error = %e, "cannot fetch hash from remote peer")
            }
        }
    }
    let differ = mismatches(local, &answers);
    if differ.is_empty() {
        tracing::info!(
            revision = local.current_revision,
            hash = local.hash,
            peers = answers.len(),
            "initial corruption checking passed; no corruption"
        );
        return Ok(());
    }
    for p in answers.iter().filter(|p| differ.contains(&p.member_id)) {
        tracing::error!(
            peer = %format!("{:x}", p.member_id),
            revision = local.current_revision,
            local_hash = local.hash,
            peer_hash = p.hash,
            compact_revision = local.compact_revision,
            "found different hash values from remote peer"
        );
    }
    Err(InitialCheckError::Mismatch {
        member_id: me,
        revision: local.current_revision,
        peers: differ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(member_id: u64, compact: i64, hash: u32) -> PeerHash {
        PeerHash {
            member_id,
            revision: 20,
            compact_revision: compact,
            hash,
        }
    }

    #[test]
    fn only_a_different_hash_at_the_same_compaction_is_a_mismatch() {
        let local = KvHash {
            hash: 7,
            current_revision: 10,
            compact_revision: 4,
        };
        assert_eq!(mismatches(local, &[]), Vec::<u64>::new());
        assert_eq!(
            mismatches(local, &[peer(2, 4, 7), peer(3, 4, 7)]),
            Vec::<u64>::new()
        );
        // Compacted differently: not comparable.
        assert_eq!(mismatches(local, &[peer(2, 6, 9)]), Vec::<u64>::new());
        assert_eq!(
            mismatches(local, &[peer(2, 4, 9), peer(3, 6, 9), peer(4, 4, 8)]),
            vec![2, 4]
        );
    }

    #[test]
    fn the_refusal_names_the_members_as_etcd_does() {
        let e = InitialCheckError::Mismatch {
            member_id: 0xabc,
            revision: 12,
            peers: vec![0x1f, 0x2e],
        };
        assert_eq!(
            e.to_string(),
            "abc found data inconsistency with peers (different HashKV at revision 12 on 1f, \
             2e): remove this member and join it again with a fresh data dir"
        );
    }
}
