//! openraft's [`RaftLogStorage`] over the [`Wal`].
//!
//! The WAL does blocking file I/O; appends only `write(2)` into the page cache (every sync,
//! also a segment rotation's, is on the group-commit thread), a purge only updates memory (its
//! marker and file deletions run on the WAL's purge thread), and vote/truncate are rare, so they
//! run inline.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{OptionalSend, StorageIOError};

use crate::stages::{Stage, Stages};
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use crate::wal::Wal;

/// The Raft log and vote. Cheap to clone: clones share the WAL (the clone is also the reader
/// that replication tasks use).
#[derive(Clone)]
pub struct LogStore {
    wal: Arc<Wal>,
    committed: Arc<Mutex<Option<LogId>>>,
    stages: Arc<Stages>,
}

impl LogStore {
    pub fn new(wal: Arc<Wal>, stages: Arc<Stages>) -> LogStore {
        LogStore {
            wal,
            committed: Arc::new(Mutex::new(None)),
            stages,
        }
    }

    /// The last committed log id openraft reported, shared for `Node::status`.
    pub fn committed_handle(&self) -> Arc<Mutex<Option<LogId>>> {
        self.committed.clone()
    }
}

fn bounds(range: impl RangeBounds<u64>) -> std::ops::Range<u64> {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e + 1,
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    start..end
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.wal
            .entries(bounds(range))
            .map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let (last_purged_log_id, last_log_id) = self.wal.log_state();
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.wal
            .save_vote(vote)
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.wal.read_vote())
    }

    /// Kept in memory only (for `Node::status`). Not persisting it is safe: on restart the
    /// entries past the state machine's applied index are applied once the leader commits its
    /// first entry of the new term (the WAL replay), or, for a leader openraft restores in
    /// its old term, once its log's tail at startup is committed; reads wait for both (see
    /// `read_index`).
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        *self.committed.lock().unwrap_or_else(|e| e.into_inner()) = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(None)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let started = std::time::Instant::now();
        let appended = self
            .wal
            .append(entries, Box::new(move |r| callback.log_io_completed(r)));
        self.stages.observe(Stage::WalAppend, started.elapsed());
        appended.map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.wal
            .truncate(log_id.index)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    /// openraft purges only up to the last snapshot (minus `max_in_snapshot_log_to_keep`), and
    /// a snapshot is built only after `Store::flush`, so the purged entries are durable in the
    /// store and in the snapshot file.
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let started = std::time::Instant::now();
        let purged = self.wal.purge(log_id);
        self.stages.observe(Stage::WalPurge, started.elapsed());
        purged.map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
