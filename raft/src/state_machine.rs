//! openraft's [`RaftStateMachine`] over [`k3rs_storage::Store`].
//!
//! # Guarantees
//! - Each `apply` call is one `Store::apply_batch_deferred` of all its client commands, with
//!   `meta` = rmp-serde of (last applied log id, last membership) persisted atomically with it.
//!   Blank and membership entries have no command but still advance `meta`.
//! - The batch's sled write runs on a blocking thread while openraft answers the clients
//!   (about a fifth of a one-client put's time on the server); the store lets no reader in
//!   before it is written, and the next `apply` awaits it first. The answer does not wait for
//!   the store to be durable, as before: the WAL is the durability point.
//! - A snapshot is the store's consistent copy ([`Store::begin_export`]) with the meta of the
//!   last batch it holds, so its meta is exactly the state it holds. Applies go on while it is
//!   written on a low-priority thread (they wait only while the copy's small records are
//!   taken); the file is synced, then the store is flushed, before openraft is told about it
//!   (and purges the WAL).
//!
//! # Assumptions
//! `Store::flush` makes every applied batch durable; between flushes a crash may lose the
//! store's latest batches, which is fine: their log entries are still in the WAL and are
//! applied again (the applied index travels with the data), and a store left behind the newest
//! snapshot is brought up to it at start (`restore_if_behind`).

// openraft's `StorageError` is what its traits return; boxing it in our helpers would only
// add conversions at every call site.
#![allow(clippy::result_large_err)]

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use k3rs_storage::{Command, Store};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use tokio::sync::Mutex;

use crate::lessor::Lessor;
use crate::snapshot::{self, SnapshotDir};
use crate::stages::{Stage, Stages};
use crate::types::{
    Entry, LogId, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// What the state machine stores next to its data: where it is in the log.
pub type AppliedMeta = (Option<LogId>, StoredMembership);

pub fn encode_meta(meta: &AppliedMeta) -> Vec<u8> {
    rmp_serde::to_vec(meta).expect("applied meta always serializes")
}

/// The applied state recorded in `store`, or the initial state for a fresh store.
pub fn applied_meta(store: &Store) -> Result<AppliedMeta, StorageError> {
    let meta = store
        .applied_meta()
        .map_err(|e| StorageIOError::read_state_machine(&e))?;
    decode_meta(meta.as_deref())
}

/// The applied state in a stored `meta` blob (`None`: a fresh store).
fn decode_meta(meta: Option<&[u8]>) -> Result<AppliedMeta, StorageError> {
    match meta {
        None => Ok((None, StoredMembership::default())),
        Some(bytes) => {
            rmp_serde::from_slice(bytes).map_err(|e| StorageIOError::read_state_machine(&e).into())
        }
    }
}

fn io_err<E: std::error::Error + 'static>(e: E) -> io::Error {
    io::Error::other(e.to_string())
}

/// Brings a store that is behind the newest snapshot (its `sm/` directory lost, or its last
/// batches lost in a crash after the WAL was purged) up to that snapshot. The WAL then covers
/// everything after it. Returns whether the snapshot was imported.
pub fn restore_if_behind(store: &Store, snapshots: &SnapshotDir) -> Result<bool, StorageError> {
    let Some((meta, path)) = snapshots
        .latest()
        .map_err(|e| StorageIOError::read_snapshot(None, &e))?
    else {
        return Ok(false);
    };
    let (applied, _) = applied_meta(store)?;
    if applied >= meta.last_log_id {
        return Ok(false);
    }
    tracing::warn!(
        applied = ?applied,
        snapshot = ?meta.last_log_id,
        "state machine is behind the latest snapshot; restoring it from {}",
        path.display()
    );
    import(store, &path).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
    Ok(true)
}

fn import(store: &Store, path: &std::path::Path) -> io::Result<()> {
    let (_, mut body) = snapshot::open_body(path)?;
    store
        .import_snapshot(&mut body as &mut dyn Read)
        .map_err(io_err)?;
    store.flush().map_err(io_err)
}

/// The state machine adapter. `apply_lock` serializes applying with snapshot installs; it is
/// a tokio mutex so that `apply` waits for an install without blocking a runtime thread (the
/// import itself runs on a blocking thread).
pub struct StateMachine {
    store: Arc<Store>,
    lessor: Arc<Lessor>,
    snapshots: SnapshotDir,
    apply_lock: Arc<Mutex<()>>,
    applied: AppliedMeta,
    receiving: Option<PathBuf>,
    /// How long each batch's commit to sled takes.
    commit_stats: Arc<crate::wal::FsyncHistogram>,
    stages: Arc<Stages>,
    /// Held while a snapshot is being built (see [`StateMachine::snapshot_builds`]).
    building: Arc<Mutex<()>>,
    /// The last batch's sled write, running on a blocking thread (an error says the store
    /// failed and is poisoned).
    committing: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl StateMachine {
    /// Held by a snapshot build until its file is written, also when openraft dropped the
    /// build's future (the blocking work goes on): locking it waits for the build, so that a
    /// stopping node leaves no write behind in its directory.
    pub fn snapshot_builds(&self) -> Arc<Mutex<()>> {
        self.building.clone()
    }

    /// The histogram of batch commit durations (shared; the node reports it).
    pub fn commit_stats(&self) -> Arc<crate::wal::FsyncHistogram> {
        self.commit_stats.clone()
    }

    pub fn new(
        store: Arc<Store>,
        lessor: Arc<Lessor>,
        snapshots: SnapshotDir,
        stages: Arc<Stages>,
    ) -> Result<Self, StorageError> {
        let applied = applied_meta(&store)?;
        Ok(StateMachine {
            store,
            lessor,
            snapshots,
            apply_lock: Arc::new(Mutex::new(())),
            applied,
            receiving: None,
            commit_stats: Arc::default(),
            stages,
            building: Arc::default(),
            committing: None,
        })
    }

    /// Waits for the last batch's sled write (without blocking a runtime thread on the store's
    /// lock, which would wait for it too).
    async fn committed(&mut self) -> Result<(), StorageError> {
        let Some(committing) = self.committing.take() else {
            return Ok(());
        };
        let failed = match committing.await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        let e = io::Error::other(format!("writing an applied batch to the store: {failed}"));
        Err(StorageIOError::write_state_machine(&e).into())
    }
}

/// Builds snapshots; holds what it needs to run on a blocking thread.
#[derive(Clone)]
pub struct SnapshotBuilder {
    store: Arc<Store>,
    snapshots: SnapshotDir,
    stages: Arc<Stages>,
    building: Arc<Mutex<()>>,
}

impl SnapshotBuilder {
    /// Takes the store's consistent copy, writes it to the snapshot file (durably), then
    /// flushes the store, so that what the snapshot covers is durable in the store too before
    /// openraft purges the WAL. Applies go on meanwhile.
    fn build_blocking(&self) -> Result<(SnapshotMeta, PathBuf), StorageError> {
        let started = Instant::now();
        let export = self
            .store
            .begin_export()
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        self.stages
            .observe(Stage::SnapshotCapture, started.elapsed());
        let (last_log_id, last_membership) = decode_meta(export.meta())?;
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id: SnapshotDir::new_id(last_log_id.map_or(0, |l| l.index)),
        };
        let written = Instant::now();
        let path = self
            .snapshots
            .write(&meta, |w| export.write(w).map_err(io_err))
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.stages.observe(Stage::SnapshotWrite, written.elapsed());
        let flushed = Instant::now();
        self.store
            .flush()
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.stages.observe(Stage::SnapshotFlush, flushed.elapsed());
        tracing::info!(
            last_log_id = ?meta.last_log_id,
            path = %path.display(),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "built snapshot"
        );
        Ok((meta, path))
    }
}

async fn snapshot_of(
    meta: SnapshotMeta,
    path: PathBuf,
) -> Result<Snapshot<TypeConfig>, StorageError> {
    let file = snapshot::open_data(&path)
        .await
        .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
    Ok(Snapshot {
        meta,
        snapshot: Box::new(file),
    })
}

/// Runs `f` (blocking work that may take seconds) so that the runtime's other tasks are not
/// held up by it: on a multi-threaded runtime the calling worker hands its tasks to another
/// thread meanwhile (`block_in_place`); elsewhere (a current-thread runtime in tests) inline.
/// A commit of a delete of 250,000 keys (3.7 s) ran on a worker of the two a member has, and
/// the Raft core and the peer service had the other one to share with everything else.
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
    if matches!(flavor, Ok(tokio::runtime::RuntimeFlavor::MultiThread)) {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

fn join_err(e: tokio::task::JoinError) -> StorageError {
    StorageIOError::write_snapshot(None, &e).into()
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let this = self.clone();
        let building = self.building.clone().lock_owned().await;
        // The export reads and writes the whole store: at a low priority, so that it does not
        // starve the write path of this member (and of its peers on the same machine).
        let built = crate::low_priority::spawn("k3rs-snapshot", move || {
            let _building = building;
            this.build_blocking()
        });
        let (meta, path) = built.await.map_err(|_| {
            let e = io::Error::other("the snapshot thread stopped without a result");
            StorageError::from(StorageIOError::write_snapshot(None, &e))
        })??;
        snapshot_of(meta, path).await
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<AppliedMeta, StorageError> {
        Ok(self.applied.clone())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // All commands of all entries go into one `apply_batch`; `counts` splits the outputs
        // back per entry.
        let mut counts = Vec::new();
        let mut cmds: Vec<Command> = Vec::new();
        let (mut last, mut membership) = self.applied.clone();
        for entry in entries {
            // Defensive: entries must continue the applied state exactly.
            let expected = last.map_or(0, |l| l.index + 1);
            if entry.log_id.index != expected {
                let msg = format!("applying index {} after {last:?}", entry.log_id.index);
                return Err(StorageIOError::apply(entry.log_id, &io::Error::other(msg)).into());
            }
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Normal(proposal) => {
                    counts.push(proposal.len());
                    cmds.extend(proposal);
                }
                EntryPayload::Membership(m) => {
                    counts.push(0);
                    membership = StoredMembership::new(Some(entry.log_id), m);
                }
                EntryPayload::Blank => counts.push(0),
            }
        }
        let Some(last_log_id) = last else {
            return Ok(Vec::new());
        };
        let meta = (last, membership);
        self.committed().await?;
        let outputs = {
            let waited = Instant::now();
            let _applying = self.apply_lock.lock().await;
            self.stages.observe(Stage::ApplyLockWait, waited.elapsed());
            let meta_bytes = encode_meta(&meta);
            let apply = || self.store.apply_batch_deferred(&cmds, &meta_bytes);
            let (outputs, pending) = if cmds.iter().any(Command::may_touch_many_keys) {
                off_the_runtime(apply)
            } else {
                apply()
            }
            .map_err(|e| StorageIOError::apply(last_log_id, &e))?;
            let commit_stats = self.commit_stats.clone();
            self.committing = Some(tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let written = pending.commit().map_err(|e| e.to_string());
                let took = started.elapsed();
                commit_stats.observe(took);
                crate::stages::slow("backend_commit", took);
                written
            }));
            outputs
        };
        if outputs.len() != cmds.len() {
            let msg = format!(
                "store returned {} outputs for {} commands",
                outputs.len(),
                cmds.len()
            );
            return Err(StorageIOError::apply(last_log_id, &io::Error::other(msg)).into());
        }
        for (cmd, out) in cmds.iter().zip(&outputs) {
            self.lessor.on_applied(cmd, &out.result);
        }
        self.applied = meta;
        let mut outputs = outputs.into_iter();
        Ok(counts
            .into_iter()
            .map(|n| outputs.by_ref().take(n).collect())
            .collect())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            store: self.store.clone(),
            snapshots: self.snapshots.clone(),
            stages: self.stages.clone(),
            building: self.building.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        let path = self.snapshots.incoming_path();
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        self.receiving = Some(path);
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let werr = |e: io::Error| {
            StorageError::from(StorageIOError::write_snapshot(Some(meta.signature()), &e))
        };
        let Some(incoming) = self.receiving.take() else {
            return Err(werr(io::Error::other(
                "install_snapshot without begin_receiving_snapshot",
            )));
        };
        self.committed().await?;
        snapshot.sync_all().await.map_err(werr)?;
        drop(snapshot);
        let (snapshots, store, lock_arc, m) = (
            self.snapshots.clone(),
            self.store.clone(),
            self.apply_lock.clone(),
            meta.clone(),
        );
        tokio::task::spawn_blocking(move || -> io::Result<()> {
            let path = snapshots.adopt(&incoming, &m)?;
            let _applying = lock_arc.blocking_lock();
            import(&store, &path)
        })
        .await
        .map_err(join_err)?
        .map_err(werr)?;
        self.applied = applied_meta(&self.store)?;
        if let Err(e) = self.lessor.refresh_from(&self.store) {
            tracing::error!(error = %e, "reading leases after installing a snapshot");
        }
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let latest = self
            .snapshots
            .latest()
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        match latest {
            None => Ok(None),
            Some((meta, path)) => snapshot_of(meta, path).await.map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k3rs_storage::{PutRequest, RangeRequest};
    use openraft::{CommittedLeaderId, RaftSnapshotBuilder};
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn entry(index: u64, cmds: Vec<Command>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: if cmds.is_empty() {
                EntryPayload::Blank
            } else {
                EntryPayload::Normal(cmds)
            },
        }
    }

    fn put(key: &str) -> Command {
        Command::Put(PutRequest {
            key: key.into(),
            value: b"v".to_vec(),
            ..Default::default()
        })
    }

    fn open(dir: &std::path::Path) -> StateMachine {
        let store = Arc::new(Store::open(&dir.join("sm")).unwrap());
        let snaps = SnapshotDir::open(&dir.join("snapshots")).unwrap();
        let lessor = Arc::new(Lessor::new(Duration::from_secs(1)));
        StateMachine::new(store, lessor, snaps, Arc::default()).unwrap()
    }

    /// With one runtime worker, a task the blocking task spawned just before blocking still
    /// runs while it lasts: the worker handed its tasks over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn blocking_work_off_the_runtime_lets_other_tasks_run() {
        let blocker = tokio::spawn(async {
            let (tx, rx) = std::sync::mpsc::channel();
            let other = tokio::spawn(async move { tx.send(()).unwrap() });
            let ran = off_the_runtime(|| rx.recv_timeout(Duration::from_secs(10)));
            (ran, other)
        });
        let (ran, other) = blocker.await.unwrap();
        assert_eq!(ran, Ok(()), "the other task ran during the blocking work");
        other.await.unwrap();
    }

    #[test]
    fn without_a_multi_threaded_runtime_blocking_work_runs_inline() {
        assert_eq!(off_the_runtime(|| 7), 7);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(async { off_the_runtime(|| 8) }), 8);
    }

    #[tokio::test]
    async fn apply_splits_outputs_and_snapshot_installs_elsewhere() {
        let a_dir = tempfile::tempdir().unwrap();
        let mut a = open(a_dir.path());
        let out = a
            .apply(vec![
                entry(0, vec![]),
                entry(1, vec![put("a"), put("b")]),
                entry(2, vec![put("c")]),
            ])
            .await
            .unwrap();
        let revs: Vec<Vec<i64>> = out
            .iter()
            .map(|o| o.iter().map(|x| x.revision).collect())
            .collect();
        assert_eq!(revs, vec![vec![], vec![2, 3], vec![4]]);
        assert_eq!(a.applied_state().await.unwrap().0.map(|l| l.index), Some(2));

        let built = a
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(built.meta.last_log_id.map(|l| l.index), Some(2));
        let mut current = a.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, built.meta);
        let mut bytes = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut *current.snapshot, &mut bytes)
            .await
            .unwrap();

        // A follower receives the file and installs it.
        let b_dir = tempfile::tempdir().unwrap();
        let mut b = open(b_dir.path());
        let mut incoming = b.begin_receiving_snapshot().await.unwrap();
        incoming.write_all(&bytes).await.unwrap();
        b.install_snapshot(&built.meta, incoming).await.unwrap();
        assert_eq!(b.applied_state().await.unwrap().0.map(|l| l.index), Some(2));
        let req = RangeRequest {
            key: b"c".to_vec(),
            ..Default::default()
        };
        let (_, resp) = b.store.range(&req).unwrap().unwrap();
        assert_eq!(resp.kvs[0].mod_revision, 4);
        assert_eq!(
            b.get_current_snapshot().await.unwrap().unwrap().meta,
            built.meta
        );
    }
}
