//! The purge thread: makes purges durable in order, off the Raft core.
//!
//! [`Wal::purge`](super::Wal::purge) forgets the purged entries in memory at once; what is left
//! for the disk is a [`PurgeJob`]: first the purge marker (replaced durably), then the segment
//! files all of whose entries are purged, oldest first. Jobs run one at a time in the order they
//! were submitted, so the marker never goes back.
//!
//! # Guarantees (crash at any step)
//! - Before the marker is durable: the old marker and every segment are on disk, so the WAL
//!   reopens in its state before the purge (openraft purges again after its next snapshot).
//! - After the marker: the segments left are wholly at or below it; [`super::Wal::open`]
//!   deletes them ([`super::purge_plan`]). Deletions are not made durable (no directory sync): a
//!   segment that comes back after a crash is dropped again the same way.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use super::durable_file;
use crate::types::LogId;

/// The file holding the last purged log id.
pub const PURGED_FILE: &str = "purged";

/// What a purge leaves to do on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeJob {
    pub upto: LogId,
    /// Segments holding only purged entries, oldest first, none of whose paths the log can
    /// create again ([`super::purge_plan`]).
    pub segments: Vec<PathBuf>,
}

/// One step of a [`PurgeJob`], in the order they must happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    WriteMarker(LogId),
    Delete(PathBuf),
}

impl PurgeJob {
    /// The marker first (a segment is deleted only once the marker covers it), then the
    /// segments oldest first.
    pub fn steps(&self) -> Vec<Step> {
        std::iter::once(Step::WriteMarker(self.upto))
            .chain(self.segments.iter().cloned().map(Step::Delete))
            .collect()
    }
}

/// Writes the purge marker durably.
pub fn write_marker(dir: &Path, upto: LogId) -> io::Result<()> {
    let marker = rmp_serde::to_vec(&Some(upto)).expect("log ids always serialize");
    durable_file::replace(dir, PURGED_FILE, &marker)
}

/// Carries out one step in the WAL directory `dir`.
pub fn run_step(dir: &Path, step: &Step) -> io::Result<()> {
    match step {
        Step::WriteMarker(upto) => write_marker(dir, *upto),
        Step::Delete(path) => match std::fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
    }
}

/// Receives a job's outcome once its steps ran (or the first failed).
pub type Done = mpsc::Receiver<io::Result<()>>;

/// A job, or `None`: a barrier that completes once the jobs before it ran.
type Queued = (Option<PurgeJob>, mpsc::Sender<io::Result<()>>);

/// Handle to the purge thread. Dropping it runs the queued jobs, then joins the thread.
pub struct Purger {
    tx: Option<mpsc::Sender<Queued>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Purger {
    /// Starts the purge thread for the WAL in `dir`.
    pub fn spawn(dir: PathBuf) -> io::Result<Purger> {
        let (tx, rx) = mpsc::channel::<Queued>();
        let thread = thread::Builder::new()
            .name("k3rs-wal-purge".into())
            .spawn(move || run(rx, &dir))?;
        Ok(Purger {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues `job` behind the earlier ones.
    pub fn submit(&self, job: PurgeJob) -> Done {
        self.queue(Some(job))
    }

    /// Completes once every job submitted before ran.
    #[cfg(test)]
    pub fn flush(&self) -> Done {
        self.queue(None)
    }

    fn queue(&self, job: Option<PurgeJob>) -> Done {
        let (done_tx, done_rx) = mpsc::channel();
        let sent = self.tx.as_ref().map(|tx| tx.send((job, done_tx)));
        if let Some(Err(mpsc::SendError((_, done_tx)))) = sent {
            let _ = done_tx.send(Err(io::Error::other("WAL purge thread stopped")));
        }
        done_rx
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(rx: mpsc::Receiver<Queued>, dir: &Path) {
    for (job, done) in rx {
        let Some(job) = job else {
            let _ = done.send(Ok(()));
            continue;
        };
        let started = Instant::now();
        let result = job.steps().iter().try_for_each(|step| {
            run_step(dir, step).inspect_err(|e| {
                // Harmless for safety: the log is only longer than it needs to be on disk, no
                // later append reuses the path (see `purge_plan`), and the next open deletes
                // what a durable marker covers. The disk use stays up meanwhile.
                tracing::error!(error = %e, ?step, "WAL purge step failed");
            })
        });
        crate::stages::slow("wal_purge_files", started.elapsed());
        let _ = done.send(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_first_then_segments_in_order() {
        let upto = LogId::new(openraft::CommittedLeaderId::new(1, 1), 19);
        let job = PurgeJob {
            upto,
            segments: vec!["a.wal".into(), "b.wal".into()],
        };
        assert_eq!(
            job.steps(),
            vec![
                Step::WriteMarker(upto),
                Step::Delete("a.wal".into()),
                Step::Delete("b.wal".into()),
            ]
        );
    }
}
