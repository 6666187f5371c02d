//! Writing credentials to disk atomically (temp file + fsync + rename) with the final mode set
//! when the file is created, so a private key is never readable by others, not even briefly.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` and its parents with mode 0700 where missing.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// `<path>.tmp`, the temp file [`write_atomic`] renames into place.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `contents` to `path` atomically with `mode`, creating parent directories (0700).
/// On error, the path named is the one that failed (the directory, the temp file or `path`).
pub fn write_atomic(
    path: &Path,
    contents: &[u8],
    mode: u32,
) -> Result<(), (PathBuf, std::io::Error)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    let tmp = temp_path(path);
    let failed = |e| (tmp.clone(), e);
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(failed)?;
    f.write_all(contents).map_err(failed)?;
    f.sync_all().map_err(failed)?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| (path.to_path_buf(), e))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_with_the_mode_replaces_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/key");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&d.path().join("sub")), 0o700);
        assert!(!temp_path(&p).exists());
    }
}
