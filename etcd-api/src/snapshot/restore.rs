//! `k3rs server --cluster-reset --cluster-reset-restore-path FILE`: the snapshot is verified
//! first (nothing is touched if it is corrupt or truncated), the member directory is moved to
//! `db/etcd-old-<seconds>`, and a fresh member is made from the snapshot
//! ([`k3rs_raft::restore`]); the cluster reset then makes it a cluster of one. Snapshots in
//! etcd's format (k3rs's own, or written by etcd 3.4/3.5 or k3s) keep their revisions; k3s's
//! compressed snapshots (a zip archive holding one) are extracted into the server's scratch
//! directory first and removed once restored.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{etcd_format, file, io_error, layout, Error, Result};

/// A snapshot that passed [`verify`].
#[derive(Debug, Clone)]
pub struct Checked {
    /// The snapshot file (for a compressed snapshot: the file extracted from it).
    pub path: PathBuf,
    /// Whether `path` was extracted from a compressed snapshot (and is removed once used).
    pub extracted: bool,
    /// What reading it found.
    pub found: file::Verified,
}

/// Reads the whole snapshot and checks its checksums (and its sidecar's record, if any).
pub fn verify(path: &Path) -> Result<Checked> {
    let found = file::verify(path)?;
    Ok(Checked {
        path: path.to_path_buf(),
        found,
        extracted: false,
    })
}

/// [`verify`], extracting a compressed (zip) snapshot into `scratch` first.
pub fn verify_maybe_zipped(path: &Path, scratch: &Path) -> Result<Checked> {
    let mut head = Vec::with_capacity(4);
    std::fs::File::open(path)
        .and_then(|f| f.take(4).read_to_end(&mut head))
        .map_err(io_error(path))?;
    if !super::zipped::is_zip(&head) {
        return verify(path);
    }
    std::fs::create_dir_all(scratch).map_err(io_error(scratch))?;
    let dest = scratch.join("restore-extracted.db");
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let checked = super::zipped::extract_single(path, &dest)
        .map_err(|e| corrupt(e.to_string()))
        .and_then(|name| {
            tracing::info!(archive = %path.display(), file = %name, "extracted the compressed snapshot");
            verify(&dest)
        });
    match checked {
        Ok(c) => Ok(Checked {
            extracted: true,
            ..c
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&dest);
            Err(e)
        }
    }
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
    let made = make_member(&member, &snap.path).map_err(|e| match e {
        Error::Restore { reason, .. } => restore_err(reason),
        e => e,
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

/// Makes a member in `member` from the snapshot at `path`: an etcd-format one (bbolt, from
/// k3rs, etcd 3.4/3.5 or k3s) keeps every revision, tombstone, lease and the compacted
/// revision; an older k3rs one is imported as it was exported.
fn make_member(member: &Path, path: &Path) -> Result<()> {
    let restore_err = |reason: String| Error::Restore {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = std::fs::File::open(path).map_err(io_error(path))?;
    let mut head = Vec::with_capacity(20);
    (&mut f)
        .take(20)
        .read_to_end(&mut head)
        .map_err(io_error(path))?;
    if etcd_format::is_bbolt(&head) {
        let data = std::fs::read(path).map_err(io_error(path))?;
        let history = etcd_format::read_snapshot(data).map_err(|e| restore_err(e.to_string()))?;
        k3rs_raft::restore::restore_foreign(member, move |store, meta| {
            store.import_history(&history.state, &mut history.records.into_iter(), meta)
        })
    } else {
        f.seek(SeekFrom::Start(0)).map_err(io_error(path))?;
        k3rs_raft::restore::restore(member, &mut std::io::BufReader::new(f))
    }
    .map(drop)
    .map_err(|e| restore_err(e.to_string()))
}

/// `--cluster-reset-restore-path`, verified (`None` when not given).
pub fn verify_requested(
    restore_path: Option<&Path>,
    cluster_reset: bool,
    scratch: &Path,
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
    verify_maybe_zipped(path, scratch).map(Some)
}

/// The member directory the server starts, restored from `restore` first if given.
pub fn member_dir(server_dir: &Path, restore: Option<&Checked>) -> Result<PathBuf> {
    if let Some(snap) = restore {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let installed = install(server_dir, snap, now);
        if snap.extracted {
            let _ = std::fs::remove_file(&snap.path);
        }
        installed?;
    }
    layout::member_dir(server_dir)
}
