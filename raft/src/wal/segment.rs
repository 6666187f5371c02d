//! Segment files: `<first index, 20 digits>.wal`, each a sequence of framed records holding
//! consecutive log entries starting at the index in its name.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::record::{self, Frame};

const SUFFIX: &str = ".wal";

/// An open segment. The file is shared with readers and the sync thread; all I/O is positional.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Index of the first entry this segment holds (or will hold).
    pub first: u64,
    pub path: PathBuf,
    pub file: Arc<File>,
    /// Bytes of whole records; appends go here.
    pub len: u64,
}

/// A whole record found by [`scan`]: where it is and its payload.
#[derive(Debug)]
pub struct ScannedRecord {
    pub offset: u64,
    pub len: u32,
    pub payload: Vec<u8>,
}

/// The result of reading a segment from its start.
#[derive(Debug)]
pub struct Scan {
    pub records: Vec<ScannedRecord>,
    /// Offset just past the last whole record.
    pub valid_len: u64,
    /// What follows the last whole record.
    pub tail: Tail,
    pub file_len: u64,
}

/// What follows the last whole record of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Nothing: the file ends there.
    Clean,
    /// A record cut short by a crash (see [`record`]): it was never synced, so never
    /// acknowledged; recovery cuts it if it is in the last segment.
    Torn(&'static str),
    /// A record that was written whole but is damaged.
    Corrupt(&'static str),
}

pub fn file_name(first: u64) -> String {
    format!("{first:020}{SUFFIX}")
}

/// The first index encoded in a segment's file name, or None if it is not a segment.
pub fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 {
        return None;
    }
    digits.parse().ok()
}

/// Segment files in `dir`, sorted by first index.
pub fn list(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        if let Some(first) = e.file_name().to_str().and_then(parse_name) {
            out.push((first, e.path()));
        }
    }
    out.sort_by_key(|(first, _)| *first);
    Ok(out)
}

impl Segment {
    /// Creates an empty segment (not durable until the directory is synced: the sync thread
    /// does that before acknowledging anything written to it).
    pub fn create(dir: &Path, first: u64) -> io::Result<Segment> {
        let path = dir.join(file_name(first));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Segment {
            first,
            path,
            file: Arc::new(file),
            len: 0,
        })
    }

    /// Opens an existing segment for reading and appending at `len`.
    pub fn open(path: PathBuf, first: u64, len: u64) -> io::Result<Segment> {
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        Ok(Segment {
            first,
            path,
            file: Arc::new(file),
            len,
        })
    }

    /// Writes whole records at the end of the segment (page cache only; see the sync thread).
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.len)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Cuts the segment to `len` bytes, durably.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_all()?;
        self.len = len;
        Ok(())
    }

    /// Reads back the record at `offset` and checks its CRC.
    pub fn read_record(&self, offset: u64, len: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, offset)?;
        record::verify(&buf).map(<[u8]>::to_vec).map_err(|reason| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: record at {offset}: {reason}", self.path.display()),
            )
        })
    }
}

/// Reads every whole record of the segment at `path`, stopping at the first one that is not.
pub fn scan(path: &Path) -> io::Result<Scan> {
    let buf = fs::read(path)?;
    let mut records = Vec::new();
    let mut off = 0usize;
    let tail = loop {
        match record::decode(&buf[off..], off as u64) {
            Frame::End => break Tail::Clean,
            Frame::Torn { reason } => break Tail::Torn(reason),
            Frame::Corrupt { reason } => break Tail::Corrupt(reason),
            Frame::Complete { payload, len } => {
                records.push(ScannedRecord {
                    offset: off as u64,
                    len: len as u32,
                    payload: payload.to_vec(),
                });
                off += len;
            }
        }
    };
    Ok(Scan {
        records,
        valid_len: off as u64,
        tail,
        file_len: buf.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(42), "00000000000000000042.wal");
        assert_eq!(parse_name(&file_name(42)), Some(42));
        assert_eq!(parse_name("42.wal"), None);
        assert_eq!(parse_name("00000000000000000042.tmp"), None);
    }

    #[test]
    fn append_scan_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::create(dir.path(), 1).unwrap();
        let mut buf = Vec::new();
        record::encode_into(&mut buf, b"a");
        record::encode_into(&mut buf, b"bc");
        seg.append(&buf).unwrap();
        let scan = scan(&seg.path).unwrap();
        assert_eq!(scan.records.len(), 2);
        assert_eq!(scan.tail, Tail::Clean);
        let r = &scan.records[1];
        assert_eq!(seg.read_record(r.offset, r.len).unwrap(), b"bc");
        assert_eq!(list(dir.path()).unwrap(), vec![(1, seg.path.clone())]);
    }
}
