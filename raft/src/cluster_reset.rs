//! `--cluster-reset`: turn a member of a cluster that lost its majority into a cluster of one,
//! keeping its data (etcd's `--force-new-cluster`).
//!
//! The plan is pure ([`plan`]): a membership entry listing only this member, appended after the
//! last entry of the WAL under a new term, and a vote for ourselves in that term. openraft takes
//! the newest membership entry in the log as the effective one, so on start the member is the
//! only voter, elects itself, and its first entry commits everything before it: every entry in
//! the local WAL is kept (like a new leader with the longest log, it commits what it has).
//!
//! # Assumptions
//! Run only with the other members stopped for good: they still believe in the old
//! membership. Rebuild by adding fresh members (new data dirs) to the reset one.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{CommittedLeaderId, EntryPayload, Membership};

use crate::types::{Entry, LogId, NodeInfo, Vote};
use crate::wal::{Wal, WalError};
use crate::NodeId;

/// Why the reset could not be made durable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResetError {
    /// Saving the vote or appending the entry failed.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// The WAL writer failed to sync the entry.
    #[error("{0}")]
    Sync(#[source] std::io::Error),
    /// The WAL writer stopped before it synced the entry.
    #[error("{0}")]
    WriterGone(#[from] std::sync::mpsc::RecvError),
}

/// The entry and vote that make `me` the only member, after `last` (the WAL's last log id)
/// and the saved `vote`.
pub fn plan(last: Option<LogId>, vote: Option<Vote>, me: NodeId, info: NodeInfo) -> (Entry, Vote) {
    let term = last
        .map_or(0, |l| l.leader_id.term)
        .max(vote.map_or(0, |v| v.leader_id().term))
        + 1;
    let index = last.map_or(0, |l| l.index + 1);
    let membership = Membership::new(vec![BTreeSet::from([me])], BTreeMap::from([(me, info)]));
    let entry = Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, me), index),
        payload: EntryPayload::Membership(membership),
    };
    (entry, Vote::new_committed(term, me))
}

/// Applies the plan to the WAL durably.
pub(crate) fn reset(wal: &Wal, me: NodeId, info: NodeInfo) -> Result<LogId, ResetError> {
    let (_, last) = wal.log_state();
    let (entry, vote) = plan(last, wal.read_vote(), me, info);
    let log_id = entry.log_id;
    wal.save_vote(&vote)?;
    let (tx, rx) = std::sync::mpsc::channel();
    wal.append(
        [entry],
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    )?;
    rx.recv()?.map_err(ResetError::Sync)?;
    tracing::warn!(
        ?log_id,
        "cluster reset: this member is now a cluster of one"
    );
    Ok(log_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_appends_a_single_member_config_in_a_new_term() {
        let last = Some(LogId::new(CommittedLeaderId::new(3, 2), 41));
        let (entry, vote) = plan(last, Some(Vote::new(5, 1)), 7, NodeInfo::default());
        assert_eq!(entry.log_id, LogId::new(CommittedLeaderId::new(6, 7), 42));
        assert_eq!(vote, Vote::new_committed(6, 7));
        let EntryPayload::Membership(m) = entry.payload else {
            panic!("not a membership entry")
        };
        assert_eq!(m.voter_ids().collect::<Vec<_>>(), vec![7]);
        assert_eq!(m.nodes().count(), 1);
        let (first, _) = plan(None, None, 1, NodeInfo::default());
        assert_eq!(first.log_id.index, 0);
    }
}
