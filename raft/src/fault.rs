//! Fault injection for tests (feature `fault-injection`, enabled only by this crate's own
//! tests): holds a member's WAL group-commit thread before its next `fdatasync`, as a slow or
//! stuck disk would, to show what waits for a member's own log flush and what does not.
//!
//! `cargo test --workspace` unifies features, so the `k3rs` binary the end-to-end tests run
//! has this module too; with no stall held, a sync batch pays one relaxed atomic load for it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Data directories whose WAL syncs are held.
static STALLED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// How many stalls are held, so that a sync with none held skips the lock.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Holds the WAL syncs of the member whose data directory is `data_dir` until dropped.
pub struct WalSyncStall {
    data_dir: PathBuf,
}

/// Starts holding the WAL syncs of the member in `data_dir` (its `NodeConfig::data_dir`):
/// appends are still written, but none is reported durable until the guard is dropped.
pub fn stall_wal_sync(data_dir: &Path) -> WalSyncStall {
    let data_dir = data_dir.to_path_buf();
    lock().push(data_dir.clone());
    HELD.fetch_add(1, Ordering::SeqCst);
    WalSyncStall { data_dir }
}

impl Drop for WalSyncStall {
    fn drop(&mut self) {
        let mut stalled = lock();
        if let Some(i) = stalled.iter().position(|d| *d == self.data_dir) {
            stalled.swap_remove(i);
        }
        HELD.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Blocks the calling sync thread while the WAL in `wal_dir` belongs to a held member.
pub(crate) fn wait_while_stalled(wal_dir: &Path) {
    while HELD.load(Ordering::Relaxed) > 0 && lock().iter().any(|d| wal_dir.starts_with(d)) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    STALLED.lock().unwrap_or_else(|e| e.into_inner())
}
