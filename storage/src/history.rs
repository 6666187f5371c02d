//! The store's whole retained history in etcd's terms, for moving it to or from another
//! format (etcd's bbolt backend): one record per retained revision of a key, the leases, the
//! current and the compacted revision.
//!
//! # Guarantees
//! - [`export`] sees one consistent state (it holds the read lock) and yields the records in
//!   revision order, compacted ones left out.
//! - [`import`] builds a new database generation and switches to it only when the records
//!   loaded into a valid state; on error the store is unchanged.

use std::collections::BTreeSet;

use crate::dbdir;
use crate::record;
use crate::revision::{self, MetaState, Rev};
use crate::snapshot::is_garbage;
use crate::state::State;
use crate::store::{lock, Error, Inner, Result};
use crate::types::KeyValue;

/// One retained revision of one key: etcd's `key` bucket entry at `{main, sub}`. A tombstone
/// carries only the key (and its `mod_revision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    /// The revision's main part (the transaction's revision).
    pub main: i64,
    /// The revision's sub part (the change's index within the transaction).
    pub sub: i64,
    /// A deletion (etcd marks its key with a trailing `t`).
    pub tombstone: bool,
    /// The key and value as etcd's `mvccpb.KeyValue`.
    pub kv: KeyValue,
}

/// Everything but the records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistoryState {
    /// The store's current revision (1 for an empty store).
    pub revision: i64,
    /// The compacted revision, `-1` before the first compaction (etcd's `compactMainRev`).
    pub compact_revision: i64,
    /// (lease id, granted TTL in seconds), by id.
    pub leases: Vec<(i64, i64)>,
}

/// Calls `each` with every retained record in revision order; returns the rest of the state.
pub(crate) fn export<E: From<Error>>(
    inner: &Inner,
    each: &mut dyn FnMut(HistoryRecord) -> Result<(), E>,
) -> Result<HistoryState, E> {
    let st = inner.read();
    for item in st.db.scan_prefix([revision::KV_PREFIX]) {
        let (k, v) = item.map_err(Error::from)?;
        if is_garbage(&st, &k) {
            continue;
        }
        let rev = revision::parse_kv_key(&k)?;
        let (kv, tombstone) = record::decode(rev, &v)?;
        each(HistoryRecord {
            main: rev.main,
            sub: rev.sub,
            tombstone,
            kv,
        })?;
    }
    Ok(HistoryState {
        revision: st.rev,
        compact_revision: st.compact,
        leases: st.leases.iter().map(|(id, l)| (*id, l.ttl)).collect(),
    })
}

/// Replaces the whole state with `records` (any order) and `state`; `meta` becomes the
/// applied-state blob. Records must have distinct revisions of at least 1 and at most
/// `state.revision`.
pub(crate) fn import(
    inner: &Inner,
    state: &HistoryState,
    records: &mut dyn Iterator<Item = HistoryRecord>,
    meta: &[u8],
) -> Result<()> {
    let _maintenance = lock(&inner.maintenance);
    let _no_applies = lock(&inner.apply_gate);
    let gen = inner.read().db_gen + 1;
    let (_, fresh) = dbdir::build(&inner.dir, gen, |db| {
        let mut batch = sled::Batch::default();
        let mut seen = BTreeSet::new();
        for (n, r) in records.enumerate() {
            let rev = Rev::new(r.main, r.sub);
            if r.main < 1 || r.sub < 0 || r.main > state.revision || !seen.insert(rev) {
                return Err(Error::Corrupt(format!(
                    "history record at revision {}/{} (current revision {})",
                    r.main, r.sub, state.revision
                )));
            }
            let value = if r.tombstone {
                record::encode_tombstone(&r.kv.key)
            } else {
                record::encode_put(&r.kv)
            };
            batch.insert(&revision::kv_key(rev)[..], value);
            if (n + 1) % 10_000 == 0 {
                db.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        for &(id, ttl) in &state.leases {
            batch.insert(&revision::lease_key(id)[..], &ttl.to_be_bytes()[..]);
        }
        let counters = MetaState::encode(state.revision, state.compact_revision, 0, meta);
        batch.insert(revision::META_STATE, counters);
        db.apply_batch(batch)?;
        db.flush()?;
        State::load(db.clone(), gen)
    })?;
    crate::snapshot::swap(inner, fresh)
}
