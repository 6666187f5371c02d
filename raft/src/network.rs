//! The Raft peer network. A single server has no peers, so every RPC fails as `Unreachable`;
//! the HA work replaces [`NoPeers`] with a tonic transport over the peer URLs in
//! [`NodeInfo`](crate::types::NodeInfo), leaving everything else as it is.

use std::io;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::types::{NodeInfo, TypeConfig};
use crate::NodeId;

/// A network that reaches nobody.
#[derive(Debug, Clone, Default)]
pub struct NoPeers;

/// The client to one (unreachable) peer.
#[derive(Debug)]
pub struct UnreachablePeer {
    target: NodeId,
}

impl UnreachablePeer {
    fn error<E: std::error::Error>(&self) -> RPCError<NodeId, NodeInfo, E> {
        let e = io::Error::new(
            io::ErrorKind::NotConnected,
            format!("no peer transport yet (node {})", self.target),
        );
        RPCError::Unreachable(Unreachable::new(&e))
    }
}

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = UnreachablePeer;

    async fn new_client(&mut self, target: NodeId, _node: &NodeInfo) -> Self::Network {
        UnreachablePeer { target }
    }
}

type RpcResult<T, E = RaftError<NodeId>> = Result<T, RPCError<NodeId, NodeInfo, E>>;

impl RaftNetwork<TypeConfig> for UnreachablePeer {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        Err(self.error())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        Err(self.error())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        Err(self.error())
    }
}
