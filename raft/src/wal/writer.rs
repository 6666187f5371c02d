//! The group-commit thread.
//!
//! Appends are written to the segment file (page cache) by the caller; durability is this
//! thread's job. It blocks for the first pending request, then takes every request queued
//! behind it, issues one `fdatasync` per distinct file, and only then runs each request's
//! completion callback. Appends that arrive while a sync is running share the next one; with
//! one writer it adds no delay (the first request is synced as soon as it arrives).
//!
//! openraft 0.9 waits for each append's flush before it issues the next, so on a leader there
//! is one append in flight at a time: there, many clients share a sync because the proposer
//! puts their commands into one entry (see `proposer`). The thread keeps the fsync off the
//! Raft core's task, and batches appends wherever several are in flight.

use std::fs::File;
use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use super::FsyncHistogram;

/// Called once the data written before the request was enqueued is durable (or failed to be).
pub type Callback = Box<dyn FnOnce(io::Result<()>) + Send>;

struct SyncRequest {
    file: Arc<File>,
    done: Callback,
}

/// Handle to the group-commit thread. The thread exits when the handle is dropped, after
/// syncing and completing whatever was queued.
pub struct SyncWriter {
    tx: Option<mpsc::Sender<SyncRequest>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl SyncWriter {
    /// Starts the sync thread; every `fdatasync` it issues is timed into `stats`.
    pub fn spawn(stats: Arc<FsyncHistogram>) -> io::Result<SyncWriter> {
        let (tx, rx) = mpsc::channel::<SyncRequest>();
        let thread = thread::Builder::new()
            .name("k3rs-wal-sync".into())
            .spawn(move || run(rx, &stats))?;
        Ok(SyncWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Runs `done` after `file` has been fdatasync'ed (once everything written to it so far is
    /// durable). Completes the callback with an error if the thread is gone.
    pub fn sync(&self, file: Arc<File>, done: Callback) {
        let req = SyncRequest { file, done };
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

fn run(rx: mpsc::Receiver<SyncRequest>, stats: &FsyncHistogram) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut files: Vec<&Arc<File>> = Vec::new();
        for req in &batch {
            if !files.iter().any(|f| Arc::ptr_eq(f, &req.file)) {
                files.push(&req.file);
            }
        }
        let mut result: Result<(), (io::ErrorKind, String)> = Ok(());
        for f in files {
            let started = Instant::now();
            let synced = f.sync_data();
            let took = started.elapsed();
            stats.observe(took);
            crate::stages::slow("wal_fsync", took);
            if let Err(e) = synced {
                tracing::error!(error = %e, "WAL fdatasync failed");
                result = Err((e.kind(), e.to_string()));
                break;
            }
        }
        for req in batch {
            let r = match &result {
                Ok(()) => Ok(()),
                Err((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            };
            (req.done)(r);
        }
    }
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
        let w = SyncWriter::spawn(Arc::default()).unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            w.sync(
                f.clone(),
                Box::new(move |r| tx.send((i, r.is_ok())).unwrap()),
            );
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
