//! Snapshot files under `<data_dir>/snapshots/`.
//!
//! A file is `K3RSSNP1`, a little-endian u32 length, the rmp-serde [`SnapshotMeta`], then the
//! store's `export_snapshot` bytes. The whole file is the Raft `SnapshotData`, so a follower
//! receives exactly what the leader has on disk. Files are named
//! `<last index, 20 digits>-<unix nanos>.snap`, written to a temp name (its data synced every few
//! megabytes as it is written, [`PacedSync`]), fsync'ed and renamed;
//! only the newest is kept ([`KEEP`]).

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::paced_sync::PacedSync;
use crate::types::SnapshotMeta;

const MAGIC: &[u8; 8] = b"K3RSSNP1";
const SUFFIX: &str = ".snap";
/// Snapshots kept on disk. Only the newest can serve recovery: the WAL is purged up to it, so an
/// older file could not be replayed forward, and keeping it would hold compacted history on disk.
pub const KEEP: usize = 1;

/// The snapshot directory.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    dir: PathBuf,
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl SnapshotDir {
    pub fn open(dir: &Path) -> io::Result<SnapshotDir> {
        fs::create_dir_all(dir)?;
        // Leftovers of interrupted writes or receives.
        for e in fs::read_dir(dir)? {
            let e = e?;
            if e.file_name().to_str().is_some_and(|n| n.ends_with(".tmp")) {
                fs::remove_file(e.path())?;
            }
        }
        Ok(SnapshotDir {
            dir: dir.to_path_buf(),
        })
    }

    /// A fresh id for a snapshot whose last log index is `index`.
    pub fn new_id(index: u64) -> String {
        format!("{index:020}-{}", unix_nanos())
    }

    fn files(&self) -> io::Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "snap"))
            .collect();
        out.sort();
        Ok(out)
    }

    /// A path for receiving a snapshot from the leader.
    pub fn incoming_path(&self) -> PathBuf {
        self.dir.join(format!("incoming-{}.tmp", unix_nanos()))
    }

    /// The newest snapshot: its meta and path.
    pub fn latest(&self) -> io::Result<Option<(SnapshotMeta, PathBuf)>> {
        let Some(path) = self.files()?.pop() else {
            return Ok(None);
        };
        let (meta, _) = open_body(&path)?;
        Ok(Some((meta, path)))
    }

    /// Writes a snapshot durably: `meta`, then whatever `body` writes. Returns its path.
    pub fn write(
        &self,
        meta: &SnapshotMeta,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        let tmp = self.dir.join(format!("{}.tmp", meta.snapshot_id));
        let mut w = BufWriter::new(PacedSync::new(File::create(&tmp)?));
        let header = rmp_serde::to_vec(meta).expect("snapshot meta always serializes");
        w.write_all(MAGIC)?;
        w.write_all(&(header.len() as u32).to_le_bytes())?;
        w.write_all(&header)?;
        body(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?.into_inner();
        f.sync_all()?;
        drop(f);
        self.adopt(&tmp, meta)
    }

    /// Moves a complete snapshot file (written by [`write`](Self::write) or received from the
    /// leader) into place under its final name, durably, and prunes old snapshots.
    pub fn adopt(&self, from: &Path, meta: &SnapshotMeta) -> io::Result<PathBuf> {
        let path = self.dir.join(format!("{}{SUFFIX}", meta.snapshot_id));
        fs::rename(from, &path)?;
        File::open(&self.dir)?.sync_all()?;
        let files = self.files()?;
        if files.len() > KEEP {
            for old in &files[..files.len() - KEEP] {
                fs::remove_file(old)?;
            }
        }
        Ok(path)
    }
}

/// Opens a snapshot file, reads its meta, and returns a reader positioned at the store data.
pub fn open_body(path: &Path) -> io::Result<(SnapshotMeta, BufReader<File>)> {
    let mut r = BufReader::new(File::open(path)?);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(invalid(format!("{}: not a k3rs snapshot", path.display())));
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let mut header = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut header)?;
    let meta = rmp_serde::from_slice(&header)
        .map_err(|e| invalid(format!("{}: snapshot meta: {e}", path.display())))?;
    Ok((meta, r))
}

/// Opens the whole file (header included) for streaming to a follower.
pub async fn open_data(path: &Path) -> io::Result<tokio::fs::File> {
    let mut f = tokio::fs::File::open(path).await?;
    tokio::io::AsyncSeekExt::seek(&mut f, SeekFrom::Start(0)).await?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, LogId};

    use super::*;

    fn meta(index: u64) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
            last_membership: Default::default(),
            snapshot_id: SnapshotDir::new_id(index),
        }
    }

    #[test]
    fn write_latest_prune() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SnapshotDir::open(tmp.path()).unwrap();
        assert!(dir.latest().unwrap().is_none());
        for i in [5, 10, 15] {
            dir.write(&meta(i), |w| w.write_all(format!("state@{i}").as_bytes()))
                .unwrap();
        }
        let (m, path) = dir.latest().unwrap().unwrap();
        assert_eq!(m.last_log_id.unwrap().index, 15);
        let (_, mut body) = open_body(&path).unwrap();
        let mut s = String::new();
        body.read_to_string(&mut s).unwrap();
        assert_eq!(s, "state@15");
        assert_eq!(dir.files().unwrap().len(), KEEP);
    }
}
