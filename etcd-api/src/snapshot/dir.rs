//! The snapshot directory: which files are snapshots, pruning to a retention, and its mode.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{file, io_error, retention, Result};

/// Mode of the snapshot directory and of its `.metadata` directory: a snapshot holds every
/// Secret of the cluster.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` (and missing parents) with mode 0700, or takes group and other access
/// away from an existing one, as etcd and k3s keep their snapshot directories.
pub fn ensure_private(dir: &Path) -> Result<()> {
    k3rs_apimachinery::fs::create_dir(dir).map_err(io_error(dir))?;
    let mode = std::fs::metadata(dir)
        .map_err(io_error(dir))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        let private = std::fs::Permissions::from_mode(mode & DIR_MODE);
        std::fs::set_permissions(dir, private).map_err(io_error(dir))?;
    }
    Ok(())
}

/// Deletes the snapshots of `<base>-<node_name>-` in `dir` beyond the newest `keep`.
pub fn prune(dir: &Path, base: &str, node_name: &str, keep: usize) -> Result<Vec<String>> {
    let names = list_names(dir)?;
    let doomed = retention::to_prune(&names, base, node_name, keep);
    for name in &doomed {
        file::delete(&dir.join(name))?;
    }
    Ok(doomed)
}

/// The snapshot files in `dir` (not the sidecars, nor files being written).
pub fn list_names(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && !name.starts_with('.') && !name.ends_with(file::PART_SUFFIX) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_skips_sidecars_and_partial_files() {
        let tmp = tempfile::tempdir().unwrap();
        for n in ["b-n-2", "a-n-1", "c.part", ".hidden"] {
            std::fs::write(tmp.path().join(n), b"x").unwrap();
        }
        std::fs::create_dir(tmp.path().join(".metadata")).unwrap();
        std::fs::create_dir(tmp.path().join("subdir")).unwrap();
        assert_eq!(list_names(tmp.path()).unwrap(), ["a-n-1", "b-n-2"]);
        assert!(list_names(&tmp.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn ensure_private_creates_0700_and_tightens_an_open_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let fresh = tmp.path().join("a/snapshots");
        ensure_private(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
    }
}
