//! Counts the leader changes this member has seen (etcd's
//! `etcd_server_leader_changes_seen_total`): every change of the known leader to a new
//! leader, the first one included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::types::Raft;
use crate::NodeId;

/// Whether going from `before` to `now` is a leader change seen (a new, known leader).
pub(crate) fn is_change(before: Option<NodeId>, now: Option<NodeId>) -> bool {
    now.is_some() && now != before
}

/// Follows Raft's metrics until `cancel`, counting changes into `count`.
pub(crate) async fn run(raft: Raft, count: Arc<AtomicU64>, cancel: CancellationToken) {
    let mut metrics = raft.metrics();
    let mut last = None;
    loop {
        let now = metrics.borrow_and_update().current_leader;
        if is_change(last, now) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        if now.is_some() {
            last = now;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_new_known_leaders() {
        assert!(is_change(None, Some(1)));
        assert!(is_change(Some(1), Some(2)));
        assert!(!is_change(Some(1), Some(1)));
        assert!(!is_change(Some(1), None));
    }
}
