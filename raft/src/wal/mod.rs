//! The write-ahead log that holds the Raft log and vote under `<data_dir>/wal/`.
//!
//! # Layout
//! - `<first index>.wal` segments of framed records ([`record`]), each an rmp-serde encoded
//!   [`Entry`]; a new segment starts when the active one would grow past `segment_size`.
//! - `vote`: the last saved vote; `purged`: the last purged log id. Both are replaced atomically
//!   and durably ([`durable_file`]).
//!
//! # Guarantees
//! - [`Wal::append`] writes the records before returning (so they are readable at once) and runs
//!   its callback only after an `fdatasync` covering them (group commit, see [`writer`]).
//! - [`Wal::save_vote`] and [`Wal::purge`] are durable when they return.
//! - [`Wal::open`] recovers the longest prefix of whole records: a *torn* record (the file ends
//!   inside it, or one of its sectors was never written, see [`record`]) at the tail of the
//!   *last* segment is cut away: it was never synced, so never acknowledged. A *corrupt* record
//!   (whole but failing its CRC) anywhere, a torn record in a sealed segment, a gap between
//!   indexes, or an undecodable entry is an error: recovery never silently drops acknowledged
//!   entries. Segments are synced before the next one is created, so only the last can be torn.
//!
//! # Assumptions
//! Sectors that did not reach the disk read back as zeros (ext4 `data=ordered`, xfs, btrfs),
//! as etcd's WAL assumes too.

mod durable_file;
mod fsync_stats;
mod record;
mod segment;
mod writer;

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub use fsync_stats::{FsyncHistogram, FsyncSnapshot};
use segment::{Segment, Tail};
pub use writer::Callback;
use writer::SyncWriter;

use crate::types::{Entry, LogId, Vote};

const VOTE_FILE: &str = "vote";
const PURGED_FILE: &str = "purged";

/// Default size at which a new segment is started. Purging deletes whole segments only, so
/// this is about the least the WAL occupies after a snapshot; small enough not to dominate
/// a small store's disk use, large enough that rotation (one extra fsync) is rare.
pub const DEFAULT_SEGMENT_SIZE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("opening the WAL in {dir}: {source}")]
    Open {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("WAL corrupt: {0}")]
    Corrupt(String),
    #[error("appending to the WAL: {0}")]
    Append(#[source] io::Error),
    #[error("appending to the WAL: expected index {expected}, got {got}")]
    Hole { expected: u64, got: u64 },
    #[error("reading the WAL: {0}")]
    Read(#[source] io::Error),
    #[error("truncating the WAL: {0}")]
    Truncate(#[source] io::Error),
    #[error("purging the WAL: {0}")]
    Purge(#[source] io::Error),
    #[error("saving the vote: {0}")]
    SaveVote(#[source] io::Error),
}

/// Where one entry's record is.
#[derive(Debug, Clone, Copy)]
struct Loc {
    log_id: LogId,
    /// `first` of the segment that holds it.
    segment: u64,
    offset: u64,
    len: u32,
}

struct Inner {
    /// Sorted by `first`; the last one is the active segment.
    segments: Vec<Segment>,
    /// Locations of the entries `base..base + locs.len()`.
    locs: VecDeque<Loc>,
    base: u64,
    purged: Option<LogId>,
    vote: Option<Vote>,
}

impl Inner {
    fn last_log_id(&self) -> Option<LogId> {
        self.locs.back().map(|l| l.log_id).or(self.purged)
    }

    fn next_index(&self) -> u64 {
        self.last_log_id().map_or(0, |l| l.index + 1)
    }

    fn segment(&self, first: u64) -> Option<&Segment> {
        let i = self
            .segments
            .binary_search_by_key(&first, |s| s.first)
            .ok()?;
        Some(&self.segments[i])
    }
}

/// The write-ahead log. All methods take `&self`; writes are serialized by an internal lock.
pub struct Wal {
    dir: PathBuf,
    segment_size: u64,
    inner: Mutex<Inner>,
    syncer: SyncWriter,
    /// Durations of the sync thread's `fdatasync` calls.
    fsync_stats: Arc<FsyncHistogram>,
}

fn encode_vote(v: &Vote) -> Vec<u8> {
    rmp_serde::to_vec(v).expect("votes always serialize")
}

fn corrupt(what: impl std::fmt::Display) -> WalError {
    WalError::Corrupt(what.to_string())
}

impl Wal {
    /// Opens (or creates) the WAL in `dir`, recovering as described in the module docs.
    pub fn open(dir: &Path, segment_size: u64) -> Result<Wal, WalError> {
        let open_err = |source| WalError::Open {
            dir: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(open_err)?;
        let vote = match durable_file::read(dir, VOTE_FILE).map_err(open_err)? {
            Some(b) => Some(rmp_serde::from_slice(&b).map_err(|e| corrupt(format!("vote: {e}")))?),
            None => None,
        };
        let purged: Option<LogId> = match durable_file::read(dir, PURGED_FILE).map_err(open_err)? {
            Some(b) => rmp_serde::from_slice(&b).map_err(|e| corrupt(format!("purged: {e}")))?,
            None => None,
        };

        let files = segment::list(dir).map_err(open_err)?;
        let mut segments = Vec::with_capacity(files.len());
        let mut locs = VecDeque::new();
        let mut next = purged.map_or(0, |p| p.index + 1);
        let n_files = files.len();
        for (i, (first, path)) in files.into_iter().enumerate() {
            let is_last = i + 1 == n_files;
            let scan = segment::scan(&path).map_err(open_err)?;
            match scan.tail {
                Tail::Clean => {}
                Tail::Torn(reason) if is_last => tracing::warn!(
                    segment = %path.display(),
                    offset = scan.valid_len,
                    dropped_bytes = scan.file_len - scan.valid_len,
                    reason,
                    "cutting the torn tail of the WAL (never acknowledged)"
                ),
                Tail::Torn(reason) | Tail::Corrupt(reason) => {
                    return Err(corrupt(format!(
                        "{}: bad record at offset {} ({reason}){}",
                        path.display(),
                        scan.valid_len,
                        if is_last { "" } else { " in a sealed segment" },
                    )));
                }
            }
            let mut seg = Segment::open(path, first, scan.valid_len).map_err(open_err)?;
            if scan.valid_len != scan.file_len {
                seg.truncate(scan.valid_len).map_err(open_err)?;
            }
            for (k, rec) in scan.records.iter().enumerate() {
                let entry: Entry = rmp_serde::from_slice(&rec.payload).map_err(|e| {
                    corrupt(format!(
                        "{}: entry at {}: {e}",
                        seg.path.display(),
                        rec.offset
                    ))
                })?;
                let index = entry.log_id.index;
                if k == 0 && index != first {
                    return Err(corrupt(format!(
                        "{}: first entry has index {index}",
                        seg.path.display()
                    )));
                }
                if purged.is_some_and(|p| index <= p.index) {
                    continue;
                }
                if index != next {
                    return Err(corrupt(format!(
                        "{}: expected index {next}, found {index}",
                        seg.path.display()
                    )));
                }
                locs.push_back(Loc {
                    log_id: entry.log_id,
                    segment: first,
                    offset: rec.offset,
                    len: rec.len,
                });
                next += 1;
            }
            if is_last && seg.len == 0 && seg.first != next {
                // An empty active segment whose name does not match the next index (left by an
                // interrupted rotation or purge): drop it, appends will create the right one.
                fs::remove_file(&seg.path).map_err(open_err)?;
                continue;
            }
            segments.push(seg);
        }
        let base = locs.front().map_or(next, |l| l.log_id.index);
        let fsync_stats = Arc::new(FsyncHistogram::default());
        let syncer = SyncWriter::spawn(fsync_stats.clone()).map_err(open_err)?;
        let inner = Inner {
            segments,
            locs,
            base,
            purged,
            vote,
        };
        tracing::info!(
            dir = %dir.display(),
            purged = ?inner.purged,
            last = ?inner.last_log_id(),
            segments = inner.segments.len(),
            "opened WAL"
        );
        Ok(Wal {
            dir: dir.to_path_buf(),
            segment_size,
            inner: Mutex::new(inner),
            syncer,
            fsync_stats,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The histogram the sync thread times its `fdatasync` calls into.
    pub fn fsync_stats(&self) -> Arc<FsyncHistogram> {
        self.fsync_stats.clone()
    }

    /// Bytes of whole records in all segments: the WAL's disk use.
    pub fn disk_bytes(&self) -> u64 {
        self.lock().segments.iter().map(|s| s.len).sum()
    }

    /// (last purged log id, last log id) — the last log id is the purged one when empty.
    pub fn log_state(&self) -> (Option<LogId>, Option<LogId>) {
        let inner = self.lock();
        (inner.purged, inner.last_log_id())
    }

    pub fn read_vote(&self) -> Option<Vote> {
        self.lock().vote
    }

    /// Saves the vote durably before returning.
    pub fn save_vote(&self, vote: &Vote) -> Result<(), WalError> {
        let mut inner = self.lock();
        durable_file::replace(&self.dir, VOTE_FILE, &encode_vote(vote))
            .map_err(WalError::SaveVote)?;
        inner.vote = Some(*vote);
        Ok(())
    }

    /// Writes `entries` (which must continue the log without a hole) and runs `done` once they
    /// are durable. The entries are readable when this returns.
    pub fn append(
        &self,
        entries: impl IntoIterator<Item = Entry>,
        done: Callback,
    ) -> Result<(), WalError> {
        let mut inner = self.lock();
        let mut buf = Vec::new();
        for entry in entries {
            let expected = inner.next_index();
            if entry.log_id.index != expected {
                return Err(WalError::Hole {
                    expected,
                    got: entry.log_id.index,
                });
            }
            let payload = rmp_serde::to_vec(&entry).expect("entries always serialize");
            let rec_len = (record::HEADER_LEN + payload.len()) as u64;
            let need_new = match inner.segments.last() {
                None => true,
                Some(s) => {
                    let pending = buf.len() as u64;
                    s.len + pending > 0 && s.len + pending + rec_len > self.segment_size
                }
            };
            if need_new {
                self.rotate(&mut inner, &mut buf, entry.log_id.index)?;
            }
            let active = inner.segments.last().expect("an active segment");
            let loc = Loc {
                log_id: entry.log_id,
                segment: active.first,
                offset: active.len + buf.len() as u64,
                len: rec_len as u32,
            };
            record::encode_into(&mut buf, &payload);
            inner.locs.push_back(loc);
        }
        let inner_ref = &mut *inner;
        let Some(active) = inner_ref.segments.last_mut() else {
            drop(inner);
            done(Ok(()));
            return Ok(());
        };
        if let Err(e) = active.append(&buf) {
            // Forget the entries that did not make it; openraft treats this as fatal anyway.
            let (seg, len) = (active.first, active.len);
            inner_ref
                .locs
                .retain(|l| !(l.segment == seg && l.offset >= len));
            return Err(WalError::Append(e));
        }
        let file = active.file.clone();
        drop(inner);
        self.syncer.sync(file, done);
        Ok(())
    }

    /// Seals the active segment (writes `buf` into it and syncs it) and starts a new one whose
    /// first entry will be `first`.
    fn rotate(&self, inner: &mut Inner, buf: &mut Vec<u8>, first: u64) -> Result<(), WalError> {
        if let Some(active) = inner.segments.last_mut() {
            active.append(buf).map_err(WalError::Append)?;
            buf.clear();
            active.file.sync_data().map_err(WalError::Append)?;
        }
        let seg = Segment::create(&self.dir, first).map_err(WalError::Append)?;
        durable_file::sync_dir(&self.dir).map_err(WalError::Append)?;
        inner.segments.push(seg);
        Ok(())
    }

    /// The entries with indexes in `range` that are present (purged ones are skipped).
    pub fn entries(&self, range: Range<u64>) -> Result<Vec<Entry>, WalError> {
        let reads: Vec<(Segment, Loc)> = {
            let inner = self.lock();
            let start = range.start.max(inner.base);
            let end = range.end.min(inner.base + inner.locs.len() as u64);
            (start..end)
                .map(|i| {
                    let loc = inner.locs[(i - inner.base) as usize];
                    let seg = inner
                        .segment(loc.segment)
                        .expect("segment of a live entry")
                        .clone();
                    (seg, loc)
                })
                .collect()
        };
        reads
            .into_iter()
            .map(|(seg, loc)| {
                let payload = seg
                    .read_record(loc.offset, loc.len)
                    .map_err(WalError::Read)?;
                rmp_serde::from_slice(&payload)
                    .map_err(|e| corrupt(format!("entry {}: {e}", loc.log_id.index)))
            })
            .collect()
    }

    /// Deletes the entries from `index` on (conflicting entries a new leader overwrites).
    pub fn truncate(&self, index: u64) -> Result<(), WalError> {
        let mut inner = self.lock();
        if index < inner.base {
            return Err(WalError::Truncate(io::Error::other(format!(
                "index {index} is already purged (first present {})",
                inner.base
            ))));
        }
        let keep = (index - inner.base) as usize;
        let Some(cut) = inner.locs.get(keep).copied() else {
            return Ok(());
        };
        let mut removed = false;
        while inner.segments.last().is_some_and(|s| s.first > cut.segment) {
            let s = inner.segments.pop().expect("checked");
            fs::remove_file(&s.path).map_err(WalError::Truncate)?;
            removed = true;
        }
        let seg = inner.segments.last_mut().expect("segment of a live entry");
        seg.truncate(cut.offset).map_err(WalError::Truncate)?;
        if removed {
            durable_file::sync_dir(&self.dir).map_err(WalError::Truncate)?;
        }
        inner.locs.truncate(keep);
        Ok(())
    }

    /// Drops the entries up to and including `upto`. The purge marker is durable first; then
    /// every segment all of whose entries are purged is deleted.
    pub fn purge(&self, upto: LogId) -> Result<(), WalError> {
        let mut inner = self.lock();
        if inner.purged.is_some_and(|p| p.index >= upto.index) {
            return Ok(());
        }
        let marker = rmp_serde::to_vec(&Some(upto)).expect("log ids always serialize");
        durable_file::replace(&self.dir, PURGED_FILE, &marker).map_err(WalError::Purge)?;
        let last = inner.last_log_id();
        inner.purged = Some(upto);
        let n = (upto.index + 1)
            .saturating_sub(inner.base)
            .min(inner.locs.len() as u64);
        inner.locs.drain(..n as usize);
        if inner.locs.is_empty() {
            inner.base = upto.index + 1;
        } else {
            inner.base += n;
        }
        // A segment's last index is the next segment's first - 1, or the log's last index.
        let last_index = last.map_or(0, |l| l.index).max(upto.index);
        let mut delete = 0;
        for i in 0..inner.segments.len() {
            let seg_last = inner
                .segments
                .get(i + 1)
                .map_or(last_index, |n| n.first.saturating_sub(1));
            if seg_last > upto.index {
                break;
            }
            delete = i + 1;
        }
        for s in inner.segments.drain(..delete) {
            fs::remove_file(&s.path).map_err(WalError::Purge)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod old_release_tests;
