//! The Lease service: Grant, Revoke, KeepAlive (stream), TimeToLive, Leases.

use std::pin::Pin;

use futures::Stream;
use k3rs_storage::{Command, CommandResponse, Output};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::error::{ApiResult, EtcdError};
use super::Api;
use k3rs_datastore::etcdpb as pb;

/// etcd's `MaxLeaseTTL`.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// etcd's `Lease` gRPC service over the local member.
#[derive(Debug, Clone)]
pub struct LeaseService {
    api: Api,
}

impl LeaseService {
    /// The service over `api`.
    pub fn new(api: Api) -> LeaseService {
        LeaseService { api }
    }

    async fn grant(&self, req: pb::LeaseGrantRequest) -> ApiResult<pb::LeaseGrantResponse> {
        if req.ttl > MAX_LEASE_TTL {
            return Err(EtcdError::LeaseTtlTooLarge);
        }
        self.api.check_quota(crate::quota::LEASE_COST).await?;
        let ttl = granted_ttl(req.ttl, self.api.node().min_lease_ttl());
        let Output { revision, result } = self
            .api
            .node()
            .write(Command::LeaseGrant { id: req.id, ttl })
            .await?;
        match result? {
            CommandResponse::LeaseGrant { id, ttl } => Ok(pb::LeaseGrantResponse {
                header: self.api.header(revision),
                id,
                ttl,
                error: String::new(),
            }),
            other => Err(EtcdError::Internal(format!(
                "lease grant produced {other:?}"
            ))),
        }
    }

    async fn revoke(&self, req: pb::LeaseRevokeRequest) -> ApiResult<pb::LeaseRevokeResponse> {
        let Output { revision, result } = self
            .api
            .node()
            .write(Command::LeaseRevoke { id: req.id })
            .await?;
        result?;
        Ok(pb::LeaseRevokeResponse {
            header: self.api.header(revision),
        })
    }

    async fn time_to_live(
        &self,
        req: pb::LeaseTimeToLiveRequest,
    ) -> ApiResult<pb::LeaseTimeToLiveResponse> {
        self.api.node().read_barrier().await?;
        let header = self.api.current_header();
        match self.api.node().store().lease(req.id)? {
            // etcd answers an unknown lease with TTL -1, not an error.
            None => Ok(pb::LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            }),
            Some(lease) => Ok(pb::LeaseTimeToLiveResponse {
                header,
                id: lease.id,
                ttl: self
                    .api
                    .node()
                    .lease_remaining(lease.id)
                    .unwrap_or(lease.ttl),
                granted_ttl: lease.ttl,
                keys: if req.keys { lease.keys } else { Vec::new() },
            }),
        }
    }

    async fn leases(&self) -> ApiResult<pb::LeaseLeasesResponse> {
        self.api.node().read_barrier().await?;
        let header = self.api.current_header();
        let mut leases: Vec<pb::LeaseStatus> = self
            .api
            .node()
            .store()
            .leases()?
            .into_iter()
            .map(|l| pb::LeaseStatus { id: l.id })
            .collect();
        leases.sort_by_key(|l| l.id);
        Ok(pb::LeaseLeasesResponse { header, leases })
    }

    /// One keep-alive: the granted TTL when renewed, 0 for an unknown lease (as etcd).
    async fn keep_alive_once(&self, id: i64) -> ApiResult<pb::LeaseKeepAliveResponse> {
        let ttl = self.api.node().lease_keep_alive(id).await?.unwrap_or(0);
        Ok(pb::LeaseKeepAliveResponse {
            header: self.api.current_header(),
            id,
            ttl,
        })
    }
}

/// The TTL a grant gets: at least the minimum (etcd raises short TTLs silently).
pub fn granted_ttl(requested: i64, min_ttl: i64) -> i64 {
    requested.max(min_ttl)
}

type KeepAliveStream =
    Pin<Box<dyn Stream<Item = Result<pb::LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pb::lease_server::Lease for LeaseService {
    async fn lease_grant(
        &self,
        request: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        Ok(Response::new(self.grant(request.into_inner()).await?))
    }

    async fn lease_revoke(
        &self,
        request: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        Ok(Response::new(self.revoke(request.into_inner()).await?))
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let svc = self.clone();
        let shutdown = self.api.shutdown_token().clone();
        tokio::spawn(async move {
            loop {
                let req = tokio::select! {
                    _ = shutdown.cancelled() => {
                        let _ = tx.send(Err(EtcdError::Raft(k3rs_raft::Error::Stopped).into())).await;
                        return;
                    }
                    msg = inbound.message() => match msg {
                        Ok(Some(req)) => req,
                        Ok(None) | Err(_) => return,
                    },
                };
                let resp = svc.keep_alive_once(req.id).await.map_err(Status::from);
                let failed = resp.is_err();
                if tx.send(resp).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<pb::LeaseTimeToLiveResponse>, Status> {
        Ok(Response::new(
            self.time_to_live(request.into_inner()).await?,
        ))
    }

    async fn lease_leases(
        &self,
        _request: Request<pb::LeaseLeasesRequest>,
    ) -> Result<Response<pb::LeaseLeasesResponse>, Status> {
        Ok(Response::new(self.leases().await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_is_raised_to_the_minimum() {
        assert_eq!(granted_ttl(1, 2), 2);
        assert_eq!(granted_ttl(0, 2), 2);
        assert_eq!(granted_ttl(-5, 2), 2);
        assert_eq!(granted_ttl(60, 2), 60);
    }
}
