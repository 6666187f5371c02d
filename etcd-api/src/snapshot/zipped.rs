//! Compressed snapshots as k3s writes them (`--etcd-snapshot-compress`): a zip archive holding
//! the one snapshot file, deflated. A restore extracts it first; the extracted file is then
//! checked like any other snapshot.
//!
//! Only what such archives use is read: one file entry (directory entries are skipped),
//! stored or deflated, sizes from the central directory (writers that stream, as Go's does,
//! leave them out of the local header), and its CRC-32 checked. ZIP64 archives (members over
//! 4 GiB) and encrypted ones are refused with the reason.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The local file header's signature, which starts every zip archive.
const LOCAL_HEADER: [u8; 4] = *b"PK\x03\x04";
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_OF_CENTRAL_DIRECTORY: u32 = 0x0605_4b50;
/// The end record's fixed part; a comment of up to 64 KiB may follow it.
const EOCD_LEN: u64 = 22;

/// Why an archive could not be extracted.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    /// Reading the archive or writing the extracted file failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The archive is not one this reader takes.
    #[error("{0}")]
    Unsupported(String),
    /// The archive is damaged or truncated.
    #[error("{0}")]
    Corrupt(String),
}

/// Whether a file starting with `head` is a zip archive.
pub fn is_zip(head: &[u8]) -> bool {
    head.starts_with(&LOCAL_HEADER)
}

/// The one file entry of an archive, from its central directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    method: u16,
    flags: u16,
    crc32: u32,
    compressed: u64,
    uncompressed: u64,
    local_header: u64,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Finds the end record in the archive's `tail` (its last bytes) and returns where the
/// central directory starts and how long it is.
fn central_directory(tail: &[u8]) -> Result<(u64, u64), ZipError> {
    let eocd = (0..tail.len().saturating_sub(EOCD_LEN as usize - 1))
        .rev()
        .find(|&i| u32_at(tail, i) == END_OF_CENTRAL_DIRECTORY)
        .ok_or_else(|| ZipError::Corrupt("no end of central directory record".into()))?;
    let (size, offset) = (u32_at(tail, eocd + 12), u32_at(tail, eocd + 16));
    if size == u32::MAX || offset == u32::MAX {
        return Err(ZipError::Unsupported(
            "ZIP64 archives are not supported: unzip it and restore the file".into(),
        ));
    }
    Ok((u64::from(offset), u64::from(size)))
}

/// The file entries of a central directory.
fn entries(dir: &[u8]) -> Result<Vec<Entry>, ZipError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 46 <= dir.len() {
        if u32_at(dir, at) != CENTRAL_HEADER {
            return Err(ZipError::Corrupt("damaged central directory".into()));
        }
        let name_len = usize::from(u16_at(dir, at + 28));
        let extra_len = usize::from(u16_at(dir, at + 30));
        let comment_len = usize::from(u16_at(dir, at + 32));
        let name = dir
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(|| ZipError::Corrupt("truncated central directory".into()))?;
        let (compressed, uncompressed) = (u32_at(dir, at + 20), u32_at(dir, at + 24));
        let local_header = u32_at(dir, at + 42);
        if [compressed, uncompressed, local_header].contains(&u32::MAX) {
            return Err(ZipError::Unsupported(
                "ZIP64 archives are not supported: unzip it and restore the file".into(),
            ));
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if !name.ends_with('/') {
            out.push(Entry {
                name,
                method: u16_at(dir, at + 10),
                flags: u16_at(dir, at + 8),
                crc32: u32_at(dir, at + 16),
                compressed: u64::from(compressed),
                uncompressed: u64::from(uncompressed),
                local_header: u64::from(local_header),
            });
        }
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// Extracts the single file of the zip archive `zip` into `dest` (created or truncated).
/// Returns the name the file has in the archive.
pub fn extract_single(zip: &Path, dest: &Path) -> Result<String, ZipError> {
    let mut f = File::open(zip)?;
    let len = f.metadata()?.len();
    let tail_len = len.min(EOCD_LEN + u64::from(u16::MAX));
    f.seek(SeekFrom::Start(len - tail_len))?;
    let mut tail = Vec::new();
    (&mut f).take(tail_len).read_to_end(&mut tail)?;
    let (offset, size) = central_directory(&tail)?;
    if offset.saturating_add(size) > len {
        return Err(ZipError::Corrupt(
            "the central directory lies past the end of the file (truncated?)".into(),
        ));
    }
    f.seek(SeekFrom::Start(offset))?;
    let mut dir = Vec::new();
    (&mut f).take(size).read_to_end(&mut dir)?;
    let entry = match entries(&dir)?.as_slice() {
        [one] => one.clone(),
        [] => return Err(ZipError::Corrupt("the archive holds no file".into())),
        many => {
            return Err(ZipError::Unsupported(format!(
                "the archive holds {} files; a compressed snapshot holds one",
                many.len()
            )))
        }
    };
    if entry.flags & 1 != 0 {
        return Err(ZipError::Unsupported(format!(
            "{} is encrypted",
            entry.name
        )));
    }
    let mut local = [0u8; 30];
    f.seek(SeekFrom::Start(entry.local_header))?;
    f.read_exact(&mut local)?;
    if local[..4] != LOCAL_HEADER {
        return Err(ZipError::Corrupt("damaged local file header".into()));
    }
    let skip = u64::from(u16_at(&local, 26)) + u64::from(u16_at(&local, 28));
    f.seek(SeekFrom::Current(skip as i64))?;
    let data = io::BufReader::new(f).take(entry.compressed);
    let mut out = io::BufWriter::new(File::create(dest)?);
    let mut reader: Box<dyn Read> = match entry.method {
        0 => Box::new(data),
        8 => Box::new(flate2::read::DeflateDecoder::new(data)),
        m => {
            return Err(ZipError::Unsupported(format!(
                "{}: compression method {m} (only stored and deflated are read)",
                entry.name
            )))
        }
    };
    let mut crc = flate2::Crc::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| ZipError::Corrupt(format!("{}: {e}", entry.name)))?;
        if n == 0 {
            break;
        }
        written += n as u64;
        if written > entry.uncompressed {
            return Err(ZipError::Corrupt(format!(
                "{} is larger than its recorded {} bytes",
                entry.name, entry.uncompressed
            )));
        }
        crc.update(&buf[..n]);
        out.write_all(&buf[..n])?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    if written != entry.uncompressed || crc.sum() != entry.crc32 {
        return Err(ZipError::Corrupt(format!(
            "{}: {written} bytes with CRC-32 {:08x}, the archive records {} bytes with {:08x}",
            entry.name,
            crc.sum(),
            entry.uncompressed,
            entry.crc32
        )));
    }
    Ok(entry.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip archive of `files` written the way Go's `archive/zip` streams them: sizes and CRC
    /// only in the central directory (flag bit 3, a data descriptor after each member).
    fn zip(files: &[(&str, &[u8], u16)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, content, method) in files {
            let data = match method {
                8 => {
                    let mut e = flate2::write::DeflateEncoder::new(
                        Vec::new(),
                        flate2::Compression::default(),
                    );
                    e.write_all(content).unwrap();
                    e.finish().unwrap()
                }
                _ => content.to_vec(),
            };
            let mut crc = flate2::Crc::new();
            crc.update(content);
            let offset = out.len() as u32;
            out.extend(LOCAL_HEADER);
            out.extend(20u16.to_le_bytes());
            out.extend(8u16.to_le_bytes()); // sizes follow in a data descriptor
            out.extend(method.to_le_bytes());
            out.extend([0; 16]); // time, date, crc, sizes
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(&data);
            out.extend(0x0807_4b50u32.to_le_bytes());
            out.extend(crc.sum().to_le_bytes());
            out.extend((data.len() as u32).to_le_bytes());
            out.extend((content.len() as u32).to_le_bytes());
            central.extend(CENTRAL_HEADER.to_le_bytes());
            central.extend([20, 0, 20, 0]);
            central.extend(8u16.to_le_bytes());
            central.extend(method.to_le_bytes());
            central.extend([0; 4]);
            central.extend(crc.sum().to_le_bytes());
            central.extend((data.len() as u32).to_le_bytes());
            central.extend((content.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0; 12]);
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let dir_at = out.len() as u32;
        out.extend(&central);
        out.extend(END_OF_CENTRAL_DIRECTORY.to_le_bytes());
        out.extend([0; 4]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(dir_at.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out
    }

    fn extract(archive: &[u8]) -> (Result<String, ZipError>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.zip"), archive).unwrap();
        let got = extract_single(&dir.path().join("a.zip"), &dir.path().join("out"));
        let out = std::fs::read(dir.path().join("out")).unwrap_or_default();
        (got, out)
    }

    #[test]
    fn extracts_stored_and_deflated_members() {
        let content: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for method in [0, 8] {
            let archive = zip(&[("snap-1", &content, method)]);
            assert!(is_zip(&archive));
            let (got, out) = extract(&archive);
            assert_eq!(got.unwrap(), "snap-1", "method {method}");
            assert_eq!(out, content, "method {method}");
        }
        // Directory entries beside the file do not count.
        let (got, out) = extract(&zip(&[("dir/", b"", 0), ("dir/snap", b"data", 8)]));
        assert_eq!(got.unwrap(), "dir/snap");
        assert_eq!(out, b"data");
    }

    #[test]
    fn refuses_damage_and_what_it_does_not_read() {
        let content = b"etcd snapshot bytes".repeat(100);
        let good = zip(&[("s", &content, 8)]);

        let mut flipped = good.clone();
        flipped[40] ^= 0xff; // inside the deflated data
        assert!(extract(&flipped).0.is_err());

        let truncated = &good[..good.len() - 30];
        assert!(matches!(extract(truncated).0, Err(ZipError::Corrupt(_))));

        let two = zip(&[("a", b"1", 0), ("b", b"2", 0)]);
        let err = extract(&two).0.unwrap_err().to_string();
        assert!(err.contains("holds 2 files"), "{err}");

        assert!(matches!(
            extract(&zip(&[("s", b"x", 12)])).0,
            Err(ZipError::Unsupported(m)) if m.contains("method 12")
        ));
        assert!(!is_zip(b"\0\0\0\0bbolt"));
    }
}
