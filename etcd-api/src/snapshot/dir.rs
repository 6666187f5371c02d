//! The snapshot directory: which files are snapshots, and pruning to a retention.

use std::path::Path;

use super::{file, io_error, retention, Result};

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
}
