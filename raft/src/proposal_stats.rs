//! Proposal counters for the metrics endpoint (etcd's `etcd_server_proposals_pending` and
//! `etcd_server_proposals_failed_total`): writes in flight on this member and writes that
//! ended in an error (no leader, timeout, shutdown, storage failure).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Lock-free counters, updated by [`ProposalStats::track`].
#[derive(Debug, Default)]
pub struct ProposalStats {
    pending: AtomicI64,
    failed: AtomicU64,
}

/// Counts one proposal as pending until dropped.
#[derive(Debug)]
pub struct Pending<'a>(&'a ProposalStats);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ProposalStats {
    /// Marks a proposal pending for as long as the guard lives (a cancelled write stops
    /// counting as pending too).
    pub fn track(&self) -> Pending<'_> {
        self.pending.fetch_add(1, Ordering::Relaxed);
        Pending(self)
    }

    pub fn record_failure(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Proposals in flight right now.
    pub fn pending(&self) -> u64 {
        u64::try_from(self.pending.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Proposals that failed since start.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_follows_guards_and_failures_accumulate() {
        let s = ProposalStats::default();
        let a = s.track();
        let b = s.track();
        assert_eq!(s.pending(), 2);
        drop(a);
        assert_eq!(s.pending(), 1);
        s.record_failure();
        drop(b);
        assert_eq!((s.pending(), s.failed()), (0, 1));
    }
}
