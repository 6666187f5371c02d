//! The etcd v3 gRPC API (KV, Watch, Lease, Cluster, Maintenance) over the Raft-replicated store.
//!
//! # Guarantees
//! - Writes go through Raft ([`Node::write`]); ranges are linearizable unless `serializable`
//!   (a [`Node::read_barrier`] first).
//! - Errors carry etcd's gRPC codes and exact messages ([`error`]); no input makes a handler
//!   panic.
//! - Calls with gRPC metadata `hasleader: true` fail with `Unavailable "etcdserver: no leader"`
//!   while there is no leader, like etcd's interceptor.

pub mod cluster;
pub mod convert;
pub mod corrupt;
pub mod error;
pub mod http;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod metrics;
pub mod quota;
pub mod snapshot;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k3rs_raft::Node;
use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Routes;
use tonic::{Request, Status};

use error::EtcdError;
use k3rs_datastore::etcdpb as pb;

/// etcd's request size limit (`--max-request-bytes` default): 1.5 MiB.
pub const MAX_REQUEST_BYTES: usize = 1536 * 1024;
/// gRPC's receive limit: the request limit plus etcd's 512 KiB of overhead.
pub const MAX_GRPC_MESSAGE_BYTES: usize = MAX_REQUEST_BYTES + 512 * 1024;
/// The etcd version reported by Status (kube-apiserver needs >= 3.5.13 for consistent reads
/// from its watch cache).
pub const ETCD_VERSION: &str = "3.5.16";

/// Settings of the API front end.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The cluster id reported in response headers.
    pub cluster_id: u64,
    /// Interval of watch progress notifications (etcd: 10 minutes).
    pub progress_notify_interval: Duration,
    /// Directory where snapshots are staged while streamed to a client.
    pub scratch_dir: PathBuf,
    /// The backend quota (`--etcd-quota-backend-bytes`).
    pub quota: quota::Quota,
}

/// What every service shares: the node, identity and the shutdown signal.
#[derive(Clone)]
pub struct Api {
    inner: Arc<ApiInner>,
}

struct ApiInner {
    node: Arc<Node>,
    cfg: ApiConfig,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// `shutdown` ends long-lived streams (watch, keep-alive) so the server can drain.
    pub fn new(node: Arc<Node>, cfg: ApiConfig, shutdown: CancellationToken) -> Api {
        Api {
            inner: Arc::new(ApiInner {
                node,
                cfg,
                shutdown,
            }),
        }
    }

    /// The local Raft member.
    pub fn node(&self) -> &Arc<Node> {
        &self.inner.node
    }

    /// The API's configuration.
    pub fn config(&self) -> &ApiConfig {
        &self.inner.cfg
    }

    /// Cancelled when the server shuts down (ends watch streams).
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// A response header at `revision`.
    pub fn header(&self, revision: i64) -> Option<pb::ResponseHeader> {
        let status = self.inner.node.status();
        Some(pb::ResponseHeader {
            cluster_id: self.inner.cfg.cluster_id,
            member_id: status.member_id,
            revision,
            raft_term: status.term,
        })
    }

    /// etcd's quota check before proposing a request that costs `cost`: if the backend would
    /// outgrow the quota, raises NOSPACE for this member and refuses the request.
    pub async fn check_quota(&self, cost: u64) -> Result<(), EtcdError> {
        k3rs_datastore::quota::check(&self.inner.node, self.inner.cfg.quota, cost).await?;
        Ok(())
    }

    /// A response header at the store's current revision.
    pub fn current_header(&self) -> Option<pb::ResponseHeader> {
        self.header(self.inner.node.store().current_revision())
    }

    /// Every service, with etcd's message size limit and the `hasleader` check.
    pub fn routes(&self) -> Routes {
        use pb::cluster_server::ClusterServer;
        use pb::kv_server::KvServer;
        use pb::lease_server::LeaseServer;
        use pb::maintenance_server::MaintenanceServer;
        use pb::watch_server::WatchServer;

        let check = self.leader_check();
        let limit = MAX_GRPC_MESSAGE_BYTES;
        let kv = KvServer::new(kv::KvService::new(self.clone())).max_decoding_message_size(limit);
        let watch = WatchServer::new(watch::WatchService::new(self.clone()))
            .max_decoding_message_size(limit);
        let lease = LeaseServer::new(lease::LeaseService::new(self.clone()))
            .max_decoding_message_size(limit);
        let cluster = ClusterServer::new(cluster::ClusterService::new(self.clone()))
            .max_decoding_message_size(limit);
        let maintenance =
            MaintenanceServer::new(maintenance::MaintenanceService::new(self.clone()))
                .max_decoding_message_size(limit);
        Routes::new(InterceptedService::new(kv, check.clone()))
            .add_service(InterceptedService::new(watch, check.clone()))
            .add_service(InterceptedService::new(lease, check.clone()))
            .add_service(InterceptedService::new(cluster, check.clone()))
            .add_service(InterceptedService::new(maintenance, check))
    }

    /// etcd's "require leader" interceptor: `hasleader: true` metadata and no leader →
    /// `Unavailable "etcdserver: no leader"`.
    fn leader_check(&self) -> LeaderCheck {
        LeaderCheck {
            node: self.inner.node.clone(),
        }
    }
}

/// The `hasleader` interceptor.
#[derive(Clone)]
pub struct LeaderCheck {
    node: Arc<Node>,
}

impl tonic::service::Interceptor for LeaderCheck {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        if requires_leader(req.metadata()) && self.node.status().leader.is_none() {
            return Err(EtcdError::NoLeader.into());
        }
        Ok(req)
    }
}

/// Whether the call carries etcd's `hasleader: true` metadata.
pub fn requires_leader(md: &tonic::metadata::MetadataMap) -> bool {
    md.get("hasleader").and_then(|v| v.to_str().ok()) == Some("true")
}

/// Refuses requests whose encoding exceeds etcd's request limit (what etcd checks before
/// proposing to Raft).
pub fn check_size(req: &impl Message) -> Result<(), EtcdError> {
    if req.encoded_len() > MAX_REQUEST_BYTES {
        return Err(EtcdError::RequestTooLarge);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hasleader_metadata() {
        let mut md = tonic::metadata::MetadataMap::new();
        assert!(!requires_leader(&md));
        md.insert("hasleader", "false".parse().unwrap());
        assert!(!requires_leader(&md));
        md.insert("hasleader", "true".parse().unwrap());
        assert!(requires_leader(&md));
    }

    #[test]
    fn size_limit() {
        let small = pb::PutRequest {
            key: b"k".to_vec(),
            value: vec![0; 1024],
            ..Default::default()
        };
        assert!(check_size(&small).is_ok());
        let big = pb::PutRequest {
            key: b"k".to_vec(),
            value: vec![0; MAX_REQUEST_BYTES],
            ..Default::default()
        };
        assert!(matches!(check_size(&big), Err(EtcdError::RequestTooLarge)));
    }
}
