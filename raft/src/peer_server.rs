//! The Raft peer network, server side: the tonic `RaftPeer` service on the peer port.
//!
//! Raft RPCs go straight to openraft. Forwarded requests are answered only if this node is
//! the leader (`RemoteError::NotLeader` otherwise; the sender retries at the new leader): a
//! request is never forwarded twice, so it cannot loop.
//!
//! # Removed members
//! A member removed from the cluster may never see the entry that removes it (the leader stops
//! replicating to it once the change is committed). It then campaigns; the leader answers its
//! vote requests with `FailedPrecondition` and [`REMOVED_MESSAGE`], and the removed member
//! stops (see `Node::removed`), like etcd's `ErrMemberRemoved`.

use std::sync::Weak;
use std::time::Instant;

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use crate::network::REMOVED_MESSAGE;
use crate::node::Node;
use crate::peer::pb::raft_peer_server::{RaftPeer, RaftPeerServer};
use crate::peer::{self, pb, ForwardRequest, ForwardResult, PeerTls};
use crate::types::{Raft, TypeConfig};
use crate::NodeId;

pub(crate) struct PeerService {
    raft: Raft,
    node: std::sync::Arc<std::sync::OnceLock<Weak<Node>>>,
}

fn bad_request(e: peer::DecodeError) -> Status {
    Status::invalid_argument(e.to_string())
}

impl PeerService {
    fn node(&self) -> Result<std::sync::Arc<Node>, Status> {
        self.node
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| Status::unavailable("k3rs: member starting or stopping"))
    }

    /// Whether `candidate` is unknown to this leader's membership: it was removed.
    fn is_removed(&self, candidate: NodeId) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == openraft::ServerState::Leader
            && m.membership_config.nodes().all(|(id, _)| *id != candidate)
    }
}

#[tonic::async_trait]
impl RaftPeer for PeerService {
    async fn append_entries(&self, req: Request<pb::Msg>) -> Result<Response<pb::Msg>, Status> {
        let rpc: AppendEntriesRequest<TypeConfig> =
            peer::decode(req.get_ref()).map_err(bad_request)?;
        let res = self.raft.append_entries(rpc).await;
        Ok(Response::new(peer::encode(&res)))
    }

    async fn vote(&self, req: Request<pb::Msg>) -> Result<Response<pb::Msg>, Status> {
        let rpc: VoteRequest<NodeId> = peer::decode(req.get_ref()).map_err(bad_request)?;
        if let Some(candidate) = rpc.vote.leader_id().voted_for() {
            if self.is_removed(candidate) {
                tracing::warn!(candidate, "vote request from a removed member");
                return Err(Status::failed_precondition(REMOVED_MESSAGE));
            }
        }
        let res = self.raft.vote(rpc).await;
        Ok(Response::new(peer::encode(&res)))
    }

    async fn install_snapshot(&self, req: Request<pb::Msg>) -> Result<Response<pb::Msg>, Status> {
        let rpc: InstallSnapshotRequest<TypeConfig> =
            peer::decode(req.get_ref()).map_err(bad_request)?;
        let (done, offset, len) = (rpc.done, rpc.offset, rpc.data.len());
        let started = Instant::now();
        let res = self.raft.install_snapshot(rpc).await;
        if done {
            // The last chunk also installs the snapshot (import on a blocking thread, see
            // `StateMachine::install_snapshot`); the Raft core keeps running meanwhile.
            tracing::info!(
                bytes = offset + len as u64,
                elapsed_ms = started.elapsed().as_millis() as u64,
                ok = res.is_ok(),
                "received and installed a snapshot"
            );
        }
        Ok(Response::new(peer::encode(&res)))
    }

    async fn forward(&self, req: Request<pb::Msg>) -> Result<Response<pb::Msg>, Status> {
        let fwd: ForwardRequest = peer::decode(req.get_ref()).map_err(bad_request)?;
        let node = self.node()?;
        let res: ForwardResult = node.serve_forwarded(fwd).await;
        Ok(Response::new(peer::encode(&res)))
    }
}

pub(crate) type NodeSlot = std::sync::Arc<std::sync::OnceLock<Weak<Node>>>;

/// Binds `listen` and serves the peer service until `cancel`.
pub(crate) async fn spawn(
    listen: std::net::SocketAddr,
    tls: Option<&PeerTls>,
    raft: Raft,
    node: NodeSlot,
    cancel: CancellationToken,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let local = listener.local_addr()?;
    let incoming = crate::conn_limit::incoming(listener, crate::conn_limit::MAX_CONNECTIONS);
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        let cfg = ServerTlsConfig::new()
            .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
            .client_ca_root(Certificate::from_pem(&tls.ca_pem))
            .timeout(crate::conn_limit::HANDSHAKE_TIMEOUT);
        builder = builder
            .tls_config(cfg)
            .map_err(|e| std::io::Error::other(format!("peer TLS: {e}")))?;
    }
    let service = RaftPeerServer::new(PeerService { raft, node })
        .max_decoding_message_size(peer::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(peer::MAX_MESSAGE_BYTES);
    let server = builder
        .http2_adaptive_window(Some(true))
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned());
    tracing::info!(addr = %local, "raft peer service listening on {local}");
    let task = tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "raft peer service stopped");
        }
    });
    Ok((local, task))
}
