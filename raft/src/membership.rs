//! Membership changes, with etcd's rules and errors (etcd `server/etcdserver/server.go`:
//! `mayAddMember`, `mayPromoteMember`, `mayRemoveMember`; messages from `api/v3rpc/rpctypes`).
//!
//! openraft changes voters by joint consensus, which needs a majority of the *new* voter set
//! too; a voter added before it runs would stall the change (and block the caller) until it
//! starts. etcd's MemberAdd returns at once instead, so a voter is added here as a learner
//! marked `auto_promote`, and the leader promotes it once it has caught up
//! ([`run_auto_promote`]). Until then MemberList shows it as a learner.
//!
//! The checks are pure functions of the leader's view ([`View`]) so they are unit-tested
//! without a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::types::{NodeInfo, Raft};
use crate::NodeId;

/// Why a membership change was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MembershipError {
    /// No member has the id.
    #[error("etcdserver: member not found")]
    MemberNotFound,
    /// The id is taken.
    #[error("etcdserver: member ID already exist")]
    MemberExists,
    /// Another member has the peer URL.
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    /// Promoting a voter.
    #[error("etcdserver: can only promote a learner member")]
    NotLearner,
    /// Promoting a learner that lags the leader.
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    /// The change would leave too few started voters for a quorum.
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    NotEnoughStartedMembers,
    /// No leader to make the change.
    #[error("etcdserver: no leader")]
    NoLeader,
    /// The change did not commit in time.
    #[error("etcdserver: request timed out")]
    Timeout,
    /// The member is shutting down.
    #[error("etcdserver: server stopped")]
    Stopped,
    /// Any other failure (its message).
    #[error("etcdserver: {0}")]
    Failed(String),
}

/// The leader's view of the membership, for the checks.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The voting members.
    pub voters: BTreeSet<NodeId>,
    /// Every member (voters and learners).
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    /// Members that acknowledged replication (the leader counts itself): etcd's "started".
    pub started: BTreeSet<NodeId>,
    /// Matched log index per member (the leader: its last log index).
    pub matched: BTreeMap<NodeId, u64>,
    /// The leader's last log index.
    pub leader_last_index: u64,
}

fn quorum(n: usize) -> usize {
    n / 2 + 1
}

impl View {
    pub(crate) fn of(raft: &Raft, me: NodeId) -> View {
        let m = raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let last = m.last_log_index.unwrap_or(0);
        let mut matched = BTreeMap::new();
        let mut started = BTreeSet::from([me]);
        matched.insert(me, last);
        for (id, log) in m.replication.iter().flatten() {
            if let Some(l) = log {
                started.insert(*id);
                matched.insert(*id, l.index);
            }
        }
        View {
            voters: membership.voter_ids().collect(),
            nodes: membership.nodes().map(|(i, n)| (*i, n.clone())).collect(),
            started,
            matched,
            leader_last_index: last,
        }
    }

    /// Whether member `id` at `node` may be added (etcd's checks).
    pub fn check_add(
        &self,
        id: NodeId,
        node: &NodeInfo,
        learner: bool,
    ) -> Result<(), MembershipError> {
        if self.nodes.contains_key(&id) {
            return Err(MembershipError::MemberExists);
        }
        let taken = self
            .nodes
            .values()
            .any(|n| n.peer_urls.iter().any(|u| node.peer_urls.contains(u)));
        if taken {
            return Err(MembershipError::PeerUrlExists);
        }
        if !learner {
            self.check_voters_after(self.voters.len() + 1, self.started_voters())?;
        }
        Ok(())
    }

    /// Whether learner `id` may become a voter (it must be in sync, and quorum must hold).
    pub fn check_promote(&self, id: NodeId) -> Result<(), MembershipError> {
        if !self.nodes.contains_key(&id) {
            return Err(MembershipError::MemberNotFound);
        }
        if self.voters.contains(&id) {
            return Err(MembershipError::NotLearner);
        }
        if !self.learner_ready(id) {
            return Err(MembershipError::LearnerNotReady);
        }
        self.check_voters_after(self.voters.len() + 1, self.started_voters())
    }

    /// Whether member `id` may be removed without losing quorum.
    pub fn check_remove(&self, id: NodeId) -> Result<(), MembershipError> {
        if !self.nodes.contains_key(&id) {
            return Err(MembershipError::MemberNotFound);
        }
        if self.voters.contains(&id) {
            let remaining = self.voters.len() - 1;
            let started = self
                .voters
                .iter()
                .filter(|v| **v != id && self.started.contains(v))
                .count();
            if remaining == 0 || started < quorum(remaining) {
                return Err(MembershipError::NotEnoughStartedMembers);
            }
        }
        Ok(())
    }

    fn started_voters(&self) -> usize {
        self.voters
            .iter()
            .filter(|v| self.started.contains(v))
            .count()
    }

    /// etcd `IsReadyToAddVotingMember`: enough started voters for the new quorum; one started
    /// member may always add a second (restoring a cluster).
    fn check_voters_after(&self, voters: usize, started: usize) -> Result<(), MembershipError> {
        if (started == 1 && voters == 2) || started >= quorum(voters) {
            Ok(())
        } else {
            Err(MembershipError::NotEnoughStartedMembers)
        }
    }

    /// etcd `isLearnerReady`: the learner has matched at least 90% of the leader's log.
    pub fn learner_ready(&self, id: NodeId) -> bool {
        let Some(m) = self.matched.get(&id) else {
            return false;
        };
        self.started.contains(&id) && m * 10 >= self.leader_last_index * 9
    }
}

pub(crate) fn change_error(
    e: RaftError<NodeId, ClientWriteError<NodeId, NodeInfo>>,
) -> MembershipError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => MembershipError::NoLeader,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            MembershipError::Failed(e.to_string())
        }
        RaftError::Fatal(openraft::error::Fatal::Stopped) => MembershipError::Stopped,
        RaftError::Fatal(e) => MembershipError::Failed(e.to_string()),
    }
}

/// How long a change waits for the one before it to commit (openraft allows one membership
/// change at a time; etcd queues them, so a client never sees the overlap).
const IN_PROGRESS_WAIT: Duration = Duration::from_secs(10);
const IN_PROGRESS_TICK: Duration = Duration::from_millis(100);

type ChangeResult<T> = Result<T, RaftError<NodeId, ClientWriteError<NodeId, NodeInfo>>>;

/// Runs `change`, again every [`IN_PROGRESS_TICK`] while another membership change (e.g. a
/// learner's automatic promotion) is still committing, for at most [`IN_PROGRESS_WAIT`].
async fn one_at_a_time<T, F, Fut>(mut change: F) -> Result<T, MembershipError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ChangeResult<T>>,
{
    let deadline = tokio::time::Instant::now() + IN_PROGRESS_WAIT;
    loop {
        match change().await {
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            ))) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(IN_PROGRESS_TICK).await;
            }
            r => return r.map_err(change_error),
        }
    }
}

/// Leader-side changes; the caller made sure this node leads (or gets `NoLeader`).
pub(crate) async fn add(
    raft: &Raft,
    me: NodeId,
    id: NodeId,
    mut node: NodeInfo,
    learner: bool,
) -> Result<(), MembershipError> {
    View::of(raft, me).check_add(id, &node, learner)?;
    node.auto_promote = !learner;
    one_at_a_time(|| raft.add_learner(id, node.clone(), false)).await?;
    Ok(())
}

pub(crate) async fn promote(raft: &Raft, me: NodeId, id: NodeId) -> Result<(), MembershipError> {
    View::of(raft, me).check_promote(id)?;
    one_at_a_time(|| {
        raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), true)
    })
    .await?;
    Ok(())
}

pub(crate) async fn remove(raft: &Raft, me: NodeId, id: NodeId) -> Result<(), MembershipError> {
    let view = View::of(raft, me);
    view.check_remove(id)?;
    if view.voters.contains(&id) {
        one_at_a_time(|| {
            raft.change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
        })
        .await?;
    } else {
        one_at_a_time(|| {
            raft.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false)
        })
        .await?;
    }
    Ok(())
}

/// Replaces a member's address book entry (MemberUpdate; a starting member publishing its
/// name and client URLs).
pub(crate) async fn update(
    raft: &Raft,
    me: NodeId,
    id: NodeId,
    node: NodeInfo,
) -> Result<(), MembershipError> {
    let view = View::of(raft, me);
    let Some(old) = view.nodes.get(&id) else {
        return Err(MembershipError::MemberNotFound);
    };
    let taken = view
        .nodes
        .iter()
        .any(|(other, n)| *other != id && n.peer_urls.iter().any(|u| node.peer_urls.contains(u)));
    if taken {
        return Err(MembershipError::PeerUrlExists);
    }
    let node = NodeInfo {
        auto_promote: old.auto_promote,
        ..node
    };
    if *old == node {
        return Ok(());
    }
    one_at_a_time(|| {
        let nodes = BTreeMap::from([(id, node.clone())]);
        raft.change_membership(ChangeMembers::SetNodes(nodes), true)
    })
    .await?;
    Ok(())
}

/// How often the leader looks for learners to promote.
const PROMOTE_TICK: Duration = Duration::from_millis(200);

/// On the leader: promotes `auto_promote` learners once they have caught up.
pub(crate) async fn run_auto_promote(raft: Raft, me: NodeId, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(PROMOTE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let leading = {
            let m = raft.metrics();
            let m = m.borrow();
            m.state == ServerState::Leader && m.current_leader == Some(me)
        };
        if !leading {
            continue;
        }
        let view = View::of(&raft, me);
        let ready: Vec<NodeId> = view
            .nodes
            .iter()
            .filter(|(id, n)| n.auto_promote && !view.voters.contains(id))
            .map(|(id, _)| *id)
            .filter(|id| view.learner_ready(*id))
            .collect();
        for id in ready {
            let change = promote(&raft, me, id);
            match tokio::select! { _ = cancel.cancelled() => return, r = change => r } {
                Ok(()) => tracing::info!(member = id, "promoted a caught-up learner to voter"),
                Err(e) => tracing::debug!(member = id, error = %e, "promotion postponed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(voters: &[NodeId], learners: &[NodeId], started: &[NodeId]) -> View {
        let node = |id: NodeId| NodeInfo {
            name: format!("n{id}"),
            peer_urls: vec![format!("http://n{id}")],
            ..Default::default()
        };
        View {
            voters: voters.iter().copied().collect(),
            nodes: voters
                .iter()
                .chain(learners)
                .map(|i| (*i, node(*i)))
                .collect(),
            started: started.iter().copied().collect(),
            matched: started.iter().map(|i| (*i, 100)).collect(),
            leader_last_index: 100,
        }
    }

    #[test]
    fn add_rules() {
        let new = NodeInfo {
            peer_urls: vec!["http://new".into()],
            ..Default::default()
        };
        // One started member may add a second voter (etcd's restore case).
        assert_eq!(view(&[1], &[], &[1]).check_add(2, &new, false), Ok(()));
        // 2 voters, 1 started: a third voter would need 2 started of 3: ok; of 2 voters with
        // one down, adding makes 3 with 1 started: refused.
        assert_eq!(
            view(&[1, 2], &[], &[1]).check_add(3, &new, false),
            Err(MembershipError::NotEnoughStartedMembers)
        );
        assert_eq!(view(&[1, 2], &[], &[1]).check_add(3, &new, true), Ok(()));
        assert_eq!(
            view(&[1], &[], &[1]).check_add(1, &new, true),
            Err(MembershipError::MemberExists)
        );
        let dup = NodeInfo {
            peer_urls: vec!["http://n1".into()],
            ..Default::default()
        };
        assert_eq!(
            view(&[1], &[], &[1]).check_add(2, &dup, true),
            Err(MembershipError::PeerUrlExists)
        );
    }

    #[test]
    fn promote_and_remove_rules() {
        let v = view(&[1, 2, 3], &[4, 5], &[1, 2, 3, 4]);
        assert_eq!(v.check_promote(9), Err(MembershipError::MemberNotFound));
        assert_eq!(v.check_promote(2), Err(MembershipError::NotLearner));
        assert_eq!(v.check_promote(5), Err(MembershipError::LearnerNotReady));
        assert_eq!(v.check_promote(4), Ok(()));
        assert_eq!(v.check_remove(9), Err(MembershipError::MemberNotFound));
        assert_eq!(v.check_remove(3), Ok(()));
        assert_eq!(v.check_remove(5), Ok(()));
        // 3 voters, one down: removing a started one leaves 1 started of 2: refused.
        let v = view(&[1, 2, 3], &[], &[1, 2]);
        assert_eq!(
            v.check_remove(2),
            Err(MembershipError::NotEnoughStartedMembers)
        );
        assert_eq!(v.check_remove(3), Ok(()));
        assert_eq!(
            view(&[1], &[], &[1]).check_remove(1),
            Err(MembershipError::NotEnoughStartedMembers)
        );
    }
}
