//! Where a write spends its time: one latency histogram per stage of the write path (and of
//! the periodic work that can hold writes up), and a log line whenever a stage takes longer
//! than [`SLOW`], so that a stall can be matched with its cause.
//!
//! The path of a put on the leader: the front end's request handling ([`Stage::Request`],
//! gRPC and TLS excluded) → waiting in the proposer for a batch slot ([`Stage::ProposalQueue`])
//! → the batch's Raft write ([`Stage::RaftWrite`]: WAL append, `fdatasync`, commit, apply) →
//! in it, the WAL's `fdatasync` (`wal_fsync`, the WAL's own histogram), the wait for the apply
//! lock ([`Stage::ApplyLockWait`]) and the store's batch commit (`backend_commit`, the state
//! machine's own histogram); the WAL append itself ([`Stage::WalAppend`]) runs before the sync.
//! Periodic work: WAL purging and the snapshot's phases.

use std::time::Duration;

use crate::wal::{FsyncHistogram, FsyncSnapshot};

/// A stage taking longer than this is logged (at `info`, with its duration).
pub const SLOW: Duration = Duration::from_millis(100);

/// A timed stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A write request in the etcd front end, from its decoded message to its reply.
    Request,
    /// A command waiting in the proposer until its batch goes to Raft.
    ProposalQueue,
    /// A batch's way through Raft: append, sync, commit and apply (or the forward to the
    /// leader, on a follower).
    RaftWrite,
    /// The state machine waiting for the apply lock (held by snapshot installs).
    ApplyLockWait,
    /// Writing entries to the WAL (into the page cache; when a segment fills up, also syncing
    /// it and creating the next), inline in the Raft core's log I/O.
    WalAppend,
    /// Purging the WAL after a snapshot (inline in the Raft core's log I/O).
    WalPurge,
    /// A snapshot's consistent copy of the store's small records (applies wait meanwhile).
    SnapshotCapture,
    /// Writing a snapshot file (applies go on).
    SnapshotWrite,
    /// Flushing the store after a snapshot (applies go on).
    SnapshotFlush,
}

impl Stage {
    /// Every stage, in the order of the write path.
    pub const ALL: [Stage; 9] = [
        Stage::Request,
        Stage::ProposalQueue,
        Stage::RaftWrite,
        Stage::ApplyLockWait,
        Stage::WalAppend,
        Stage::WalPurge,
        Stage::SnapshotCapture,
        Stage::SnapshotWrite,
        Stage::SnapshotFlush,
    ];

    /// The stage's name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Request => "request",
            Stage::ProposalQueue => "proposal_queue",
            Stage::RaftWrite => "raft_write",
            Stage::ApplyLockWait => "apply_lock_wait",
            Stage::WalAppend => "wal_append",
            Stage::WalPurge => "wal_purge",
            Stage::SnapshotCapture => "snapshot_capture",
            Stage::SnapshotWrite => "snapshot_write",
            Stage::SnapshotFlush => "snapshot_flush",
        }
    }
}

/// The histograms of every [`Stage`]. Shared (`Arc`) by the parts that observe them.
#[derive(Debug, Default)]
pub struct Stages {
    hist: [FsyncHistogram; Stage::ALL.len()],
}

impl Stages {
    /// Records one run of `stage`, and logs it if it was slow.
    pub fn observe(&self, stage: Stage, took: Duration) {
        self.hist[stage as usize].observe(took);
        slow(stage.name(), took);
    }

    /// Every stage's histogram now, in [`Stage::ALL`] order.
    pub fn snapshot(&self) -> Vec<(&'static str, FsyncSnapshot)> {
        Stage::ALL
            .iter()
            .map(|s| (s.name(), self.hist[*s as usize].snapshot()))
            .collect()
    }
}

/// Logs a stage that took longer than [`SLOW`].
pub fn slow(stage: &str, took: Duration) {
    if took > SLOW {
        tracing::info!(
            stage,
            ms = took.as_secs_f64() * 1000.0,
            "slow datastore stage"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_has_its_own_histogram() {
        let s = Stages::default();
        s.observe(Stage::RaftWrite, Duration::from_millis(2));
        s.observe(Stage::RaftWrite, Duration::from_millis(3));
        s.observe(Stage::SnapshotFlush, Duration::from_millis(200));
        let snap = s.snapshot();
        let names: Vec<&str> = snap.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, Stage::ALL.map(Stage::name).to_vec());
        let count = |name: &str| snap.iter().find(|(n, _)| *n == name).unwrap().1.count;
        assert_eq!(count("raft_write"), 2);
        assert_eq!(count("snapshot_flush"), 1);
        assert_eq!(count("request"), 0);
        let flush = &snap.iter().find(|(n, _)| *n == "snapshot_flush").unwrap().1;
        assert_eq!(flush.max_seconds, 0.2);
    }
}
