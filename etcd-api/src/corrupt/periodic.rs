//! The periodic corruption check (etcd's `--experimental-corrupt-check-time`,
//! `etcdserver/corrupt.go` `PeriodicCheck`): the leader compares `HashKV` of every member at
//! one revision and raises CORRUPT for a member whose data differs. CORRUPT refuses every
//! write on every member (see `k3rs_storage`'s alarms) until it is disarmed.
//!
//! # Guarantees
//! - Only the leader checks.
//! - [`decide`] is etcd's decision, without I/O: the leader's hash before and after a
//!   linearizable read (same revision and compaction but a different hash: its own data
//!   changed under it), then a peer newer than the leader (a later revision or compaction);
//!   each of these raises one alarm, for the first such member, as etcd's periodic check.
//! - Hashes that differ at the same compaction are judged by quorum, as etcd's compaction hash
//!   check does ([`super::quorum`]): the members outside the group a quorum agrees on are
//!   corrupt, the leader included (etcd's periodic check would name the first healthy peer of
//!   a corrupted leader); with no such group, CORRUPT is raised for member 0 (the cluster).
//! - Peers that do not answer (down, partitioned) are skipped, as in etcd, but count in the
//!   quorum's member total.

use std::time::Duration;

use k3rs_storage::{AlarmAction, AlarmType, Command, KvHash};
use tokio_util::sync::CancellationToken;

use super::quorum::{check_peer_hashes, Verdict};
use super::{local_hash, PeerHash, PeerHashes};
use crate::error::EtcdError;
use crate::Api;

/// The members to raise CORRUPT for (none: all is well). `before` and `after` are the leader's
/// own `HashKV(0)` before asking the peers and after a linearizable read; `answers` the peers'
/// hashes at `before`'s revision, of `asked` peers.
pub fn decide(
    leader_id: u64,
    before: KvHash,
    after: KvHash,
    answers: &[PeerHash],
    asked: usize,
) -> Vec<u64> {
    if after.hash != before.hash
        && after.current_revision == before.current_revision
        && after.compact_revision == before.compact_revision
    {
        return vec![leader_id];
    }
    if let Some(ahead) = answers.iter().find(|p| {
        p.revision > after.current_revision || p.compact_revision > after.compact_revision
    }) {
        return vec![ahead.member_id];
    }
    match check_peer_hashes(leader_id, before, answers, asked) {
        Verdict::Consistent { .. } => Vec::new(),
        v => v.alarms(),
    }
}

/// Checks every `interval` while this member leads, until `stop`.
pub async fn run(api: Api, interval: Duration, peers: PeerHashes, stop: CancellationToken) {
    tracing::info!(?interval, "corruption check enabled");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let st = api.node().status();
        if st.leader != Some(st.member_id) {
            continue;
        }
        if let Err(e) = check(&api, &peers).await {
            tracing::warn!(error = %e, "corruption check failed");
        }
    }
}

/// One check: hashes, the decision, and the alarm it asks for.
async fn check(api: &Api, peers_client: &PeerHashes) -> Result<(), EtcdError> {
    let node = api.node();
    let before = local_hash(node, 0).await?;
    let me = node.status().member_id;
    let mut answers = Vec::new();
    let peers: Vec<_> = node
        .members()
        .into_iter()
        .filter(|m| m.id != me && !m.is_learner)
        .collect();
    for m in &peers {
        match peers_client.fetch(m, before.current_revision).await {
            Ok(answer) => answers.push(answer),
            Err(e) => {
                tracing::warn!(member = %format!("{:x}", m.id), error = %e, "corruption check: no hash from a peer")
            }
        }
    }
    node.read_barrier().await?;
    let after = local_hash(node, 0).await?;
    let corrupt = decide(me, before, after, &answers, peers.len());
    if corrupt.is_empty() {
        tracing::debug!(
            revision = before.current_revision,
            hash = before.hash,
            peers = answers.len(),
            "corruption check: members agree"
        );
        return Ok(());
    }
    for member in corrupt {
        tracing::error!(
            member = %format!("{member:x}"),
            leader = %format!("{me:x}"),
            leader_hash = before.hash,
            revision = before.current_revision,
            peers = ?answers,
            "hash mismatch: raising the CORRUPT alarm"
        );
        raise(api, member).await?;
    }
    Ok(())
}

/// Raises CORRUPT for `member` through Raft.
async fn raise(api: &Api, member: u64) -> Result<(), EtcdError> {
    api.node()
        .write(Command::Alarm {
            action: AlarmAction::Activate,
            member_id: member,
            alarm: AlarmType::Corrupt,
        })
        .await?
        .result?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hash: u32, revision: i64, compact: i64) -> KvHash {
        KvHash {
            hash,
            current_revision: revision,
            compact_revision: compact,
        }
    }

    fn peer(member_id: u64, revision: i64, compact: i64, hash: u32) -> PeerHash {
        PeerHash {
            member_id,
            revision,
            compact_revision: compact,
            hash,
        }
    }

    const NONE: Vec<u64> = Vec::new();

    #[test]
    fn agreeing_members_raise_nothing() {
        let h = at(7, 10, 4);
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 7), peer(3, 9, 4, 7)], 2),
            NONE
        );
        // A peer behind on compaction is not compared.
        assert_eq!(decide(1, h, h, &[peer(2, 10, 2, 99)], 1), NONE);
        // The leader moved on between the two hashes: not a mismatch of its own.
        assert_eq!(decide(1, h, at(8, 11, 4), &[], 0), NONE);
    }

    #[test]
    fn the_leaders_own_data_changing_under_it_is_corruption() {
        assert_eq!(decide(1, at(7, 10, 4), at(8, 10, 4), &[], 0), vec![1]);
    }

    #[test]
    fn a_peer_ahead_is_corrupt() {
        let h = at(7, 10, 4);
        assert_eq!(decide(1, h, h, &[peer(2, 11, 4, 7)], 1), vec![2]);
        assert_eq!(decide(1, h, h, &[peer(2, 10, 5, 7)], 1), vec![2]);
        // One alarm for an ordering fault: the first offender.
        assert_eq!(
            decide(1, h, h, &[peer(2, 11, 4, 7), peer(3, 10, 5, 7)], 2),
            vec![2]
        );
    }

    #[test]
    fn differing_hashes_are_judged_by_quorum() {
        let h = at(7, 10, 4);
        // A follower against the leader and the other follower.
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 7), peer(3, 10, 4, 8)], 2),
            vec![3]
        );
        // The leader against both followers: the leader itself.
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 9), peer(3, 10, 4, 9)], 2),
            vec![1]
        );
        // Nobody agrees: the whole cluster (member 0), as etcd.
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 9), peer(3, 10, 4, 8)], 2),
            vec![0]
        );
        // Two of three answering and disagreeing: no quorum either.
        assert_eq!(decide(1, h, h, &[peer(2, 10, 4, 9)], 2), vec![0]);
    }
}
