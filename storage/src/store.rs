//! The MVCC store: the public API over the state, its lock, and the apply loop.
//!
//! # Guarantees
//! - `apply_batch` is deterministic: outputs and state depend only on the prior state and the
//!   commands. A batch and its `meta` are committed in one atomic sled batch.
//! - Readers never see a partly applied batch (they take the read lock; apply takes the write
//!   lock for the whole batch), nor one whose sled write is still pending (the lock lets them
//!   in only when every handed-out [`PendingCommit`] is written; see [`crate::commit`]).
//! - After an engine error in the middle of a batch, the store refuses further work
//!   (memory and disk may disagree); reopen it.
//! - Nothing is fsynced per batch; [`Store::flush`] makes every applied batch durable. After a
//!   crash the store opens at the end of some earlier batch, with that batch's `meta`.
//!
//! # Assumptions
//! - One process opens a directory at a time. Watchers keep the database open: drop them
//!   before reopening the same directory (`open` retries a held lock for about 5 s).
//! - The caller applies batches in log order; `meta` tells it where to resume.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

use tokio::sync::broadcast;

use crate::commit::{CommitGate, PendingCommit};
use crate::compact::compact;
use crate::disk_size::RecentSize;
use crate::hash::KvHash;
use crate::kv::{delete_command, put_command};
use crate::range::{range, View};
use crate::reader::KvReader;
use crate::snapshot::SnapshotExport;
use crate::state::State;
use crate::txn::txn_command;
use crate::types::*;
use crate::watch::{self, LiveBatch, WatchRequest, Watcher};
use crate::writer::Writer;
use crate::{alarm, dbdir, hash, history, lease, snapshot};

/// Failures of the storage engine itself (not answers to a request): fatal for the caller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// sled could not open the database.
    #[error("opening the store: {0}")]
    Open(#[source] sled::Error),
    /// sled failed.
    #[error("storage engine: {0}")]
    Engine(#[from] sled::Error),
    /// A record does not decode (what).
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// Writing or reading a snapshot failed.
    #[error("snapshot i/o: {0}")]
    SnapshotIo(#[from] std::io::Error),
    /// Managing the store's directory (database generations) failed.
    #[error("store directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An earlier engine failure left memory and disk out of step; reopen the store.
    #[error("store is poisoned by an earlier engine failure")]
    Poisoned,
}

/// A storage result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Compacted records deleted from sled with every applied batch (plus two per command).
const GC_PER_BATCH: usize = 64;

/// What the store and its watchers share.
pub(crate) struct Inner {
    pub state: RwLock<State>,
    /// Serializes snapshot imports and defragmentations (each builds the next generation).
    pub maintenance: Mutex<()>,
    /// Held by `apply_batch` (before the state lock) and by maintenance that must stop applies
    /// while letting reads go on (defragmentation, import).
    pub apply_gate: Mutex<()>,
    /// Snapshot exports in progress: while any is, applies delete no compacted record (see
    /// [`SnapshotExport`]).
    pub gc_pins: AtomicUsize,
    /// The size on disk as the quota check reads it (see [`Store::db_size_recent`]).
    pub recent_size: RecentSize,
    /// How far the handed-out sled writes have got; the lock waits for them.
    pub commits: Arc<CommitGate>,
    pub hub: broadcast::Sender<Arc<LiveBatch>>,
    pub dir: PathBuf,
}

/// Locks a mutex that guards no data (a poisoned one is as good).
pub(crate) fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    /// The state to read, once every applied batch is written to sled.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.settled(|| self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The state to change, once every applied batch is written to sled.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.settled(|| self.state.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// Takes the lock with `lock` until no handed-out write is pending under it (batches are
    /// handed out under the write lock, so the count is stable while any guard is held).
    fn settled<G>(&self, lock: impl Fn() -> G) -> G {
        loop {
            let guard = lock();
            let seq = self.commits.last_issued();
            if self.commits.settled(seq) {
                return guard;
            }
            drop(guard);
            self.commits.wait_for(seq);
        }
    }

    /// Whether an engine failure (or [`Store::poison`]) stopped the store for good: memory
    /// and disk may disagree.
    pub(crate) fn poisoned(&self) -> bool {
        self.commits.failed()
    }

    /// The state if no batch is being applied or written right now (`None`: one is).
    pub(crate) fn try_read(&self) -> Option<RwLockReadGuard<'_, State>> {
        let st = match self.state.try_read() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.commits
            .settled(self.commits.last_issued())
            .then_some(st)
    }
}

impl Drop for Inner {
    /// A clean shutdown leaves every applied batch on disk (a crash is covered by the Raft
    /// log's replay).
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.commits.wait_for(self.commits.last_issued());
        if self.commits.failed() {
            // See `Store::flush`: the writes that failed would be waited for forever, also by
            // sled's own flush when its last handle drops; so that handle is never dropped.
            std::mem::forget(st.db.clone());
            return;
        }
        if let Err(e) = st.db.flush() {
            tracing::warn!(error = %e, "flushing the store on close");
        }
    }
}

/// The MVCC key-value store. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (or creates) the store in directory `path`: rebuilds the key index from the
    /// retained records (time and memory proportional to them; no values kept in memory).
    pub fn open(path: &Path) -> Result<Store> {
        let (db, db_gen) = dbdir::open_current(path)?;
        let state = State::load(db, db_gen)?;
        let (hub, _) = broadcast::channel(watch::HUB_CAPACITY);
        Ok(Store {
            inner: Arc::new(Inner {
                state: RwLock::new(state),
                maintenance: Mutex::new(()),
                apply_gate: Mutex::new(()),
                gc_pins: AtomicUsize::new(0),
                recent_size: RecentSize::default(),
                commits: Arc::default(),
                hub,
                dir: path.to_path_buf(),
            }),
        })
    }

    /// Applies committed commands in order and persists `meta` atomically with their effects.
    /// One output per command. Watchers see the batch after it is applied.
    pub fn apply_batch(&self, cmds: &[Command], meta: &[u8]) -> Result<Vec<Output>> {
        let (outputs, commit) = self.apply_batch_deferred(cmds, meta)?;
        commit.commit()?;
        Ok(outputs)
    }

    /// [`Store::apply_batch`] whose sled write is left to the caller: the outputs are final
    /// (the batch is applied in memory) and the caller may answer with them before it runs
    /// [`PendingCommit::commit`] (or drops it), e.g. on another thread. Meanwhile every other
    /// use of the store waits for that write, so it must happen soon; a failed one poisons the
    /// store. Not fsynced, as `apply_batch` is not.
    pub fn apply_batch_deferred(
        &self,
        cmds: &[Command],
        meta: &[u8],
    ) -> Result<(Vec<Output>, PendingCommit)> {
        let _gate = lock(&self.inner.apply_gate);
        let mut st = self.inner.write();
        if self.inner.poisoned() {
            return Err(Error::Poisoned);
        }
        let gc = self.inner.gc_pins.load(Ordering::SeqCst) == 0;
        let mut w = Writer::new(&mut st);
        let applied = apply_all(&mut w, cmds, meta, gc);
        let events = std::mem::take(&mut w.events);
        let (outputs, batch) = match applied {
            Ok(applied) => applied,
            Err(e) => {
                self.inner.commits.poison();
                return Err(e);
            }
        };
        let seq = self.inner.commits.issue();
        let commit = PendingCommit::new(st.db.clone(), batch, seq, self.inner.commits.clone());
        if !events.is_empty() {
            // No receivers is fine: nobody is watching.
            let _ = self.inner.hub.send(Arc::new(LiveBatch {
                revision: st.rev,
                events,
                resync: false,
            }));
        }
        Ok((outputs, commit))
    }

    /// The `meta` stored by the last `apply_batch`/`import_snapshot`, if any.
    pub fn applied_meta(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.inner.read().meta.clone())
    }

    /// Reads applied state. Ok carries (header revision = current revision, response).
    pub fn range(
        &self,
        req: &RangeRequest,
    ) -> Result<std::result::Result<(i64, RangeResponse), RequestError>> {
        let st = self.inner.read();
        if self.inner.poisoned() {
            return Err(Error::Poisoned);
        }
        let view = View {
            index: &st.index,
            kvs: KvReader::new(&st.db, None),
            current: st.rev,
            compact: st.compact,
        };
        Ok(range(&view, req)?.map(|r| (st.rev, r)))
    }

    /// The current store revision (1 for an empty store).
    pub fn current_revision(&self) -> i64 {
        self.inner.read().rev
    }

    /// The last compacted revision, 0 if never compacted.
    pub fn compact_revision(&self) -> i64 {
        self.inner.read().reported_compact()
    }

    /// Lease `id` with its attached keys, if it exists.
    pub fn lease(&self, id: i64) -> Result<Option<Lease>> {
        let st = self.inner.read();
        Ok(st.leases.get(&id).map(|l| Lease {
            id,
            ttl: l.ttl,
            keys: l.keys.iter().cloned().collect(),
        }))
    }

    /// Every lease, by ID.
    pub fn leases(&self) -> Result<Vec<Lease>> {
        let st = self.inner.read();
        Ok(st
            .leases
            .iter()
            .map(|(id, l)| Lease {
                id: *id,
                ttl: l.ttl,
                keys: l.keys.iter().cloned().collect(),
            })
            .collect())
    }

    /// The raised alarms of type `alarm` (`AlarmType::None`: all), ordered by type, then
    /// member (etcd's alarm GET, which lists them in map order).
    pub fn alarms(&self, alarm: AlarmType) -> Vec<AlarmMember> {
        alarm::list(&self.inner.read().alarms, alarm)
    }

    /// etcd's `HashKV` at `revision` (0 = current): see [`hash`](crate::hash) for what it
    /// covers. Reads hold the store's read lock throughout (applies wait).
    pub fn hash_kv(&self, revision: i64) -> Result<std::result::Result<KvHash, RequestError>> {
        let st = self.inner.read();
        if self.inner.poisoned() {
            return Err(Error::Poisoned);
        }
        hash::hash_kv(&st, revision)
    }

    /// etcd's `Hash`, over what k3rs holds of etcd's backend buckets: see
    /// [`hash`](crate::hash).
    pub fn hash(&self) -> Result<(i64, u32)> {
        let st = self.inner.read();
        if self.inner.poisoned() {
            return Err(Error::Poisoned);
        }
        Ok((st.rev, hash::hash_all(&st)?))
    }

    /// Starts a watch. Errors with `Compacted` if `start_revision` is already compacted.
    pub fn watch(&self, req: WatchRequest) -> std::result::Result<Watcher, RequestError> {
        watch::start(&self.inner, req)
    }

    /// Bytes on disk.
    pub fn db_size(&self) -> u64 {
        let db = self.inner.read().db.clone();
        db.size_on_disk().unwrap_or(0)
    }

    /// Bytes on disk as measured at most 100 ms ago (a new database
    /// generation is measured afresh): for checks on every write, such as the quota.
    ///
    /// Never waits for a batch being applied: then the last measurement answers, whatever its
    /// age. The caller is an async runtime's worker; a batch can hold the store for seconds (a
    /// delete of 250,000 keys: 3.7 s), and two puts waiting for it here froze a member's
    /// runtime long enough for its peers to elect another leader.
    pub fn db_size_recent(&self) -> u64 {
        let now = std::time::Instant::now();
        let Some(st) = self.inner.try_read() else {
            // Busy: the last measurement, or (nothing measured yet) wait as any reader does.
            return self
                .inner
                .recent_size
                .last()
                .unwrap_or_else(|| self.db_size());
        };
        // The handle, not the guard, goes into the measurement: a batch may start meanwhile.
        let (gen, db) = (st.db_gen, st.db.clone());
        drop(st);
        self.inner
            .recent_size
            .get(gen, now, || db.size_on_disk().unwrap_or(0))
    }

    /// Bytes of live data (retained revisions, leases, meta) — etcd's "in use" size.
    pub fn db_size_in_use(&self) -> u64 {
        let st = self.inner.read();
        st.live_bytes + st.leases.len() as u64 * 17
    }

    /// Makes every applied batch durable on disk.
    ///
    /// # Errors
    /// `Poisoned` without touching the disk once an engine failure (or [`Store::poison`])
    /// stopped the store: after a failed write sled's flush waits forever for it.
    pub fn flush(&self) -> Result<()> {
        let db = {
            let st = self.inner.read();
            if self.inner.poisoned() {
                return Err(Error::Poisoned);
            }
            st.db.clone()
        };
        db.flush()?;
        Ok(())
    }

    /// Stops the store for good, as an engine failure does: applies, reads and flushes answer
    /// `Poisoned` from now on. For a caller whose other storage failed (the Raft WAL on a full
    /// disk), so that shutting down does not wait on writes that cannot succeed.
    pub fn poison(&self) {
        let _applies_done = self.inner.write();
        self.inner.commits.poison();
    }

    /// Reclaims space on disk by rewriting the retained state into a fresh database. Applies
    /// wait while it runs; reads go on.
    pub fn defragment(&self) -> Result<()> {
        snapshot::defragment(&self.inner)
    }

    /// Writes a consistent, self-describing copy of the whole state (incl. meta). Applies go
    /// on meanwhile (see [`Store::begin_export`]).
    pub fn export_snapshot(&self, w: &mut dyn Write) -> Result<()> {
        self.begin_export()?.write(w)
    }

    /// Takes a consistent copy of the state now, to be written with
    /// [`SnapshotExport::write`]; its [`SnapshotExport::meta`] says which batch it ends with.
    /// Applies wait only while the small records are copied (not while the copy is written);
    /// defragmentation and snapshot imports wait until the export is dropped.
    pub fn begin_export(&self) -> Result<SnapshotExport<'_>> {
        snapshot::begin_export(&self.inner)
    }

    /// Replaces the whole state with a snapshot written by `export_snapshot`. The snapshot is
    /// verified (checksum, records) before anything changes; on error the store is unchanged.
    /// Watchers continue from their next revision in the new state (or end as compacted).
    pub fn import_snapshot(&self, r: &mut dyn Read) -> Result<()> {
        snapshot::import(&self.inner, r)
    }

    /// Calls `each` with every retained revision of every key, in revision order, and
    /// returns the current and compacted revision and the leases, all from one consistent
    /// state (applies wait meanwhile, as for [`Store::export_snapshot`]).
    pub fn export_history<E: From<Error>>(
        &self,
        each: &mut dyn FnMut(history::HistoryRecord) -> Result<(), E>,
    ) -> Result<history::HistoryState, E> {
        history::export(&self.inner, each)
    }

    /// Replaces the whole state with a history (from another store, e.g. an etcd snapshot):
    /// its records keep their revisions; `meta` becomes the applied-state blob. On error the
    /// store is unchanged.
    pub fn import_history(
        &self,
        state: &history::HistoryState,
        records: &mut dyn Iterator<Item = history::HistoryRecord>,
        meta: &[u8],
    ) -> Result<()> {
        history::import(&self.inner, state, records, meta)
    }

    /// Reads a whole snapshot written by `export_snapshot` and checks it (checksum, entry
    /// count, sizes, the counters record) without a store; says what it holds.
    pub fn verify_snapshot(r: &mut dyn Read) -> Result<snapshot::SnapshotInfo> {
        snapshot::verify(r)
    }
}

/// `gc`: whether to delete compacted records with this batch (not while a snapshot export
/// reads them).
fn apply_all(
    w: &mut Writer<'_>,
    cmds: &[Command],
    meta: &[u8],
    gc: bool,
) -> Result<(Vec<Output>, sled::Batch)> {
    let mut outputs = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        if let Some(refused) = alarm::refusal(&w.st.alarms, cmd) {
            outputs.push(Output {
                revision: w.st.rev,
                result: Err(refused),
            });
            continue;
        }
        let result = match cmd {
            Command::Put(p) => put_command(w, p)?.map(CommandResponse::Put),
            Command::DeleteRange(d) => delete_command(w, d)?.map(CommandResponse::DeleteRange),
            Command::Txn(t) => txn_command(w, t)?.map(CommandResponse::Txn),
            Command::Compact { revision } => {
                compact(w, *revision)?.map(|()| CommandResponse::Compact)
            }
            Command::LeaseGrant { id, ttl } => lease::grant(w, *id, *ttl),
            Command::LeaseRevoke { id } => lease::revoke(w, *id),
            Command::Alarm {
                action,
                member_id,
                alarm,
            } => Ok(alarm::apply(w, *action, *member_id, *alarm)),
        };
        outputs.push(Output {
            revision: w.st.rev,
            result,
        });
    }
    // Delete compacted records a little faster than a batch adds new ones.
    let gc = if gc { GC_PER_BATCH + 2 * cmds.len() } else { 0 };
    let batch = w.finish(meta, gc)?;
    Ok((outputs, batch))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_recent_size_does_not_wait_for_a_batch_being_applied() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let measured = store.db_size_recent();
        let applying = store.inner.write();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = store.clone();
        std::thread::spawn(move || tx.send(reader.db_size_recent()));
        let answer = rx.recv_timeout(Duration::from_secs(10));
        drop(applying);
        assert_eq!(answer, Ok(measured), "the last measurement answers at once");
    }
}
