//! Writing PKI material to disk: atomically (temp file + rename) and with the final mode set
//! when the file is created, so a private key is never readable by others, not even briefly.

use std::fs;
use std::path::Path;

use super::Error;

/// Mode of private keys and tokens.
pub const PRIVATE: u32 = 0o600;
/// Mode of certificates.
pub const PUBLIC: u32 = 0o644;

/// Writes `contents` to `path` atomically with `mode`, creating parent directories (0700).
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    k3rs_apimachinery::fs::write_atomic(path, contents, mode)
        .map_err(|(path, source)| Error::Io { path, source })
}

/// Creates `dir` and its parents with mode 0700 where missing.
pub fn create_dir(dir: &Path) -> Result<(), Error> {
    k3rs_apimachinery::fs::create_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Reads a file as UTF-8 text, `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_with_mode_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/key");
        write_atomic(&p, b"one", PRIVATE).unwrap();
        write_atomic(&p, b"two", PRIVATE).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!p.with_file_name("key.tmp").exists());
        assert_eq!(read_optional(&dir.path().join("missing")).unwrap(), None);
    }
}
