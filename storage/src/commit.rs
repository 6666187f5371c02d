//! Handing a batch's sled write off the apply path.
//!
//! An applied batch is complete in memory (index, counters, outputs) before its records reach
//! sled; [`Store::apply_batch_deferred`](crate::Store::apply_batch_deferred) returns the outputs
//! with a [`PendingCommit`], so that the caller (the Raft state machine) can answer its clients
//! while sled writes. Nothing may read the state in between: the store's lock only lets a
//! reader or the next apply in once the [`CommitGate`] says every batch handed out is written
//! (or failed, which poisons the store).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::store::Result;

/// How far the handed-out commits have got. Batches are numbered from 1 in apply order, for
/// the store's lifetime (database generations come and go under it).
#[derive(Debug, Default)]
pub(crate) struct CommitGate {
    /// The last batch handed out (under the store's write lock).
    issued: AtomicU64,
    /// The last batch written to sled.
    committed: AtomicU64,
    /// The store is poisoned for good: a commit or an apply failed (memory and disk may
    /// disagree), or [`Store::poison`](crate::Store::poison) stopped it.
    failed: AtomicBool,
    mu: Mutex<()>,
    cv: Condvar,
}

impl CommitGate {
    /// Numbers the next batch.
    pub(crate) fn issue(&self) -> u64 {
        self.issued.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The last batch handed out; stable while the store's lock is held.
    pub(crate) fn last_issued(&self) -> u64 {
        self.issued.load(Ordering::SeqCst)
    }

    /// Whether batch `seq` and every one before it are written (or one of them failed).
    pub(crate) fn settled(&self, seq: u64) -> bool {
        self.failed() || self.committed.load(Ordering::SeqCst) >= seq
    }

    /// Whether the store is poisoned.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Blocks until batch `seq` is [settled](Self::settled).
    pub(crate) fn wait_for(&self, seq: u64) {
        let mut g = self.mu.lock().unwrap_or_else(|e| e.into_inner());
        while !self.settled(seq) {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Poisons the store: every waiter is settled, every later use refused.
    pub(crate) fn poison(&self) {
        self.finish(0, false);
    }

    fn finish(&self, seq: u64, ok: bool) {
        if ok {
            self.committed.fetch_max(seq, Ordering::SeqCst);
        } else {
            self.failed.store(true, Ordering::SeqCst);
        }
        // Taking the mutex orders this with a waiter between its check and its wait.
        drop(self.mu.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
    }
}

/// The sled write of one applied batch. It runs on [`PendingCommit::commit`] or, if the value
/// is dropped first, in its drop; the store waits for it before anything else touches the
/// state, so it must not be leaked.
#[must_use = "the store waits for this commit before any other read or write"]
pub struct PendingCommit {
    work: Option<(sled::Db, sled::Batch)>,
    seq: u64,
    gate: Arc<CommitGate>,
}

impl PendingCommit {
    pub(crate) fn new(db: sled::Db, batch: sled::Batch, seq: u64, gate: Arc<CommitGate>) -> Self {
        PendingCommit {
            work: Some((db, batch)),
            seq,
            gate,
        }
    }

    /// Writes the batch. An error poisons the store (as a failed inline apply does).
    pub fn commit(mut self) -> Result<()> {
        self.run()
    }

    fn run(&mut self) -> Result<()> {
        let Some((db, batch)) = self.work.take() else {
            return Ok(());
        };
        let written = db.apply_batch(batch);
        // The handle goes first: a store closed and reopened once this is written must not
        // find sled's lock still held.
        drop(db);
        self.gate.finish(self.seq, written.is_ok());
        Ok(written?)
    }
}

impl Drop for PendingCommit {
    fn drop(&mut self) {
        if let Err(e) = self.run() {
            tracing::error!(error = %e, "committing an applied batch; the store is poisoned");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn waiters_wake_when_their_batch_is_written_or_any_fails() {
        let gate = Arc::new(CommitGate::default());
        assert!(gate.settled(gate.last_issued()));
        assert_eq!((gate.issue(), gate.issue(), gate.issue()), (1, 2, 3));
        assert!(!gate.settled(1));
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = gate.clone();
        std::thread::spawn(move || {
            waiter.wait_for(2);
            tx.send(()).unwrap();
        });
        gate.finish(1, true);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        gate.finish(2, true);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(gate.settled(2) && !gate.settled(3));
        gate.finish(3, false);
        assert!(
            gate.failed() && gate.settled(100),
            "a failure settles every waiter"
        );
    }
}
