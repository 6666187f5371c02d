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
//!   its callback only after an `fdatasync` covering them (group commit, see [`writer`]). No
//!   sync runs inside `append`: when it starts a new segment, the sync thread syncs the sealed
//!   segment, the new one and the directory before acknowledging, and it acknowledges in order.
//!   So an acknowledged entry is durable together with every entry before it, in every segment.
//! - [`Wal::save_vote`] is durable when it returns. [`Wal::purge`] takes effect in memory at
//!   once; its marker and file deletions follow in order on the purge thread ([`purger`]). A
//!   purge past the log's end (a snapshot ahead of the log) waits for its marker, since the
//!   appends after it would otherwise leave a gap on disk. A purge hands over only files whose
//!   paths the log never creates again ([`purge_plan`]), so a deletion that runs late or fails
//!   never meets a new segment.
//! - [`Wal::open`] recovers the longest prefix of whole records: at the first *torn* record
//!   (the file ends inside it, or one of its sectors was never written, see [`record`]), in any
//!   segment, the log is cut and the later segments are deleted: that record was never synced,
//!   and nothing after it can have been acknowledged (see above). A *corrupt* record (whole but
//!   failing its CRC), a gap between indexes, or an undecodable entry is an error: recovery
//!   never silently drops acknowledged entries. Segments wholly at or below the purge marker
//!   (left by an interrupted purge) are deleted unread.
//!
//! # Assumptions
//! Sectors that did not reach the disk read back as zeros (ext4 `data=ordered`, xfs, btrfs),
//! as etcd's WAL assumes too.

mod durable_file;
mod fsync_stats;
mod purge_plan;
mod purger;
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
use purger::{PurgeJob, Purger, PURGED_FILE};
use segment::{Segment, Tail};
pub use writer::Callback;
use writer::{SyncRequest, SyncWriter};

use crate::types::{Entry, LogId, Vote};

const VOTE_FILE: &str = "vote";

/// Default size at which a new segment is started. Purging deletes whole segments only, so
/// this is about the least the WAL occupies after a snapshot; small enough not to dominate
/// a small store's disk use. A rotation costs the append one file creation (its syncs run on
/// the sync thread).
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
    purger: Purger,
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

        let mut files = segment::list(dir).map_err(open_err)?;
        // Finish an interrupted purge: these hold only purged entries (and may be torn, if
        // the purge overtook their sync).
        if let Some(p) = purged {
            let firsts: Vec<u64> = files.iter().map(|(first, _)| *first).collect();
            for (_, path) in files.drain(..purge_plan::purgeable(&firsts, None, p.index)) {
                fs::remove_file(&path).map_err(open_err)?;
            }
        }
        let mut segments = Vec::with_capacity(files.len());
        let mut locs = VecDeque::new();
        let mut next = purged.map_or(0, |p| p.index + 1);
        let mut files = files.into_iter();
        while let Some((first, path)) = files.next() {
            let scan = segment::scan(&path).map_err(open_err)?;
            let torn = match scan.tail {
                Tail::Clean => false,
                Tail::Torn(reason) => {
                    tracing::warn!(
                        segment = %path.display(),
                        offset = scan.valid_len,
                        dropped_bytes = scan.file_len - scan.valid_len,
                        later_segments = files.len(),
                        reason,
                        "cutting the WAL at a torn record (never acknowledged)"
                    );
                    true
                }
                Tail::Corrupt(reason) => {
                    return Err(corrupt(format!(
                        "{}: bad record at offset {} ({reason})",
                        path.display(),
                        scan.valid_len,
                    )));
                }
            };
            if torn {
                // Written after the torn record, so never acknowledged either. Deleted (durably)
                // before the cut below: a cut segment followed by later ones would be a gap.
                let later: Vec<_> = files.by_ref().collect();
                for (_, later) in &later {
                    fs::remove_file(later).map_err(open_err)?;
                }
                if !later.is_empty() {
                    durable_file::sync_dir(dir).map_err(open_err)?;
                }
            }
            let is_last = files.as_slice().is_empty();
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
        let syncer = SyncWriter::spawn(dir.to_path_buf(), fsync_stats.clone()).map_err(open_err)?;
        let purger = Purger::spawn(dir.to_path_buf()).map_err(open_err)?;
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
            purger,
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
        let mut written = Written::default();
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
                self.rotate(&mut inner, &mut buf, entry.log_id.index, &mut written)?;
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
        written.add(active);
        drop(inner);
        self.syncer.sync(SyncRequest {
            files: written.files,
            sync_dir: written.created,
            done,
        });
        Ok(())
    }

    /// Seals the active segment (writes `buf` into it) and starts a new one whose first entry
    /// will be `first`. Syncs nothing: the append's sync request covers both (see `Written`).
    fn rotate(
        &self,
        inner: &mut Inner,
        buf: &mut Vec<u8>,
        first: u64,
        written: &mut Written,
    ) -> Result<(), WalError> {
        if let Some(active) = inner.segments.last_mut() {
            active.append(buf).map_err(WalError::Append)?;
            buf.clear();
            written.add(active);
        }
        let seg = Segment::create(&self.dir, first).map_err(WalError::Append)?;
        written.created = true;
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

    /// Drops the entries up to and including `upto`, in memory at once. The purge thread then
    /// makes the marker durable and deletes every segment all of whose entries are purged and
    /// whose name is at or below `upto` ([`purge_plan`]), in that order; a purge past the log's
    /// last entry waits for its marker (see the module docs).
    pub fn purge(&self, upto: LogId) -> Result<(), WalError> {
        let (job, past_the_end) = {
            let mut inner = self.lock();
            if inner.purged.is_some_and(|p| p.index >= upto.index) {
                return Ok(());
            }
            let last = inner.last_log_id();
            let past_the_end = last.is_none_or(|l| l.index < upto.index);
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
            let last_index = last.map_or(0, |l| l.index).max(upto.index);
            let firsts: Vec<u64> = inner.segments.iter().map(|s| s.first).collect();
            let delete = purge_plan::purgeable(&firsts, Some(last_index), upto.index);
            let segments = inner.segments.drain(..delete).map(|s| s.path).collect();
            (PurgeJob { upto, segments }, past_the_end)
        };
        let done = self.purger.submit(job);
        if past_the_end {
            done.recv()
                .unwrap_or_else(|_| Err(io::Error::other("WAL purge thread stopped")))
                .map_err(WalError::Purge)?;
        }
        Ok(())
    }

    /// Waits until the purge thread has run every job submitted so far.
    #[cfg(test)]
    fn wait_for_purges(&self) {
        self.purger
            .flush()
            .recv()
            .expect("purge thread running")
            .expect("barrier");
    }
}

/// What one append wrote, for its sync request.
#[derive(Default)]
struct Written {
    files: Vec<Arc<fs::File>>,
    created: bool,
}

impl Written {
    fn add(&mut self, seg: &Segment) {
        if !self.files.iter().any(|f| Arc::ptr_eq(f, &seg.file)) {
            self.files.push(seg.file.clone());
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod old_release_tests;
