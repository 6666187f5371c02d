//! Where the datastore lives under `<data-dir>/server/db` (k3s's layout): the member in
//! `etcd/`, datastore snapshots in `snapshots/`, replaced members in `etcd-old-<seconds>/`.
//!
//! Earlier k3rs versions kept the member's `sm/`, `wal/` and Raft `snapshots/` directly in
//! `db/`; [`member_dir`] moves them into `db/etcd/` once (renames within one directory).

use std::path::{Path, PathBuf};

use super::{io_error, Result};

/// `<data-dir>/server/db/snapshots`.
pub fn default_snapshot_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("db").join("snapshots")
}

/// `<server-dir>/db/etcd`, the member's directory, after moving an old layout into it.
pub fn member_dir(server_dir: &Path) -> Result<PathBuf> {
    let db = server_dir.join("db");
    let member = db.join("etcd");
    if !member.exists() && db.join("wal").is_dir() {
        std::fs::create_dir_all(&member).map_err(io_error(&member))?;
        for part in ["sm", "wal", "snapshots", "member-id"] {
            let from = db.join(part);
            if from.exists() {
                std::fs::rename(&from, member.join(part)).map_err(io_error(&from))?;
            }
        }
        sync_dir(&db)?;
        tracing::info!(dir = %member.display(), "moved the datastore into its own directory");
    }
    Ok(member)
}

/// Moves the member directory away to `db/etcd-old-<now>` (what a restore replaces).
pub fn move_member_aside(server_dir: &Path, now_secs: u64) -> Result<Option<PathBuf>> {
    let member = member_dir(server_dir)?;
    if !member.exists() {
        return Ok(None);
    }
    let old = server_dir.join("db").join(format!("etcd-old-{now_secs}"));
    std::fs::rename(&member, &old).map_err(io_error(&member))?;
    sync_dir(&server_dir.join("db"))?;
    Ok(Some(old))
}

/// Makes renames in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_error(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_layout_moves_into_etcd_and_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db");
        for d in ["sm", "wal", "snapshots"] {
            std::fs::create_dir_all(db.join(d)).unwrap();
        }
        std::fs::write(db.join("wal/vote"), b"v").unwrap();
        let member = member_dir(tmp.path()).unwrap();
        assert_eq!(member, db.join("etcd"));
        assert_eq!(std::fs::read(member.join("wal/vote")).unwrap(), b"v");
        assert!(!db.join("wal").exists() && !db.join("snapshots").exists());
        // Idempotent; a fresh data dir gets no directory made for it.
        assert_eq!(member_dir(tmp.path()).unwrap(), member);
        let old = move_member_aside(tmp.path(), 42).unwrap().unwrap();
        assert_eq!(old, db.join("etcd-old-42"));
        assert_eq!(std::fs::read(old.join("wal/vote")).unwrap(), b"v");
        assert!(!member.exists());
        assert_eq!(move_member_aside(tmp.path(), 43).unwrap(), None);
    }
}
