//! The Raft peer network, client side: openraft's RPCs and forwarded requests over tonic.
//!
//! # Guarantees
//! - Connections are made lazily (on the first RPC to a peer) and re-made by tonic after a
//!   failure; nothing here blocks the Raft core: openraft calls the network from its
//!   replication and election tasks, and every call is bounded by the RPC's TTL (heartbeat
//!   scale for AppendEntries and Vote, `install_snapshot_timeout` per snapshot chunk).
//! - Snapshots go in chunks of `snapshot_max_chunk_size` bytes (openraft's `Chunked`
//!   transport reading the leader's snapshot file), never whole in memory.
//! - With TLS, a peer must present a certificate signed by the peer CA, and so must we.
//!
//! A failed connection maps to `Unreachable` (openraft backs off before retrying), any other
//! transport failure to `Network`, a decoded Raft error to `RemoteError`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError as RaftRemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::peer::pb::raft_peer_client::RaftPeerClient;
use crate::peer::{self, pb, ForwardRequest, ForwardResult, PeerTls};
use crate::types::{NodeInfo, TypeConfig};
use crate::NodeId;

/// Bound on connecting to a peer (the RPC's own TTL bounds the whole call).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Set when a peer tells us we were removed from the cluster (see `peer_server`).
pub(crate) const REMOVED_MESSAGE: &str = "k3rs: this member has been removed from the cluster";

/// Makes clients for peers; shares one lazily connected channel per peer URL.
#[derive(Clone)]
pub struct PeerNetwork {
    tls: Option<PeerTls>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// Cancelled when a peer answers that we were removed.
    removed: tokio_util::sync::CancellationToken,
}

impl PeerNetwork {
    pub fn new(tls: Option<PeerTls>, removed: tokio_util::sync::CancellationToken) -> PeerNetwork {
        PeerNetwork {
            tls,
            channels: Arc::new(Mutex::new(HashMap::new())),
            removed,
        }
    }

    /// A client for the peer at `node`'s first peer URL.
    pub fn client(&self, target: NodeId, node: &NodeInfo) -> PeerClient {
        let channel = node.peer_urls.first().map(|url| self.channel(url));
        PeerClient {
            target,
            channel,
            removed: self.removed.clone(),
        }
    }

    fn channel(&self, url: &str) -> Result<Channel, ChannelError> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = channels.get(url) {
            return Ok(c.clone());
        }
        let mut ep = Endpoint::from_shared(url.to_string())
            .map_err(|source| ChannelError::Url {
                url: url.to_string(),
                source,
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5))
            .http2_adaptive_window(true);
        if let Some(tls) = &self.tls {
            let mut cfg = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
            if let Some(host) = ep.uri().host() {
                cfg = cfg.domain_name(host.trim_start_matches('[').trim_end_matches(']'));
            }
            ep = ep.tls_config(cfg).map_err(|source| ChannelError::Tls {
                url: url.to_string(),
                source,
            })?;
        }
        let c = ep.connect_lazy();
        channels.insert(url.to_string(), c.clone());
        Ok(c)
    }
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> PeerClient {
        self.client(target, node)
    }
}

/// Why no channel to a peer URL could be set up (nothing was sent).
#[derive(Debug, thiserror::Error)]
enum ChannelError {
    /// The URL is not a valid endpoint.
    #[error("peer URL {url}: {source}")]
    Url {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The peer TLS configuration was refused.
    #[error("peer TLS for {url}: {source}")]
    Tls {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// The client to one peer.
pub struct PeerClient {
    target: NodeId,
    channel: Option<Result<Channel, ChannelError>>,
    removed: tokio_util::sync::CancellationToken,
}

/// A transport failure, before openraft's error types are chosen.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Could not connect (or no peer URL): nothing was delivered.
    Unreachable(String),
    /// Delivered or not: unknown.
    Network(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) | CallError::Network(m) => f.write_str(m),
        }
    }
}

impl PeerClient {
    fn grpc(&self) -> Result<RaftPeerClient<Channel>, CallError> {
        match &self.channel {
            None => Err(CallError::Unreachable(format!(
                "node {} has no peer URL",
                self.target
            ))),
            Some(Err(e)) => Err(CallError::Unreachable(e.to_string())),
            Some(Ok(c)) => Ok(RaftPeerClient::new(c.clone())
                .max_decoding_message_size(peer::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(peer::MAX_MESSAGE_BYTES)),
        }
    }

    /// Calls `method` with `req` encoded, within `ttl`, and decodes the answer.
    async fn call<Req, Resp, F, Fut>(
        &self,
        req: &Req,
        ttl: Duration,
        method: F,
    ) -> Result<Resp, CallError>
    where
        Req: serde::Serialize,
        Resp: for<'de> serde::Deserialize<'de>,
        F: FnOnce(RaftPeerClient<Channel>, tonic::Request<pb::Msg>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<pb::Msg>, tonic::Status>>,
    {
        let client = self.grpc()?;
        let mut request = tonic::Request::new(peer::encode(req));
        request.set_timeout(ttl);
        let resp = match tokio::time::timeout(ttl, method(client, request)).await {
            Err(_) => return Err(CallError::Network(format!("timed out after {ttl:?}"))),
            Ok(Err(status)) => {
                if status.code() == tonic::Code::FailedPrecondition
                    && status.message() == REMOVED_MESSAGE
                {
                    tracing::error!(peer = self.target, "{REMOVED_MESSAGE}");
                    self.removed.cancel();
                }
                return Err(if is_connect_failure(&status) {
                    CallError::Unreachable(status.to_string())
                } else {
                    CallError::Network(status.to_string())
                });
            }
            Ok(Ok(r)) => r,
        };
        peer::decode(resp.get_ref()).map_err(|e| CallError::Network(e.to_string()))
    }

    /// Sends a request only the leader can answer.
    pub(crate) async fn forward(
        &self,
        req: &ForwardRequest,
        ttl: Duration,
    ) -> Result<ForwardResult, CallError> {
        self.call(req, ttl, |mut c, r| async move { c.forward(r).await })
            .await
    }

    fn rpc_error<E: std::error::Error>(&self, e: CallError) -> RPCError<NodeId, NodeInfo, E> {
        let io = std::io::Error::other(format!("peer {}: {e}", self.target));
        match e {
            CallError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&io)),
            CallError::Network(_) => RPCError::Network(NetworkError::new(&io)),
        }
    }
}

/// Whether the call failed to connect, so that the request was certainly not delivered (and a
/// non-idempotent request may be retried elsewhere). tonic reports connection failures and
/// broken connections alike as `Unavailable`; the source chain tells them apart.
fn is_connect_failure(status: &tonic::Status) -> bool {
    if status.code() != tonic::Code::Unavailable {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        // hyper-util's connector error ("client error (Connect)") and tonic's connect timeout.
        if format!("{e:?}").contains("Connect") {
            return true;
        }
        source = e.source();
    }
    false
}

type RpcResult<T, E = RaftError<NodeId>> = Result<T, RPCError<NodeId, NodeInfo, E>>;

impl PeerClient {
    async fn raft_rpc<Req, Resp, E, F, Fut>(
        &self,
        req: &Req,
        option: &RPCOption,
        method: F,
    ) -> RpcResult<Resp, E>
    where
        Req: serde::Serialize,
        Resp: for<'de> serde::Deserialize<'de>,
        E: std::error::Error + for<'de> serde::Deserialize<'de>,
        F: FnOnce(RaftPeerClient<Channel>, tonic::Request<pb::Msg>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<pb::Msg>, tonic::Status>>,
    {
        let res: Result<Resp, E> = self
            .call(req, option.hard_ttl(), method)
            .await
            .map_err(|e| self.rpc_error(e))?;
        res.map_err(|e| RPCError::RemoteError(RaftRemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        self.raft_rpc(&rpc, &option, |mut c, r| async move {
            c.append_entries(r).await
        })
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        self.raft_rpc(&rpc, &option, |mut c, r| async move {
            c.install_snapshot(r).await
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        self.raft_rpc(&rpc, &option, |mut c, r| async move { c.vote(r).await })
            .await
    }
}
