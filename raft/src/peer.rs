//! What members say to each other beyond Raft: the peer configuration (address, TLS, how to
//! bootstrap) and the requests a follower forwards to the leader.
//!
//! The transport itself is tonic (`proto/k3rs/raftpb.proto`): the client side is
//! [`network`](crate::network), the server side `peer_server`. Messages are rmp-serde encoded
//! Rust values inside a single `bytes` field.

use std::net::SocketAddr;

use k3rs_storage::{Command, Output};
use serde::{Deserialize, Serialize};

use crate::types::NodeInfo;
use crate::NodeId;

/// Generated from `proto/k3rs/raftpb.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub(crate) mod pb {
    include!(concat!(env!("OUT_DIR"), "/k3rs.raftpb.rs"));
}

/// PEM material for mutual TLS between members: every member presents a certificate signed
/// by the peer CA and accepts only peers that do.
#[derive(Clone)]
pub struct PeerTls {
    /// The peer CA certificate.
    pub ca_pem: Vec<u8>,
    /// This member's peer certificate.
    pub cert_pem: Vec<u8>,
    /// Its key.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").finish_non_exhaustive()
    }
}

/// How a node comes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// First start of a new cluster: initialize a cluster of one (nothing to do if the data
    /// dir is already initialized).
    NewCluster,
    /// Join an existing cluster that already lists this member (etcd's `member add`, then
    /// start the new member): wait for the leader to replicate to us; never initialize.
    ///
    /// On first start the member ID is the one the cluster lists for this member's peer URL,
    /// asked from `peers` (peer URLs of existing members; if empty, `NodeConfig::node_id` is
    /// used as is). It is kept in `<data_dir>/member-id` for later starts.
    Join {
        /// Peer URLs of existing members.
        peers: Vec<String>,
    },
    /// Quorum-loss recovery: rewrite the membership to this member alone, keeping the data
    /// and the log, under a new term (etcd's `--force-new-cluster`).
    ClusterReset,
}

/// The peer side of a member.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Where the peer service listens (`--etcd-peer-port`).
    pub listen: SocketAddr,
    /// `None` serves and dials plaintext `http://` peer URLs: for tests only.
    pub tls: Option<PeerTls>,
    /// How the member starts: a new cluster, joining one, or a reset.
    pub bootstrap: Bootstrap,
}

/// What a follower (or any member) asks the leader to do on its behalf.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ForwardRequest {
    /// Propose this batch as one entry; answered with one output per command.
    Propose(Vec<Command>),
    /// ReadIndex: confirm leadership with a quorum and return the index a read must wait for.
    ReadIndex,
    LeaseKeepAlive(i64),
    AddMember {
        id: NodeId,
        node: NodeInfo,
        learner: bool,
    },
    PromoteMember(NodeId),
    RemoveMember(NodeId),
    UpdateMember {
        id: NodeId,
        node: NodeInfo,
    },
    /// The membership as this member knows it (answered by any member).
    Members,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ForwardResponse {
    Outputs(Vec<Output>),
    ReadIndex(u64),
    LeaseTtl(Option<i64>),
    Done,
    Members(Vec<(NodeId, NodeInfo)>),
}

/// Why the leader could not do it. `NotLeader` means nothing was done: safe to retry at the
/// new leader.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
pub enum RemoteError {
    /// This member is not the leader.
    #[error("not the leader")]
    NotLeader,
    /// The leader is shutting down.
    #[error("stopped")]
    Stopped,
    /// The leader did not finish in time.
    #[error("timed out")]
    Timeout,
    /// The leader's Raft failed (its message).
    #[error("{0}")]
    Fatal(String),
    /// A membership change was refused.
    #[error(transparent)]
    Membership(#[from] crate::membership::MembershipError),
}

pub(crate) type ForwardResult = Result<ForwardResponse, RemoteError>;

pub(crate) fn encode<T: Serialize>(v: &T) -> pb::Msg {
    pb::Msg {
        data: rmp_serde::to_vec(v).expect("peer messages always serialize"),
    }
}

/// A peer message that does not decode as the type its RPC carries.
#[derive(Debug, thiserror::Error)]
#[error("decoding a peer message: {0}")]
pub(crate) struct DecodeError(#[from] rmp_serde::decode::Error);

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(m: &pb::Msg) -> Result<T, DecodeError> {
    Ok(rmp_serde::from_slice(&m.data)?)
}

/// Largest peer message: an AppendEntries carries up to `MAX_PAYLOAD_ENTRIES` entries of up to
/// one proposal batch (4 MiB soft limit plus one command) each.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1 << 30;
