//! Small files replaced atomically and durably: write a temp file, fsync it, rename it over the
//! old one, fsync the directory. Used for the vote and the purge marker.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Replaces `dir/name` with `bytes`. When this returns Ok, a crash leaves either the old or the
/// new content, never a mix, and the new content survives power loss.
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// Reads `dir/name`, or None if it does not exist.
pub fn read(dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    match fs::read(dir.join(name)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes creations, renames and deletions of entries in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_and_read() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), "vote").unwrap(), None);
        replace(dir.path(), "vote", b"a").unwrap();
        replace(dir.path(), "vote", b"bb").unwrap();
        assert_eq!(read(dir.path(), "vote").unwrap(), Some(b"bb".to_vec()));
        assert!(!dir.path().join("vote.tmp").exists());
    }
}
