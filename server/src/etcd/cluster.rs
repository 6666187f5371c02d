//! The Cluster service: MemberList. Membership changes arrive with HA; until then they are
//! refused with `Unimplemented`.

use tonic::{Request, Response, Status};

use super::error::EtcdError;
use super::Api;
use crate::etcdpb as pb;

const MEMBERSHIP_UNSUPPORTED: &str =
    "k3rs: changing etcd membership is not supported yet; servers join with `k3rs server --server`";

#[derive(Debug, Clone)]
pub struct ClusterService {
    api: Api,
}

impl ClusterService {
    pub fn new(api: Api) -> ClusterService {
        ClusterService { api }
    }

    fn members(&self) -> Vec<pb::Member> {
        let mut members: Vec<pb::Member> =
            self.api.node().members().into_iter().map(member).collect();
        members.sort_by_key(|m| m.id);
        members
    }
}

fn member(m: k3rs_raft::Member) -> pb::Member {
    pb::Member {
        id: m.id,
        name: m.name,
        peer_ur_ls: m.peer_urls,
        client_ur_ls: m.client_urls,
        is_learner: m.is_learner,
    }
}

fn unsupported() -> Status {
    EtcdError::Unimplemented(MEMBERSHIP_UNSUPPORTED).into()
}

#[tonic::async_trait]
impl pb::cluster_server::Cluster for ClusterService {
    async fn member_add(
        &self,
        _: Request<pb::MemberAddRequest>,
    ) -> Result<Response<pb::MemberAddResponse>, Status> {
        Err(unsupported())
    }

    async fn member_remove(
        &self,
        _: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberRemoveResponse>, Status> {
        Err(unsupported())
    }

    async fn member_update(
        &self,
        _: Request<pb::MemberUpdateRequest>,
    ) -> Result<Response<pb::MemberUpdateResponse>, Status> {
        Err(unsupported())
    }

    async fn member_list(
        &self,
        request: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        if request.get_ref().linearizable {
            self.api
                .node()
                .read_barrier()
                .await
                .map_err(EtcdError::from)?;
        }
        // etcd's cluster service leaves the revision out of its headers.
        Ok(Response::new(pb::MemberListResponse {
            header: self.api.header(0),
            members: self.members(),
        }))
    }

    async fn member_promote(
        &self,
        _: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberPromoteResponse>, Status> {
        Err(unsupported())
    }
}
