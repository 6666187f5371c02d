//! One snapshot file: written atomically, verified, and described by its metadata sidecar
//! (the format is in the [module docs](super)).

use std::fs::{self, File};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{etcd_format, io_error, layout, Error, Result};
use crate::maintenance::SNAPSHOT_ALIGN;

const SHA256_LEN: u64 = 32;
/// The sidecar directory, inside the snapshot directory.
pub const METADATA_DIR: &str = ".metadata";
/// Suffix of a snapshot being written.
pub const PART_SUFFIX: &str = ".part";
/// Mode of snapshot files and their sidecars (etcd's `PrivateFileMode`).
pub const FILE_MODE: u32 = 0o600;

/// What a restore checks, recorded next to each snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The snapshot's name (its file name).
    pub name: String,
    /// The node that took it.
    pub node_name: String,
    /// The store revision the snapshot holds.
    pub revision: i64,
    /// File size in bytes.
    pub size: u64,
    /// Hex sha256 of the whole file.
    pub sha256: String,
    /// Unix seconds.
    pub created: i64,
}

/// What reading a whole snapshot file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The store revision it holds.
    pub revision: i64,
    /// Its size in bytes.
    pub size: u64,
    /// Hex sha256 of the whole file.
    pub sha256: String,
}

/// The sidecar path of the snapshot at `path`.
pub fn metadata_path(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    dir.join(METADATA_DIR).join(name)
}

/// The sidecar of `path`, if there is one.
pub fn read_metadata(path: &Path) -> Result<Option<Metadata>> {
    let meta = metadata_path(path);
    match fs::read(&meta) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Corrupt {
                path: meta,
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(&meta)(e)),
    }
}

/// Reads the whole file and checks it: an etcd-format snapshot (bbolt) by its sha256
/// trailer (when the size says there is one, as etcdctl decides) and its pages; an older
/// `K3RSSNAP` one by its trailer and the store's own checksum. Then the sidecar, if any,
/// must agree.
pub fn verify(path: &Path) -> Result<Verified> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = File::open(path).map_err(io_error(path))?;
    let mut head = Vec::with_capacity(20);
    (&mut f)
        .take(20)
        .read_to_end(&mut head)
        .map_err(io_error(path))?;
    let found = if etcd_format::is_bbolt(&head) {
        let data = fs::read(path).map_err(io_error(path))?;
        let (size, sha256) = (data.len() as u64, hex::encode(Sha256::digest(&data)));
        let history = etcd_format::read_snapshot(data).map_err(|e| corrupt(e.to_string()))?;
        Verified {
            revision: history.state.revision,
            size,
            sha256,
        }
    } else {
        verify_k3rs_format(path, f)?
    };
    if let Some(m) = read_metadata(path)? {
        if (m.revision, m.size, &m.sha256) != (found.revision, found.size, &found.sha256) {
            return Err(corrupt(format!(
                "it does not match its metadata {} (revision {}, {} bytes, sha256 {}; the \
                 file has revision {}, {} bytes, sha256 {})",
                metadata_path(path).display(),
                m.revision,
                m.size,
                m.sha256,
                found.revision,
                found.size,
                found.sha256
            )));
        }
    }
    Ok(found)
}

/// The older `K3RSSNAP` format: the sha256 trailer, then the store's own checksum.
fn verify_k3rs_format(path: &Path, mut f: File) -> Result<Verified> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let size = f.seek(SeekFrom::End(0)).map_err(io_error(path))?;
    f.seek(SeekFrom::Start(0)).map_err(io_error(path))?;
    let whole = {
        let mut h = Sha256::new();
        std::io::copy(&mut BufReader::new(&mut f), &mut h).map_err(io_error(path))?;
        hex::encode(h.finalize())
    };
    let body_len = if size % SNAPSHOT_ALIGN == SHA256_LEN {
        let body = size - SHA256_LEN;
        f.seek(SeekFrom::Start(0)).map_err(io_error(path))?;
        let mut h = Sha256::new();
        std::io::copy(&mut BufReader::new((&mut f).take(body)), &mut h).map_err(io_error(path))?;
        let mut trailer = [0u8; SHA256_LEN as usize];
        f.read_exact(&mut trailer).map_err(io_error(path))?;
        if h.finalize().as_slice() != trailer {
            return Err(corrupt("sha256 mismatch".into()));
        }
        body
    } else {
        size
    };
    f.seek(SeekFrom::Start(0)).map_err(io_error(path))?;
    let mut body = BufReader::new(f.take(body_len));
    let info =
        k3rs_storage::Store::verify_snapshot(&mut body).map_err(|e| corrupt(e.to_string()))?;
    Ok(Verified {
        revision: info.revision,
        size,
        sha256: whole,
    })
}

/// Writes a snapshot named `name` into `dir`: `fill` writes the body (the bytes the etcd
/// `Snapshot` RPC streams), then the file is synced, verified, renamed into place and its
/// sidecar written. Returns the final path and its metadata.
pub fn save(
    dir: &Path,
    name: &str,
    node_name: &str,
    created: i64,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<(PathBuf, Metadata)> {
    super::dir::ensure_private(dir)?;
    let path = dir.join(name);
    let part = dir.join(format!("{name}{PART_SUFFIX}"));
    let result = (|| {
        // A leftover part file would keep its mode: start afresh.
        let _ = fs::remove_file(&part);
        // Readable too: an etcd-format body is hashed from the file for its trailer.
        let mut f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&part)
            .map_err(io_error(&part))?;
        fill(&mut f)?;
        f.sync_all().map_err(io_error(&part))?;
        drop(f);
        let v = verify(&part)?;
        fs::rename(&part, &path).map_err(io_error(&part))?;
        layout::sync_dir(dir)?;
        Ok(v)
    })();
    let v = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = fs::remove_file(&part);
            return Err(e);
        }
    };
    let meta = Metadata {
        name: name.to_string(),
        node_name: node_name.to_string(),
        revision: v.revision,
        size: v.size,
        sha256: v.sha256,
        created,
    };
    let json = serde_json::to_vec_pretty(&meta).expect("metadata serializes");
    let meta_path = metadata_path(&path);
    super::dir::ensure_private(&dir.join(METADATA_DIR))?;
    k3rs_apimachinery::fs::write_atomic(&meta_path, &json, FILE_MODE)
        .map_err(|(path, source)| Error::Io { path, source })?;
    Ok((path, meta))
}

/// Deletes a snapshot and its sidecar.
pub fn delete(path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(io_error(path))?;
    let meta = metadata_path(path);
    match fs::remove_file(&meta) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(&meta)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn store() -> (tempfile::TempDir, k3rs_storage::Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = k3rs_storage::Store::open(&tmp.path().join("sm")).unwrap();
        let put = k3rs_storage::Command::Put(k3rs_storage::PutRequest {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
            ..Default::default()
        });
        store.apply_batch(&[put.clone(), put], b"m").unwrap();
        (tmp, store)
    }

    #[test]
    fn older_k3rs_format_snapshots_still_verify() {
        let (_s, store) = store();
        let mut body = Vec::new();
        store.export_snapshot(&mut body).unwrap();
        body.resize(
            crate::maintenance::padded_len(body.len() as u64) as usize,
            0,
        );
        let digest = Sha256::digest(&body);
        body.extend_from_slice(&digest);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("old");
        fs::write(&path, &body).unwrap();
        assert_eq!(verify(&path).unwrap().revision, 3);
        body[20] ^= 1;
        fs::write(&path, &body).unwrap();
        assert!(verify(&path).unwrap_err().to_string().contains("sha256"));
    }

    #[test]
    fn save_verifies_and_records_what_a_restore_checks() {
        let tmp = tempfile::tempdir().unwrap();
        let (_s, store) = store();
        let (path, meta) = save(tmp.path(), "on-demand-n1-100", "n1", 100, |f| {
            etcd_format::write_snapshot(&store, f, 9)
                .map(drop)
                .map_err(|e| Error::Take(e.to_string()))
        })
        .unwrap();
        assert_eq!(path, tmp.path().join("on-demand-n1-100"));
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64 % SNAPSHOT_ALIGN, SHA256_LEN);
        assert!(etcd_format::is_bbolt(&bytes));
        assert_eq!(meta.revision, 3);
        assert_eq!(meta.size, bytes.len() as u64);
        assert_eq!(meta.sha256, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(read_metadata(&path).unwrap(), Some(meta.clone()));
        assert_eq!(verify(&path).unwrap().revision, 3);
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&metadata_path(&path)), 0o600);
        assert_eq!(mode(tmp.path()), 0o700);
        assert_eq!(mode(&tmp.path().join(METADATA_DIR)), 0o700);

        // A flipped byte anywhere is refused; so is a file that disagrees with its sidecar.
        for at in [10, 3 * 4096 + 20, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            fs::write(&path, &bad).unwrap();
            let e = verify(&path).unwrap_err().to_string();
            assert!(e.contains("corrupt"), "{e}");
        }
        fs::write(&path, &bytes[..bytes.len() - 40]).unwrap();
        assert!(verify(&path).is_err());
        // Without its sidecar, a whole file still verifies on its own checksums.
        fs::write(&path, &bytes).unwrap();
        fs::remove_file(metadata_path(&path)).unwrap();
        assert_eq!(verify(&path).unwrap().sha256, meta.sha256);

        // A failing body leaves nothing behind.
        let e = save(tmp.path(), "x", "n1", 1, |f| {
            f.write_all(b"garbage").map_err(io_error(tmp.path()))
        });
        assert!(e.is_err());
        let names: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(names, [".metadata", "on-demand-n1-100"]);
        delete(&path).unwrap();
        assert!(!path.exists());
    }
}
