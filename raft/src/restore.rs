//! Restoring a datastore snapshot into an empty member directory (`k3rs server
//! --cluster-reset --cluster-reset-restore-path`).
//!
//! A snapshot (the store's `export_snapshot` bytes) carries the state machine's applied state:
//! the log id `L` of the last entry it holds and the membership then. [`restore`] makes a
//! member directory whose Raft state is consistent with exactly that:
//! - `sm/`: the imported store (applied = `L`);
//! - `snapshots/`: a Raft snapshot at `L` of that store, so that members added later are sent
//!   the restored data (the log before `L` is gone);
//! - `wal/`: empty, purged up to `L`, so the log continues at `L + 1`.
//!
//! Then start the member with [`crate::Bootstrap::ClusterReset`]: it appends a one-member
//! membership after `L` in a new term and elects itself.
//!
//! # Errors
//! Nothing is written before the snapshot verified; a directory that already holds a member
//! is refused (move it away first).

use std::io::Read;
use std::path::Path;

use k3rs_storage::Store;

use crate::snapshot::SnapshotDir;
use crate::state_machine;
use crate::types::{LogId, SnapshotMeta};
use crate::wal::{Wal, DEFAULT_SEGMENT_SIZE};

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The data dir (given) already holds a member.
    #[error("{0} already holds a datastore; move it away first")]
    NotEmpty(std::path::PathBuf),
    /// The snapshot could not be imported.
    #[error("importing the snapshot: {0}")]
    Import(#[source] k3rs_storage::Error),
    /// The restored member's WAL or id could not be written.
    #[error("writing the restored member state: {0}")]
    Write(String),
}

/// Restores `snapshot` into `data_dir` (which must not hold a member yet). Returns the log id
/// the restored state is at (`None` for a snapshot of a store that never applied an entry).
pub fn restore(data_dir: &Path, snapshot: &mut dyn Read) -> Result<Option<LogId>, RestoreError> {
    restore_with(data_dir, |store| store.import_snapshot(snapshot))
}

/// Restores a store's state from outside k3rs (an etcd snapshot) into `data_dir`: `import`
/// loads it into the store with the applied-state blob it is given. That state says log
/// index 0 of term 0 is applied, with no membership, so the restored data sits in a Raft
/// snapshot (sent to members added later) and the log continues at index 1.
pub fn restore_foreign(
    data_dir: &Path,
    import: impl FnOnce(&Store, &[u8]) -> Result<(), k3rs_storage::Error>,
) -> Result<Option<LogId>, RestoreError> {
    let applied = (
        Some(LogId::new(openraft::CommittedLeaderId::new(0, 0), 0)),
        crate::types::StoredMembership::default(),
    );
    let meta = state_machine::encode_meta(&applied);
    restore_with(data_dir, |store| import(store, &meta))
}

fn restore_with(
    data_dir: &Path,
    import: impl FnOnce(&Store) -> Result<(), k3rs_storage::Error>,
) -> Result<Option<LogId>, RestoreError> {
    let write = |e: &dyn std::fmt::Display| RestoreError::Write(e.to_string());
    for part in ["sm", "wal"] {
        if data_dir.join(part).exists() {
            return Err(RestoreError::NotEmpty(data_dir.to_path_buf()));
        }
    }
    std::fs::create_dir_all(data_dir).map_err(|e| write(&e))?;
    let store = Store::open(&data_dir.join("sm")).map_err(RestoreError::Import)?;
    import(&store).map_err(RestoreError::Import)?;
    store.flush().map_err(RestoreError::Import)?;
    let (last_log_id, last_membership) =
        state_machine::applied_meta(&store).map_err(|e| write(&e))?;
    if let Some(last) = last_log_id {
        let snapshots = SnapshotDir::open(&data_dir.join("snapshots")).map_err(|e| write(&e))?;
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id: SnapshotDir::new_id(last.index),
        };
        snapshots
            .write(&meta, |w| {
                store
                    .export_snapshot(w)
                    .map_err(|e| std::io::Error::other(e.to_string()))
            })
            .map_err(|e| write(&e))?;
        let wal = Wal::open(&data_dir.join("wal"), DEFAULT_SEGMENT_SIZE).map_err(|e| write(&e))?;
        wal.purge(last).map_err(|e| write(&e))?;
    }
    tracing::info!(?last_log_id, revision = store.current_revision(), dir = %data_dir.display(), "restored the datastore snapshot");
    Ok(last_log_id)
}
