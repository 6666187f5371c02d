//! The file operations of a rotation ([`super::plan::Step`]), synchronous (run them on the
//! blocking pool).

use std::fs::{self, File};
use std::io;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::plan::{COMPRESSED, TEMPORARY};
use super::Error;

/// Removes `dir/name`; one already gone is fine.
pub fn remove(dir: &Path, name: &str) -> Result<(), Error> {
    let path = dir.join(name);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::Remove { path, source: e }),
        _ => Ok(()),
    }
}

/// gzips `dir/name` into `dir/name.gz` (written as `dir/name.tmp` and renamed, with the
/// original's permissions), then removes `dir/name`. On failure the temporary file is
/// removed and the original kept.
pub fn compress(dir: &Path, name: &str) -> Result<(), Error> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{TEMPORARY}"));
    let gz = dir.join(format!("{name}{COMPRESSED}"));
    let written = (|| {
        let mut src = File::open(&path)?;
        let out = File::create(&tmp)?;
        out.set_permissions(src.metadata()?.permissions())?;
        let mut enc = GzEncoder::new(out, Compression::default());
        io::copy(&mut src, &mut enc)?;
        enc.finish()?.sync_all()?;
        fs::rename(&tmp, &gz)
    })();
    if let Err(source) = written {
        let _ = fs::remove_file(&tmp);
        return Err(Error::Compress { path, source });
    }
    remove(dir, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_compressed_file_replaces_the_original() {
        let dir = tempfile::tempdir().unwrap();
        let text = "2026-11-29T04:30:05Z stdout F hello\n".repeat(1000);
        fs::write(dir.path().join("0.log.1"), &text).unwrap();
        compress(dir.path(), "0.log.1").unwrap();
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["0.log.1.gz"]);
        let gz = fs::read(dir.path().join("0.log.1.gz")).unwrap();
        assert!(gz.len() < text.len() / 10, "{} bytes", gz.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn a_failed_compression_keeps_the_original_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            compress(dir.path(), "missing"),
            Err(Error::Compress { .. })
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        remove(dir.path(), "missing").unwrap();
    }
}
