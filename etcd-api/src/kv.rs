//! The KV service: Range, Put, DeleteRange, Txn, Compact.

use std::time::Instant;

use k3rs_raft::Stage;
use k3rs_storage::{Command, CommandResponse, Output};
use tonic::{Request, Response, Status};

use super::convert;
use super::error::{ApiResult, EtcdError};
use super::{check_size, quota, Api};
use k3rs_datastore::etcdpb as pb;

/// etcd's `KV` gRPC service over the local member.
#[derive(Debug, Clone)]
pub struct KvService {
    api: Api,
}

impl KvService {
    /// Answers a write with the result of `work`, recording how long it took as the
    /// write path's `request` stage.
    async fn timed<T, E>(
        &self,
        work: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<Response<T>, Status>
    where
        Status: From<E>,
    {
        let started = Instant::now();
        let answer = work.await;
        self.api
            .node()
            .observe_stage(Stage::Request, started.elapsed());
        Ok(Response::new(answer?))
    }

    /// The service over `api`.
    pub fn new(api: Api) -> KvService {
        KvService { api }
    }

    async fn range(&self, req: pb::RangeRequest) -> ApiResult<pb::RangeResponse> {
        let req = convert::range_request(req)?;
        if !req.serializable {
            self.api.node().read_barrier().await?;
        }
        let (revision, resp) = self.api.node().store().range(&req)??;
        Ok(convert::range_response(resp, self.api.header(revision)))
    }

    async fn write(&self, cmd: Command) -> ApiResult<(i64, CommandResponse)> {
        let Output { revision, result } = self.api.node().write(cmd).await?;
        Ok((revision, result?))
    }

    async fn put(&self, req: pb::PutRequest) -> ApiResult<pb::PutResponse> {
        check_size(&req)?;
        self.api.check_quota(quota::put_cost(&req)).await?;
        let req = convert::put_request(req)?;
        match self.write(Command::Put(req)).await? {
            (rev, CommandResponse::Put(r)) => Ok(convert::put_response(r, self.api.header(rev))),
            (_, other) => Err(unexpected("put", &other)),
        }
    }

    async fn delete_range(
        &self,
        req: pb::DeleteRangeRequest,
    ) -> ApiResult<pb::DeleteRangeResponse> {
        check_size(&req)?;
        let req = convert::delete_request(req)?;
        match self.write(Command::DeleteRange(req)).await? {
            (rev, CommandResponse::DeleteRange(r)) => {
                Ok(convert::delete_response(r, self.api.header(rev)))
            }
            (_, other) => Err(unexpected("delete", &other)),
        }
    }

    async fn txn(&self, req: pb::TxnRequest) -> ApiResult<pb::TxnResponse> {
        check_size(&req)?;
        // Like etcd, every txn is checked: one without puts costs nothing but is still
        // refused once the backend is at the quota.
        self.api.check_quota(quota::txn_cost(&req)).await?;
        let req = convert::txn_request(req)?;
        // Read-only txns go through Raft too: one linearizable path for every txn.
        match self.write(Command::Txn(req)).await? {
            (rev, CommandResponse::Txn(r)) => {
                Ok(convert::txn_response(r, self.api.header(rev), rev))
            }
            (_, other) => Err(unexpected("txn", &other)),
        }
    }

    async fn compact(&self, req: pb::CompactionRequest) -> ApiResult<pb::CompactionResponse> {
        // The store compacts while applying, so `physical` holds once the write returns.
        match self
            .write(Command::Compact {
                revision: req.revision,
            })
            .await?
        {
            (rev, CommandResponse::Compact) => Ok(pb::CompactionResponse {
                header: self.api.header(rev),
            }),
            (_, other) => Err(unexpected("compact", &other)),
        }
    }
}

fn unexpected(op: &str, got: &CommandResponse) -> EtcdError {
    EtcdError::Internal(format!("{op} produced an unexpected response {got:?}"))
}

#[tonic::async_trait]
impl pb::kv_server::Kv for KvService {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        Ok(Response::new(
            KvService::range(self, request.into_inner()).await?,
        ))
    }

    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        self.timed(KvService::put(self, request.into_inner())).await
    }

    async fn delete_range(
        &self,
        request: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        self.timed(KvService::delete_range(self, request.into_inner()))
            .await
    }

    async fn txn(
        &self,
        request: Request<pb::TxnRequest>,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        self.timed(KvService::txn(self, request.into_inner())).await
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        Ok(Response::new(
            KvService::compact(self, request.into_inner()).await?,
        ))
    }
}
