//! The periodic corruption check (etcd's `--experimental-corrupt-check-time`,
//! `etcdserver/corrupt.go` `checkHashKV`): the leader compares `HashKV` of every member at
//! one revision and raises CORRUPT for a member whose data differs. CORRUPT refuses every
//! write on every member (see `k3rs_storage`'s alarms) until it is disarmed.
//!
//! # Guarantees
//! - Only the leader checks; a check raises at most one alarm, as etcd's does.
//! - [`decide`] is etcd's decision, without I/O: the leader's hash before and after a
//!   linearizable read (same revision and compaction but a different hash: its own data
//!   changed under it), then each peer's answer: a newer revision or compaction than the
//!   leader's, or the same compaction with a different hash at the leader's revision.
//! - Peers that do not answer (down, partitioned) are skipped, as in etcd.

use std::time::Duration;

use k3rs_datastore::{etcd_channel, etcdpb as pb, EtcdTls};
use k3rs_raft::Member;
use k3rs_storage::{AlarmAction, AlarmType, Command, KvHash};
use tokio_util::sync::CancellationToken;

use crate::error::EtcdError;
use crate::Api;

/// How long the leader waits for one peer's `HashKV`.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// A peer's answer to `HashKV` at the leader's revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerHash {
    /// The peer's member id.
    pub member_id: u64,
    /// The peer's current revision (its response header's).
    pub revision: i64,
    /// The peer's compacted revision (hashes compare only past it).
    pub compact_revision: i64,
    /// The peer's `HashKV` at the leader's revision.
    pub hash: u32,
}

/// etcd's `checkHashKV` decision: the member to raise CORRUPT for, if any. `before` and
/// `after` are the leader's own `HashKV(0)` before asking the peers and after a
/// linearizable read.
pub fn decide(leader_id: u64, before: KvHash, after: KvHash, peers: &[PeerHash]) -> Option<u64> {
    if after.hash != before.hash
        && after.current_revision == before.current_revision
        && after.compact_revision == before.compact_revision
    {
        return Some(leader_id);
    }
    peers
        .iter()
        .find(|p| {
            p.revision > after.current_revision
                || p.compact_revision > after.compact_revision
                || (p.compact_revision == before.compact_revision && p.hash != before.hash)
        })
        .map(|p| p.member_id)
}

/// Asks other members for their `HashKV` over their etcd client URLs, with the cluster's
/// etcd client certificate.
#[derive(Debug, Clone)]
pub struct PeerHashes {
    /// The client certificate and CA the peers' client URLs are reached with.
    pub tls: EtcdTls,
}

impl PeerHashes {
    /// `member`'s hash at `revision`; `None` if it does not answer.
    async fn fetch(&self, member: &Member, revision: i64) -> Option<PeerHash> {
        let url = member.client_urls.first()?;
        let channel = match etcd_channel(url, &self.tls) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(member = %format!("{:x}", member.id), error = %e, "corruption check: no channel");
                return None;
            }
        };
        let mut client = pb::maintenance_client::MaintenanceClient::new(channel);
        let call = client.hash_kv(pb::HashKvRequest { revision });
        let resp = match tokio::time::timeout(PEER_TIMEOUT, call).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => {
                tracing::warn!(member = %format!("{:x}", member.id), error = %status.message(), "corruption check: HashKV failed");
                return None;
            }
            Err(_) => {
                tracing::warn!(member = %format!("{:x}", member.id), "corruption check: HashKV timed out");
                return None;
            }
        };
        Some(PeerHash {
            member_id: member.id,
            revision: resp.header.map_or(0, |h| h.revision),
            compact_revision: resp.compact_revision,
            hash: resp.hash,
        })
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
async fn check(api: &Api, peers: &PeerHashes) -> Result<(), EtcdError> {
    let node = api.node();
    let before = local_hash(api).await?;
    let me = node.status().member_id;
    let mut answers = Vec::new();
    for m in node
        .members()
        .iter()
        .filter(|m| m.id != me && !m.is_learner)
    {
        answers.extend(peers.fetch(m, before.current_revision).await);
    }
    node.read_barrier().await?;
    let after = local_hash(api).await?;
    let Some(corrupt) = decide(me, before, after, &answers) else {
        tracing::debug!(
            revision = before.current_revision,
            hash = before.hash,
            peers = answers.len(),
            "corruption check: members agree"
        );
        return Ok(());
    };
    tracing::error!(
        member = %format!("{corrupt:x}"),
        leader_hash = before.hash,
        revision = before.current_revision,
        peers = ?answers,
        "hash mismatch: raising the CORRUPT alarm"
    );
    node.write(Command::Alarm {
        action: AlarmAction::Activate,
        member_id: corrupt,
        alarm: AlarmType::Corrupt,
    })
    .await?
    .result?;
    Ok(())
}

async fn local_hash(api: &Api) -> Result<KvHash, EtcdError> {
    let node = api.node().clone();
    tokio::task::spawn_blocking(move || node.store().hash_kv(0))
        .await
        .map_err(|e| EtcdError::Internal(format!("hash task: {e}")))??
        .map_err(EtcdError::from)
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

    #[test]
    fn agreeing_members_raise_nothing() {
        let h = at(7, 10, 4);
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 7), peer(3, 9, 4, 7)]),
            None
        );
        // A peer behind on compaction is not compared.
        assert_eq!(decide(1, h, h, &[peer(2, 10, 2, 99)]), None);
        // The leader moved on between the two hashes: not a mismatch of its own.
        assert_eq!(decide(1, h, at(8, 11, 4), &[]), None);
    }

    #[test]
    fn the_leaders_own_data_changing_under_it_is_corruption() {
        assert_eq!(decide(1, at(7, 10, 4), at(8, 10, 4), &[]), Some(1));
    }

    #[test]
    fn a_peer_ahead_or_different_is_corrupt() {
        let h = at(7, 10, 4);
        assert_eq!(decide(1, h, h, &[peer(2, 11, 4, 7)]), Some(2));
        assert_eq!(decide(1, h, h, &[peer(2, 10, 5, 7)]), Some(2));
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 7), peer(3, 10, 4, 8)]),
            Some(3)
        );
        // One alarm per check: the first offender.
        assert_eq!(
            decide(1, h, h, &[peer(2, 10, 4, 9), peer(3, 10, 4, 8)]),
            Some(2)
        );
    }
}
