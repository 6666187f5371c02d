//! A file writer that syncs its data every few megabytes, for writing large files (snapshots)
//! beside the WAL: a snapshot of a large store written in one go and synced at the end put
//! hundreds of megabytes of writeback in the disk's queue at once, and every WAL `fdatasync`
//! issued meanwhile waited behind it (0.2–0.4 s in `etcdctl check perf --load=l`). Syncing
//! every [`SYNC_EVERY`] bytes keeps what a WAL sync can find queued ahead of it small.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two syncs.
pub const SYNC_EVERY: u64 = 4 << 20;

/// What can make its written data durable (a [`File`]; a counter in tests).
pub trait SyncData {
    /// Makes the data written so far durable.
    fn sync_data(&mut self) -> io::Result<()>;
}

impl SyncData for File {
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }
}

/// Writes through to `inner`, syncing its data after every `every` bytes.
pub struct PacedSync<W> {
    inner: W,
    every: u64,
    unsynced: u64,
}

impl<W: Write + SyncData> PacedSync<W> {
    /// Wraps `inner`, syncing every [`SYNC_EVERY`] bytes.
    pub fn new(inner: W) -> Self {
        Self::every(inner, SYNC_EVERY)
    }

    /// Wraps `inner`, syncing every `every` bytes (at least 1).
    pub fn every(inner: W, every: u64) -> Self {
        PacedSync {
            inner,
            every: every.max(1),
            unsynced: 0,
        }
    }

    /// The writer back (its last bytes written but not necessarily synced).
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write + SyncData> Write for PacedSync<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.unsynced += n as u64;
        if self.unsynced >= self.every {
            self.inner.sync_data()?;
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counted {
        bytes: Vec<u8>,
        /// Length of `bytes` at each sync.
        syncs: Vec<usize>,
        fail_sync: bool,
    }

    impl Write for Counted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl SyncData for Counted {
        fn sync_data(&mut self) -> io::Result<()> {
            if self.fail_sync {
                return Err(io::Error::other("disk gone"));
            }
            self.syncs.push(self.bytes.len());
            Ok(())
        }
    }

    #[test]
    fn syncs_after_every_so_many_bytes_and_passes_everything_through() {
        let mut w = PacedSync::every(Counted::default(), 10);
        for chunk in [&b"abcd"[..], b"efghij", b"k", b"lmnopqrstuvwxyz0123"] {
            w.write_all(chunk).unwrap();
        }
        let c = w.into_inner();
        assert_eq!(c.bytes, b"abcdefghijklmnopqrstuvwxyz0123");
        assert_eq!(c.syncs, vec![10, 30], "a sync once 10 bytes are unsynced");
    }

    #[test]
    fn a_failed_sync_fails_the_write() {
        let c = Counted {
            fail_sync: true,
            ..Counted::default()
        };
        let mut w = PacedSync::every(c, 4);
        assert!(w.write_all(b"abc").is_ok());
        let e = w.write_all(b"def").unwrap_err();
        assert_eq!(e.to_string(), "disk gone");
    }
}
