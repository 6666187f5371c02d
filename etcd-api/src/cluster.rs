//! The Cluster service: MemberList, MemberAdd, MemberRemove, MemberUpdate, MemberPromote, as
//! Raft membership changes (see `k3rs_raft::membership`), with etcd's errors
//! (`api/v3rpc/rpctypes`: codes and messages clients match on).
//!
//! A voter added by MemberAdd joins as a learner and is promoted by the leader once it has
//! caught up (openraft changes voters by joint consensus, which would otherwise wait for the
//! new member to start); MemberList shows it as a learner until then. Like etcd, a member
//! added by MemberAdd has no name until it starts ("unstarted" in etcdctl).

use k3rs_raft::types::NodeInfo;
use k3rs_raft::MembershipError;
use tonic::{Code, Request, Response, Status};

use super::error::EtcdError;
use super::Api;
use k3rs_datastore::etcdpb as pb;

/// etcd's `Cluster` gRPC service over the local member.
#[derive(Debug, Clone)]
pub struct ClusterService {
    api: Api,
}

impl ClusterService {
    /// The service over `api`.
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

/// etcd's gRPC form of a refused membership change.
fn membership_status(e: MembershipError) -> Status {
    let code = match &e {
        MembershipError::MemberNotFound => Code::NotFound,
        MembershipError::MemberExists
        | MembershipError::PeerUrlExists
        | MembershipError::NotLearner
        | MembershipError::LearnerNotReady
        | MembershipError::NotEnoughStartedMembers => Code::FailedPrecondition,
        MembershipError::NoLeader | MembershipError::Timeout | MembershipError::Stopped => {
            Code::Unavailable
        }
        MembershipError::Failed(_) => Code::Internal,
    };
    Status::new(code, e.to_string())
}

/// etcd checks peer URLs with `types.NewURLs`: absolute `http(s)://host:port`, no path.
pub fn check_peer_urls(urls: &[String]) -> Result<(), Status> {
    let valid = |u: &str| {
        let Some(rest) = u
            .strip_prefix("http://")
            .or_else(|| u.strip_prefix("https://"))
        else {
            return false;
        };
        let host_port = rest.trim_end_matches('/');
        !host_port.contains('/')
            && host_port
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
    };
    if urls.is_empty() || !urls.iter().all(|u| valid(u)) {
        return Err(Status::invalid_argument(
            "etcdserver: given member URLs are invalid",
        ));
    }
    Ok(())
}

/// A random non-zero member ID below 2^63 (etcd's IDs print as positive in every client).
fn new_member_id() -> u64 {
    loop {
        let id = rand::random::<u64>() >> 1;
        if id != 0 {
            return id;
        }
    }
}

#[tonic::async_trait]
impl pb::cluster_server::Cluster for ClusterService {
    async fn member_add(
        &self,
        request: Request<pb::MemberAddRequest>,
    ) -> Result<Response<pb::MemberAddResponse>, Status> {
        let req = request.into_inner();
        check_peer_urls(&req.peer_ur_ls)?;
        let id = new_member_id();
        let node = NodeInfo {
            peer_urls: req.peer_ur_ls.clone(),
            ..Default::default()
        };
        let node_api = self.api.node();
        let added = if req.is_learner {
            node_api.add_learner(id, node).await
        } else {
            node_api.add_voter(id, node).await
        };
        added.map_err(membership_status)?;
        Ok(Response::new(pb::MemberAddResponse {
            header: self.api.header(0),
            member: Some(pb::Member {
                id,
                name: String::new(),
                peer_ur_ls: req.peer_ur_ls,
                client_ur_ls: Vec::new(),
                is_learner: req.is_learner,
            }),
            members: self.members(),
        }))
    }

    async fn member_remove(
        &self,
        request: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberRemoveResponse>, Status> {
        self.api
            .node()
            .remove_member(request.get_ref().id)
            .await
            .map_err(membership_status)?;
        Ok(Response::new(pb::MemberRemoveResponse {
            header: self.api.header(0),
            members: self.members(),
        }))
    }

    async fn member_update(
        &self,
        request: Request<pb::MemberUpdateRequest>,
    ) -> Result<Response<pb::MemberUpdateResponse>, Status> {
        let req = request.into_inner();
        check_peer_urls(&req.peer_ur_ls)?;
        self.api
            .node()
            .update_member(req.id, req.peer_ur_ls)
            .await
            .map_err(membership_status)?;
        Ok(Response::new(pb::MemberUpdateResponse {
            header: self.api.header(0),
            members: self.members(),
        }))
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
        request: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberPromoteResponse>, Status> {
        self.api
            .node()
            .promote(request.get_ref().id)
            .await
            .map_err(membership_status)?;
        Ok(Response::new(pb::MemberPromoteResponse {
            header: self.api.header(0),
            members: self.members(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_etcds_codes_and_messages() {
        let s = membership_status(MembershipError::MemberNotFound);
        assert_eq!(
            (s.code(), s.message()),
            (Code::NotFound, "etcdserver: member not found")
        );
        let s = membership_status(MembershipError::NotLearner);
        assert_eq!(
            (s.code(), s.message()),
            (
                Code::FailedPrecondition,
                "etcdserver: can only promote a learner member"
            )
        );
        let s = membership_status(MembershipError::NotEnoughStartedMembers);
        assert_eq!(
            s.message(),
            "etcdserver: re-configuration failed due to not enough started members"
        );
        assert_eq!(
            membership_status(MembershipError::NoLeader).code(),
            Code::Unavailable
        );
    }

    #[test]
    fn peer_urls_are_checked() {
        assert!(check_peer_urls(&["https://10.0.0.2:2380".into()]).is_ok());
        assert!(check_peer_urls(&["http://[::1]:2380".into()]).is_ok());
        assert!(check_peer_urls(&[]).is_err());
        assert!(check_peer_urls(&["10.0.0.2:2380".into()]).is_err());
        assert!(check_peer_urls(&["https://10.0.0.2".into()]).is_err());
        assert!(check_peer_urls(&["https://h:1/x".into()]).is_err());
    }
}
