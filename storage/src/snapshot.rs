//! Snapshot export/import and defragmentation.
//!
//! # Format (version 1)
//! `K3RSSNAP` magic, `u32` version, then entries `u32 key length, key, u32 value length,
//! value` (every record of the database: revisions, leases, counters, meta), then an end
//! marker `u32::MAX`, the entry count `u64` and a CRC-32 of everything before it. Integers are
//! big-endian. The key index is implied by the revision records and rebuilt on import.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use crate::dbdir;
use crate::revision::{self, Rev};
use crate::state::State;
use crate::store::{lock, Error, Inner, Result};
use crate::watch::LiveBatch;

const MAGIC: &[u8; 8] = b"K3RSSNAP";
const VERSION: u32 = 1;
const END: u32 = u32::MAX;
/// Entries larger than this are treated as corruption (etcd's request limit is 1.5 MiB).
const MAX_ENTRY: u32 = 256 << 20;

/// A consistent copy of the store being written out, taken at one revision without stopping
/// applies for longer than it takes to copy the small records.
///
/// # Guarantees
/// - The copy is the state after the batch whose `meta` [`SnapshotExport::meta`] returns:
///   revision records up to that revision (records are immutable once written, so reading
///   them after applies moved on gives the same bytes), and the state, lease and alarm
///   records copied while the store's read lock was held.
/// - While it lives, applies delete no compacted record from sled (their deletion resumes
///   afterwards), and defragmentation and snapshot imports wait (they take the maintenance
///   lock), so no record the copy needs disappears under it.
pub struct SnapshotExport<'a> {
    inner: &'a Inner,
    _maintenance: MutexGuard<'a, ()>,
    db: sled::Db,
    /// Records sorted before the revision records (alarms), copied under the read lock.
    before: Vec<(sled::IVec, sled::IVec)>,
    /// Records sorted after them (leases, the state record), copied under the read lock.
    after: Vec<(sled::IVec, sled::IVec)>,
    /// The first revision key not in the copy.
    end: [u8; 17],
    /// Compacted revisions still in sled when the copy was taken (left out).
    garbage: BTreeSet<Rev>,
    meta: Option<Vec<u8>>,
}

/// Starts an export: copies the small records and pins the revision records, under the read
/// lock for that long only.
pub(crate) fn begin_export(inner: &Inner) -> Result<SnapshotExport<'_>> {
    let maintenance = lock(&inner.maintenance);
    let st = inner.read();
    if inner.poisoned() {
        return Err(Error::Poisoned);
    }
    let kv_start = [revision::KV_PREFIX];
    let kv_after = [revision::KV_PREFIX + 1];
    let before = st.db.range(..&kv_start[..]).collect::<Result<_, _>>()?;
    let after = st.db.range(&kv_after[..]..).collect::<Result<_, _>>()?;
    // Taken under the read lock: every apply from now on sees the pin.
    inner.gc_pins.fetch_add(1, Ordering::SeqCst);
    Ok(SnapshotExport {
        inner,
        _maintenance: maintenance,
        db: st.db.clone(),
        before,
        after,
        end: revision::kv_key(Rev::new(st.rev + 1, 0)),
        garbage: st.garbage.clone(),
        meta: st.meta.clone(),
    })
}

impl SnapshotExport<'_> {
    /// The `meta` of the last batch the copy holds (the Raft layer's applied state).
    pub fn meta(&self) -> Option<&[u8]> {
        self.meta.as_deref()
    }

    /// Writes the copy in the snapshot format (every record in key order).
    pub fn write(mut self, w: &mut dyn Write) -> Result<()> {
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, w);
        let mut out = Crc {
            w: &mut buffered,
            crc: crc32fast::Hasher::new(),
        };
        out.put(MAGIC)?;
        out.put(&VERSION.to_be_bytes())?;
        let mut count = 0u64;
        let kv_start = [revision::KV_PREFIX];
        let revisions = self.db.range(&kv_start[..]..&self.end[..]);
        let live = revisions.filter(|item| {
            item.as_ref().map_or(true, |(k, _)| {
                self.garbage.is_empty()
                    || revision::parse_kv_key(k).map_or(true, |rev| !self.garbage.contains(&rev))
            })
        });
        let before = std::mem::take(&mut self.before).into_iter().map(Ok);
        let after = std::mem::take(&mut self.after).into_iter().map(Ok);
        for item in before.chain(live).chain(after) {
            let (k, v) = item?;
            out.put(&(k.len() as u32).to_be_bytes())?;
            out.put(&k)?;
            out.put(&(v.len() as u32).to_be_bytes())?;
            out.put(&v)?;
            count += 1;
        }
        out.put(&END.to_be_bytes())?;
        out.put(&count.to_be_bytes())?;
        let crc = out.crc.clone().finalize();
        out.w.write_all(&crc.to_be_bytes())?;
        out.w.flush()?;
        Ok(())
    }
}

impl Drop for SnapshotExport<'_> {
    fn drop(&mut self) {
        self.inner.gc_pins.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Replaces the state with a snapshot. The snapshot is loaded into a new database generation
/// and fully checked before the store switches to it; on any error the store is unchanged.
pub(crate) fn import(inner: &Inner, r: &mut dyn Read) -> Result<()> {
    let _maintenance = lock(&inner.maintenance);
    let _no_applies = lock(&inner.apply_gate);
    let gen = inner.read().db_gen + 1;
    let (_, fresh) = dbdir::build(&inner.dir, gen, |db| {
        read_into(db, r)?;
        db.flush()?;
        State::load(db.clone(), gen)
    })?;
    swap(inner, fresh)
}

/// Rewrites the retained records into a fresh database generation (sled does not give
/// space back to the file system on its own). Applies wait while it runs (nothing can change
/// between the copy and the switch); reads go on until the switch.
pub(crate) fn defragment(inner: &Inner) -> Result<()> {
    let _maintenance = lock(&inner.maintenance);
    let _no_applies = lock(&inner.apply_gate);
    let st = inner.read();
    if inner.poisoned() {
        return Err(Error::Poisoned);
    }
    let gen = st.db_gen + 1;
    let (db, skipped) = dbdir::build(&inner.dir, gen, |db| {
        let mut batch = sled::Batch::default();
        let mut n = 0usize;
        let mut skipped = 0u64;
        for item in st.db.iter() {
            let (k, v) = item?;
            if is_garbage(&st, &k) {
                skipped += (k.len() + v.len()) as u64;
                continue;
            }
            batch.insert(k, v);
            n += 1;
            if n.is_multiple_of(10_000) {
                db.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        db.apply_batch(batch)?;
        db.flush()?;
        dbdir::switch_current(&inner.dir, gen)?;
        Ok(skipped)
    })?;
    drop(st);
    let mut st = inner.write();
    let old_gen = std::mem::replace(&mut st.db_gen, gen);
    st.db = db;
    st.garbage.clear();
    st.live_bytes = st.live_bytes.saturating_sub(skipped);
    drop(st);
    dbdir::remove_gen(&inner.dir, old_gen);
    Ok(())
}

/// Whether a database key is a compacted record not yet deleted.
pub(crate) fn is_garbage(st: &State, k: &[u8]) -> bool {
    !st.garbage.is_empty()
        && k.first() == Some(&revision::KV_PREFIX)
        && revision::parse_kv_key(k).is_ok_and(|rev| st.garbage.contains(&rev))
}

/// Makes `fresh` (already loaded from its new generation) the store's state.
pub(crate) fn swap(inner: &Inner, fresh: State) -> Result<()> {
    dbdir::switch_current(&inner.dir, fresh.db_gen)?;
    let mut st = inner.write();
    let old_gen = st.db_gen;
    *st = fresh;
    let _ = inner.hub.send(Arc::new(LiveBatch {
        revision: st.rev,
        events: Vec::new(),
        resync: true,
    }));
    drop(st);
    dbdir::remove_gen(&inner.dir, old_gen);
    Ok(())
}

/// Reads and verifies a snapshot into `db`.
fn read_into(db: &sled::Db, r: &mut dyn Read) -> Result<()> {
    let mut batch = sled::Batch::default();
    let mut count = 0u64;
    read_entries(r, |key, value| {
        batch.insert(key, value);
        count += 1;
        if count.is_multiple_of(10_000) {
            db.apply_batch(std::mem::take(&mut batch))?;
        }
        Ok(())
    })?;
    db.apply_batch(batch)?;
    Ok(())
}

/// What a verified snapshot holds, read from its counters record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The store's revision at the snapshot.
    pub revision: i64,
    /// The compacted revision (`-1`: never compacted).
    pub compact_revision: i64,
    /// Records in the snapshot.
    pub entries: u64,
    /// The opaque blob of the last applied batch (the Raft layer's applied state).
    pub meta: Vec<u8>,
}

/// Reads a whole snapshot and checks it (magic, version, entry sizes, count, checksum, the
/// counters record) without writing anything.
pub(crate) fn verify(r: &mut dyn Read) -> Result<SnapshotInfo> {
    let mut state = None;
    let mut entries = 0u64;
    read_entries(r, |key, value| {
        entries += 1;
        if key == revision::META_STATE {
            state = Some(revision::MetaState::decode(&value)?);
        }
        Ok(())
    })?;
    let state = state.ok_or_else(|| Error::Corrupt("snapshot has no state record".into()))?;
    Ok(SnapshotInfo {
        revision: state.rev,
        compact_revision: state.compact,
        entries,
        meta: state.meta,
    })
}

/// Reads a snapshot's entries into `each`; errors unless the whole snapshot is intact. The
/// entries are handed over before the checksum is checked: callers keep them provisional.
fn read_entries(
    r: &mut dyn Read,
    mut each: impl FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<()> {
    let mut input = CrcReader {
        r,
        crc: crc32fast::Hasher::new(),
    };
    let mut magic = [0u8; 8];
    input.read(&mut magic)?;
    if &magic != MAGIC {
        return Err(Error::Corrupt("not a k3rs snapshot".into()));
    }
    let version = input.u32()?;
    if version != VERSION {
        return Err(Error::Corrupt(format!(
            "unsupported snapshot version {version}"
        )));
    }
    let mut count = 0u64;
    loop {
        let klen = input.u32()?;
        if klen == END {
            break;
        }
        let key = input.bytes(klen)?;
        let vlen = input.u32()?;
        let value = input.bytes(vlen)?;
        each(key, value)?;
        count += 1;
    }
    let mut n = [0u8; 8];
    input.read(&mut n)?;
    let expected = input.crc.clone().finalize();
    let mut crc = [0u8; 4];
    input.r.read_exact(&mut crc).map_err(truncated)?;
    if u32::from_be_bytes(crc) != expected {
        return Err(Error::Corrupt("snapshot checksum mismatch".into()));
    }
    if u64::from_be_bytes(n) != count {
        return Err(Error::Corrupt("snapshot entry count mismatch".into()));
    }
    Ok(())
}

fn truncated(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        Error::Corrupt("snapshot truncated".into())
    } else {
        Error::SnapshotIo(e)
    }
}

struct Crc<'a> {
    w: &'a mut dyn Write,
    crc: crc32fast::Hasher,
}

impl Crc<'_> {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.crc.update(b);
        self.w.write_all(b)?;
        Ok(())
    }
}

struct CrcReader<'a> {
    r: &'a mut dyn Read,
    crc: crc32fast::Hasher,
}

impl CrcReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<()> {
        self.r.read_exact(buf).map_err(truncated)?;
        self.crc.update(buf);
        Ok(())
    }

    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(&mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    fn bytes(&mut self, len: u32) -> Result<Vec<u8>> {
        if len > MAX_ENTRY {
            return Err(Error::Corrupt(format!("snapshot entry of {len} bytes")));
        }
        let mut b = vec![0u8; len as usize];
        self.read(&mut b)?;
        Ok(b)
    }
}
