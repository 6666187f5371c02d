//! `k3rs server --cluster-reset --cluster-reset-restore-path FILE`: the snapshot is verified
//! first (nothing is touched if it is corrupt or truncated), the member directory is moved to
//! `db/etcd-old-<seconds>`, and a fresh member is made from the snapshot
//! ([`k3rs_raft::restore`]); the cluster reset then makes it a cluster of one.

use std::path::{Path, PathBuf};

use super::{file, io_error, layout, Error, Result};

/// A snapshot that passed [`verify`].
#[derive(Debug, Clone)]
pub struct Checked {
    /// The snapshot file.
    pub path: PathBuf,
    /// What reading it found.
    pub found: file::Verified,
}

/// Reads the whole snapshot and checks its checksums (and its sidecar's record, if any).
pub fn verify(path: &Path) -> Result<Checked> {
    let found = file::verify(path)?;
    Ok(Checked {
        path: path.to_path_buf(),
        found,
    })
}

/// Replaces the member in `server_dir` with the snapshot. Returns where the old member went.
/// If making the new member fails, the old one is moved back.
pub fn install(server_dir: &Path, snap: &Checked, now_secs: u64) -> Result<Option<PathBuf>> {
    let restore_err = |reason: String| Error::Restore {
        path: snap.path.clone(),
        reason,
    };
    // Refuse while a server still runs on the member (the store's lock says so).
    let current = layout::member_dir(server_dir)?;
    if current.join("sm").exists() {
        drop(k3rs_storage::Store::open(&current.join("sm")).map_err(|e| {
            restore_err(format!(
                "opening the current datastore (is the server still running?): {e}"
            ))
        })?);
    }
    let old = layout::move_member_aside(server_dir, now_secs)?;
    let member = layout::member_dir(server_dir)?;
    let made = std::fs::File::open(&snap.path)
        .map_err(io_error(&snap.path))
        .and_then(|f| {
            let mut r = std::io::BufReader::new(f);
            k3rs_raft::restore::restore(&member, &mut r).map_err(|e| restore_err(e.to_string()))
        });
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&member);
        if let Some(old) = &old {
            let _ = std::fs::rename(old, &member);
        }
        return Err(e);
    }
    tracing::info!(
        snapshot = %snap.path.display(),
        revision = snap.found.revision,
        old = ?old,
        "restored the datastore from the snapshot"
    );
    Ok(old)
}

/// `--cluster-reset-restore-path`, verified (`None` when not given).
pub fn verify_requested(
    restore_path: Option<&Path>,
    cluster_reset: bool,
) -> Result<Option<Checked>> {
    let Some(path) = restore_path else {
        return Ok(None);
    };
    if !cluster_reset {
        return Err(Error::Restore {
            path: path.to_path_buf(),
            reason: "--cluster-reset-restore-path needs --cluster-reset".into(),
        });
    }
    verify(path).map(Some)
}

/// The member directory the server starts, restored from `restore` first if given.
pub fn member_dir(server_dir: &Path, restore: Option<&Checked>) -> Result<PathBuf> {
    if let Some(snap) = restore {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        install(server_dir, snap, now)?;
    }
    layout::member_dir(server_dir)
}
