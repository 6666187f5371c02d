//! Datastore snapshots with k3s's `etcd-snapshot` conventions: on-demand (`k3rs etcd-snapshot
//! save|ls|delete|prune`), scheduled (`k3rs server --etcd-snapshot-schedule-cron …`), and
//! restore (`k3rs server --cluster-reset --cluster-reset-restore-path FILE`).
//!
//! # Files
//! - Snapshots live in `--etcd-snapshot-dir` (default `<data-dir>/server/db/snapshots`), named
//!   `<name>-<node name>-<unix seconds>` (`on-demand-…` for `save`, `etcd-snapshot-…` for
//!   scheduled ones, as in k3s).
//! - A snapshot file is exactly what the etcd Maintenance `Snapshot` RPC streams (and so what
//!   `etcdctl snapshot save` writes): a bbolt database in etcd's v3 backend layout
//!   ([`etcd_format`]: every retained revision, tombstones, leases, the compacted revision)
//!   followed by its sha256 (32 bytes). `etcdctl snapshot status|restore` read it, and a real
//!   etcd starts on what `etcdctl snapshot restore` makes of it. Restores also take snapshots
//!   written by etcd 3.4/3.5 (or by k3s with embedded etcd), and k3rs's older `K3RSSNAP`
//!   files (the store's checksummed export, zero-padded to 512 bytes, then the sha256).
//!   The checksums are checked before a snapshot is declared saved and before a restore
//!   touches anything.
//! - Next to each, `.metadata/<file name>` (JSON, [`file::Metadata`]) records what a restore
//!   checks: the store revision the snapshot holds, its size and the sha256 of the whole file,
//!   plus the node and creation time. A snapshot copied without it still restores (its own
//!   checksums are verified); with it, a mismatch is refused.
//! - Writes are atomic: `<file>.part`, fsync, verify, rename, fsync of the directory.
//!
//! # Layout of `<data-dir>/server/db`
//! `etcd/` holds the member (`sm/`, `wal/`, Raft `snapshots/`; see [`layout`]), `snapshots/`
//! the datastore snapshots, `etcd-old-<unix seconds>/` the member a restore replaced.

pub mod client;
pub mod dir;
#[cfg(test)]
mod etcd35_layout_tests;
pub mod etcd_format;
pub mod file;
pub mod layout;
pub mod restore;
pub mod retention;
pub mod schedule;
pub mod zipped;

use std::path::PathBuf;

/// Base name of scheduled snapshots (`--etcd-snapshot-name`).
pub const SCHEDULED_NAME: &str = "etcd-snapshot";
/// Base name of `k3rs etcd-snapshot save` snapshots (`--name`).
pub const ON_DEMAND_NAME: &str = "on-demand";
/// Snapshots kept per name (`--etcd-snapshot-retention`).
pub const DEFAULT_RETENTION: usize = 5;
/// When scheduled snapshots are taken (`--etcd-snapshot-schedule-cron`).
pub const DEFAULT_SCHEDULE: &str = "0 */12 * * *";

/// Why a snapshot operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A snapshot file fails its checks.
    #[error("snapshot {path} is corrupt or incomplete: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Restoring a snapshot failed.
    #[error("restoring {path}: {reason}")]
    Restore {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Taking a snapshot failed (why).
    #[error("taking the snapshot: {0}")]
    Take(String),
    /// No snapshot of that name (the message).
    #[error("{0}")]
    NotFound(String),
}

/// A snapshot result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_error(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `k3rs server`'s snapshot settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--etcd-disable-snapshots`.
    pub disabled: bool,
    /// `--etcd-snapshot-schedule-cron`.
    pub schedule: k3rs_apimachinery::cron::Schedule,
    /// `--etcd-snapshot-retention`.
    pub retention: usize,
    /// `--etcd-snapshot-dir` (`None`: `<data-dir>/server/db/snapshots`).
    pub dir: Option<PathBuf>,
    /// `--etcd-snapshot-name`.
    pub name: String,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            disabled: false,
            schedule: k3rs_apimachinery::cron::Schedule::parse(DEFAULT_SCHEDULE)
                .expect("the default schedule parses"),
            retention: DEFAULT_RETENTION,
            dir: None,
            name: SCHEDULED_NAME.to_string(),
        }
    }
}

impl Settings {
    /// The snapshot directory for `data_dir`.
    pub fn dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| layout::default_snapshot_dir(data_dir))
    }
}
