//! Reading records by revision, through the overlay of a batch being applied.

use std::collections::BTreeMap;

use crate::record;
use crate::revision::{kv_key, Rev};
use crate::store::{Error, Result};
use crate::types::KeyValue;

/// Records written by the batch being applied and not yet in sled.
pub(crate) type Pending = BTreeMap<Rev, Vec<u8>>;

/// Reads records from sled, or from a batch's pending writes first.
#[derive(Clone, Copy)]
pub(crate) struct KvReader<'a> {
    pub tree: &'a sled::Tree,
    pub pending: Option<&'a Pending>,
}

impl<'a> KvReader<'a> {
    pub(crate) fn new(tree: &'a sled::Tree, pending: Option<&'a Pending>) -> Self {
        KvReader { tree, pending }
    }

    /// The record at `rev` as (key-value, is tombstone), `None` if not retained.
    pub(crate) fn get(&self, rev: Rev) -> Result<Option<(KeyValue, bool)>> {
        if let Some(rec) = self.pending.and_then(|p| p.get(&rev)) {
            return record::decode(rev, rec).map(Some);
        }
        match self.tree.get(kv_key(rev))? {
            Some(b) => Ok(Some(record::decode(rev, &b)?)),
            None => Ok(None),
        }
    }

    /// The record at `rev`, which the key index says is retained.
    pub(crate) fn must_get(&self, rev: Rev) -> Result<KeyValue> {
        match self.get(rev)? {
            Some((kv, _)) => Ok(kv),
            None => Err(Error::Corrupt(format!(
                "indexed revision {rev:?} has no record"
            ))),
        }
    }
}
