//! Upstream's atomic writer: a volume's files live in a hidden, timestamped directory; the
//! `..data` symlink points at the current one and each top-level name is a symlink through
//! `..data`. An update writes a new directory, then swaps `..data` with one rename, so a
//! reader sees either all old files or all new ones.
//!
//! ```text
//! <dir>/..2026_11_22_01_02_03.000000001/{token,ca.crt}
//! <dir>/..data -> ..2026_11_22_01_02_03.000000001
//! <dir>/token  -> ..data/token
//! ```

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Component, Path};

use super::files::File;

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// Whether `path` is a safe relative path inside the volume (no `..`, not absolute, no
/// component starting with `..`).
pub fn valid_path(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components().all(|c| match c {
            Component::Normal(s) => !s.to_string_lossy().starts_with(".."),
            _ => false,
        })
}

/// What `..data` holds now, if it matches `files` exactly.
fn unchanged(dir: &Path, files: &[File]) -> bool {
    let data = dir.join(DATA);
    if !data.exists() {
        return false;
    }
    let mut present = BTreeSet::new();
    collect(&data, &data, &mut present);
    let wanted: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
    present == wanted
        && files.iter().all(|f| {
            let p = data.join(&f.path);
            std::fs::read(&p).is_ok_and(|c| c == f.content)
                && std::fs::metadata(&p).is_ok_and(|m| m.permissions().mode() & 0o777 == f.mode)
        })
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

/// Makes `dir` hold exactly `files`; `Ok(false)` when it already did.
pub fn write(dir: &Path, files: &[File], stamp: &str) -> io::Result<bool> {
    if let Some(bad) = files.iter().find(|f| !valid_path(&f.path)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid path {:?}", bad.path),
        ));
    }
    std::fs::create_dir_all(dir)?;
    if unchanged(dir, files) {
        return Ok(false);
    }
    let old = std::fs::read_link(dir.join(DATA)).ok();
    let fresh = format!("..{stamp}");
    let target = dir.join(&fresh);
    std::fs::create_dir_all(&target)?;
    for f in files {
        let p = target.join(&f.path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, &f.content)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(f.mode))?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    symlink(&fresh, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    // The user-visible names: one symlink per top-level component.
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| Path::new(&f.path).components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for top in &tops {
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(Path::new(DATA).join(top), &link)?;
        }
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Some(old) = old.filter(|o| *o != Path::new(&fresh)) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str, mode: u32) -> File {
        File {
            path: path.into(),
            content: content.as_bytes().to_vec(),
            mode,
        }
    }

    #[test]
    fn paths_stay_inside_the_volume() {
        assert!(valid_path("token"));
        assert!(valid_path("a/b.txt"));
        assert!(!valid_path(""));
        assert!(!valid_path("/etc/passwd"));
        assert!(!valid_path("../x"));
        assert!(!valid_path("a/../../x"));
        assert!(!valid_path("..data"));
    }

    #[test]
    fn writes_swaps_and_prunes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let v1 = [file("token", "t1", 0o644), file("sub/ca.crt", "ca", 0o600)];
        assert!(write(&dir, &v1, "1").unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("token")).unwrap(), "t1");
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/ca.crt")).unwrap(),
            "ca"
        );
        assert_eq!(
            std::fs::read_link(dir.join("token")).unwrap(),
            Path::new("..data/token")
        );
        assert_eq!(
            std::fs::read_link(dir.join("..data")).unwrap(),
            Path::new("..1")
        );
        let mode = std::fs::metadata(dir.join("sub/ca.crt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The same content: nothing written.
        assert!(!write(&dir, &v1, "2").unwrap());
        assert!(!dir.join("..2").exists());
        // New content: a new directory, the old one and the dropped name gone.
        let v2 = [file("token", "t2", 0o644)];
        assert!(write(&dir, &v2, "3").unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("token")).unwrap(), "t2");
        assert!(!dir.join("..1").exists());
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        let err = write(&dir, &[file("../x", "", 0o644)], "4").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
