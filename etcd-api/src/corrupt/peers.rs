//! Asking another member for its `HashKV`, over its etcd client URL (etcd asks over the peer
//! URLs' `/members/hashkv`; k3rs's peer port speaks only Raft, and a member's client URL
//! serves the same `HashKV`).

use std::time::Duration;

use k3rs_datastore::{etcd_channel, etcdpb as pb, EtcdTls};
use k3rs_raft::Member;

/// How long to wait for one peer's `HashKV`.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// A peer's answer to `HashKV` at a given revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerHash {
    /// The peer's member id.
    pub member_id: u64,
    /// The peer's current revision (its response header's).
    pub revision: i64,
    /// The peer's compacted revision (hashes compare only past it).
    pub compact_revision: i64,
    /// The peer's `HashKV` at the revision asked for.
    pub hash: u32,
}

/// Why a peer gave no hash.
#[derive(Debug, thiserror::Error)]
pub enum PeerHashError {
    /// The member advertises no client URL.
    #[error("no client URL")]
    NoClientUrl,
    /// No channel could be made to its client URL.
    #[error("connecting: {0}")]
    Connect(#[source] k3rs_datastore::Error),
    /// The peer answered with an error: e.g. `mvcc: required revision is a future revision`
    /// (it is behind) or `mvcc: required revision has been compacted`.
    #[error("{}", .0.message())]
    Refused(tonic::Status),
    /// No answer in time.
    #[error("no answer in {PEER_TIMEOUT:?}")]
    TimedOut,
}

/// Asks other members for their `HashKV` over their etcd client URLs, with the cluster's
/// etcd client certificate.
#[derive(Debug, Clone)]
pub struct PeerHashes {
    /// The client certificate and CA the peers' client URLs are reached with.
    pub tls: EtcdTls,
}

impl PeerHashes {
    /// `member`'s hash at `revision`.
    pub async fn fetch(&self, member: &Member, revision: i64) -> Result<PeerHash, PeerHashError> {
        let url = member
            .client_urls
            .first()
            .ok_or(PeerHashError::NoClientUrl)?;
        let channel = etcd_channel(url, &self.tls).map_err(PeerHashError::Connect)?;
        let mut client = pb::maintenance_client::MaintenanceClient::new(channel);
        let call = client.hash_kv(pb::HashKvRequest { revision });
        let resp = tokio::time::timeout(PEER_TIMEOUT, call)
            .await
            .map_err(|_| PeerHashError::TimedOut)?
            .map_err(PeerHashError::Refused)?
            .into_inner();
        Ok(PeerHash {
            member_id: member.id,
            revision: resp.header.map_or(0, |h| h.revision),
            compact_revision: resp.compact_revision,
            hash: resp.hash,
        })
    }
}
