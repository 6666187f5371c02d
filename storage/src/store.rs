//! The MVCC store (STUB: the implementation replaces this file; signatures are the contract).
use std::io::{Read, Write};
use std::path::Path;

use crate::types::*;
use crate::watch::{WatchRequest, Watcher};

/// Failures of the storage engine itself (not answers to a request): fatal for the caller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("opening the store: {0}")]
    Open(#[source] sled::Error),
    #[error("storage engine: {0}")]
    Engine(#[from] sled::Error),
    #[error("corrupt record: {0}")]
    Corrupt(String),
    #[error("snapshot i/o: {0}")]
    SnapshotIo(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The MVCC key-value store. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Store {}

impl Store {
    /// Opens (or creates) the store in directory `path`.
    pub fn open(_path: &Path) -> Result<Store> {
        unimplemented!()
    }

    /// Applies committed commands in order and persists `meta` atomically with their effects.
    /// One output per command. Watchers see the batch after it is applied.
    pub fn apply_batch(&self, _cmds: &[Command], _meta: &[u8]) -> Result<Vec<Output>> {
        unimplemented!()
    }

    /// The `meta` stored by the last `apply_batch`/`import_snapshot`, if any.
    pub fn applied_meta(&self) -> Result<Option<Vec<u8>>> {
        unimplemented!()
    }

    /// Reads applied state. Ok carries (header revision = current revision, response).
    pub fn range(&self, _req: &RangeRequest) -> Result<std::result::Result<(i64, RangeResponse), RequestError>> {
        unimplemented!()
    }

    pub fn current_revision(&self) -> i64 {
        unimplemented!()
    }

    pub fn compact_revision(&self) -> i64 {
        unimplemented!()
    }

    pub fn lease(&self, _id: i64) -> Result<Option<Lease>> {
        unimplemented!()
    }

    pub fn leases(&self) -> Result<Vec<Lease>> {
        unimplemented!()
    }

    /// Starts a watch. Errors with `Compacted` if `start_revision` is already compacted.
    pub fn watch(&self, _req: WatchRequest) -> std::result::Result<Watcher, RequestError> {
        unimplemented!()
    }

    /// Bytes on disk.
    pub fn db_size(&self) -> u64 {
        unimplemented!()
    }

    /// Bytes of live data (latest versions, leases, meta) — etcd's "in use" size.
    pub fn db_size_in_use(&self) -> u64 {
        unimplemented!()
    }

    /// Makes every applied batch durable on disk.
    pub fn flush(&self) -> Result<()> {
        unimplemented!()
    }

    /// Reclaims space on disk.
    pub fn defragment(&self) -> Result<()> {
        unimplemented!()
    }

    /// Writes a consistent, self-describing copy of the whole state (incl. meta).
    pub fn export_snapshot(&self, _w: &mut dyn Write) -> Result<()> {
        unimplemented!()
    }

    /// Replaces the whole state with a snapshot written by `export_snapshot`.
    pub fn import_snapshot(&self, _r: &mut dyn Read) -> Result<()> {
        unimplemented!()
    }
}
