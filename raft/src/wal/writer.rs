//! The group-commit thread.
//!
//! Appends are written to the segment files (page cache) by the caller; durability is this
//! thread's job. It blocks for the first pending request, then takes every request queued
//! behind it, issues one `fdatasync` per distinct file (and one `fsync` of the WAL directory if
//! a request created a segment), and only then runs each request's completion callback.
//! Appends that arrive while a sync is running share the next one; with one writer it adds no
//! delay (the first request is synced as soon as it arrives).
//!
//! # Guarantees
//! - Requests complete in the order they were made, and a request completes `Ok` only after
//!   every earlier request's files were synced too (batches run one after the other).
//! - After one failed sync every later request fails as well: a failed `fdatasync` may have
//!   dropped dirty pages, so nothing written before it can be trusted to be durable.
//!
//! A follower's Raft core waits for each append's flush before it answers the leader; the
//! leader's does not (the workspace's patched openraft, `vendor/openraft/K3RS-PATCH.md`): it
//! replicates the entries while this thread syncs them and counts itself towards the quorum
//! once they are durable, so appends that arrive during a sync share the next one. Many
//! clients' commands also share an entry (see `proposer`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use super::FsyncHistogram;

/// Called once the data written before the request was enqueued is durable (or failed to be).
pub type Callback = Box<dyn FnOnce(io::Result<()>) + Send>;

/// What one append wrote: the segments it wrote to and whether it created one.
pub struct SyncRequest {
    /// Every segment the append wrote to (a sealed one and its successor after a rotation).
    pub files: Vec<Arc<File>>,
    /// Whether a segment was created, so the directory entry must be made durable too.
    pub sync_dir: bool,
    pub done: Callback,
}

/// Handle to the group-commit thread. The thread exits when the handle is dropped, after
/// syncing and completing whatever was queued.
pub struct SyncWriter {
    tx: Option<mpsc::Sender<SyncRequest>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl SyncWriter {
    /// Starts the sync thread for the WAL in `dir`; every sync it issues is timed into `stats`.
    pub fn spawn(dir: PathBuf, stats: Arc<FsyncHistogram>) -> io::Result<SyncWriter> {
        let (tx, rx) = mpsc::channel::<SyncRequest>();
        let thread = thread::Builder::new()
            .name("k3rs-wal-sync".into())
            .spawn(move || run(rx, &dir, &stats))?;
        Ok(SyncWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Runs `req.done` once the request's files (and the directory, if asked) have been synced:
    /// everything written to them so far is durable. Completes the callback with an error if
    /// the thread is gone.
    pub fn sync(&self, req: SyncRequest) {
        if let Some(tx) = &self.tx {
            if let Err(mpsc::SendError(req)) = tx.send(req) {
                (req.done)(Err(io::Error::other("WAL sync thread stopped")));
            }
        }
    }
}

impl Drop for SyncWriter {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Failure = (io::ErrorKind, String);

fn run(rx: mpsc::Receiver<SyncRequest>, dir: &Path, stats: &FsyncHistogram) {
    // Sticky: see the module docs.
    let mut failed: Option<Failure> = None;
    while let Ok(first) = rx.recv() {
        #[cfg(feature = "fault-injection")]
        crate::fault::wait_while_stalled(dir);
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        if failed.is_none() {
            failed = sync_batch(&batch, dir, stats).err();
        }
        for req in batch {
            let r = match &failed {
                None => Ok(()),
                Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            };
            (req.done)(r);
        }
    }
}

/// Syncs every distinct file of `batch`, then the directory if any request created a segment.
fn sync_batch(batch: &[SyncRequest], dir: &Path, stats: &FsyncHistogram) -> Result<(), Failure> {
    let mut files: Vec<&Arc<File>> = Vec::new();
    for f in batch.iter().flat_map(|r| &r.files) {
        if !files.iter().any(|seen| Arc::ptr_eq(seen, f)) {
            files.push(f);
        }
    }
    let timed = |what: &str, sync: &mut dyn FnMut() -> io::Result<()>| {
        let started = Instant::now();
        let synced = sync();
        let took = started.elapsed();
        stats.observe(took);
        crate::stages::slow("wal_fsync", took);
        synced.map_err(|e| {
            tracing::error!(error = %e, what, "WAL sync failed");
            (e.kind(), e.to_string())
        })
    };
    for f in files {
        timed("fdatasync", &mut || f.sync_data())?;
    }
    if batch.iter().any(|r| r.sync_dir) {
        timed("directory fsync", &mut || {
            super::durable_file::sync_dir(dir)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn completes_every_request() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = File::create(dir.path().join("f")).unwrap();
        f.write_all(b"x").unwrap();
        let f = Arc::new(f);
        let w = SyncWriter::spawn(dir.path().to_path_buf(), Arc::default()).unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            w.sync(SyncRequest {
                files: vec![f.clone()],
                sync_dir: i % 10 == 0,
                done: Box::new(move |r| tx.send((i, r.is_ok())).unwrap()),
            });
        }
        drop(w);
        let got: Vec<_> = rx.try_iter().collect();
        assert_eq!(got.len(), 100);
        assert!(got.iter().all(|(_, ok)| *ok));
        assert_eq!(
            got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
    }
}
