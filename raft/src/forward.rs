//! Forwarding to the leader: what a follower cannot do itself (propose, confirm a read index,
//! renew a lease, change the membership) it asks the current leader to do.
//!
//! # Guarantees
//! - A request is retried at the (new) leader only when it certainly was not carried out: the
//!   leader answered `NotLeader`, or the connection could not be made. Otherwise (a timeout, a
//!   broken connection) a non-idempotent request fails with `Timeout`: it may or may not have
//!   been applied, as with etcd's "request timed out".
//! - Bounded by [`FORWARD_TIMEOUT`] in total, including the wait for a leader to be known.

use std::time::Duration;

use tokio::time::Instant;

use crate::network::{CallError, PeerNetwork};
use crate::peer::{ForwardRequest, ForwardResponse, RemoteError};
use crate::types::{NodeInfo, Raft};
use crate::NodeId;

/// Total time a forwarded request may take: etcd's request timeout (`ReqTimeout`: 5 s for
/// queueing, computation and disk, plus two election timeouts of 1 s for a possible election;
/// kube-apiserver's etcd client waits up to 15 s). At 5 s, the commit of one delete of
/// 250,000 keys on three members sharing two cores (6–7 s) failed through a follower.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(7);
const RETRY_PAUSE: Duration = Duration::from_millis(20);

#[derive(Clone)]
pub(crate) struct Forwarder {
    pub id: NodeId,
    pub raft: Raft,
    pub network: PeerNetwork,
}

impl Forwarder {
    /// The current leader other than this node, waiting for one until `deadline`.
    async fn leader(&self, deadline: Instant) -> Result<(NodeId, NodeInfo), RemoteError> {
        let mut metrics = self.raft.metrics();
        loop {
            {
                let m = metrics.borrow_and_update();
                if let Some(l) = m.current_leader {
                    if l == self.id {
                        // We became leader meanwhile: the caller does it locally.
                        return Err(RemoteError::NotLeader);
                    }
                    if let Some(node) = m.membership_config.membership().get_node(&l) {
                        return Ok((l, node.clone()));
                    }
                }
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Err(_) => return Err(RemoteError::NotLeader),
                Ok(Err(_)) => return Err(RemoteError::Stopped),
                Ok(Ok(())) => {}
            }
        }
    }

    /// Sends `req` to the leader. `idempotent` requests are also retried after a timeout.
    pub async fn forward(
        &self,
        req: &ForwardRequest,
        idempotent: bool,
    ) -> Result<ForwardResponse, RemoteError> {
        let deadline = Instant::now() + FORWARD_TIMEOUT;
        loop {
            let (leader, node) = self.leader(deadline).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RemoteError::Timeout);
            }
            let client = self.network.client(leader, &node);
            match client.forward(req, left).await {
                Ok(Ok(resp)) => return Ok(resp),
                Ok(Err(RemoteError::NotLeader)) | Err(CallError::Unreachable(_)) => {}
                Ok(Err(e)) => return Err(e),
                Err(CallError::Network(m)) => {
                    if !idempotent {
                        tracing::warn!(leader, "forwarding to the leader failed: {m}");
                        return Err(RemoteError::Timeout);
                    }
                }
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(RemoteError::Timeout);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}
