//! The in-memory state of the store and how it is rebuilt from sled on open.

use std::collections::{BTreeMap, BTreeSet};

use crate::keyindex::{Generation, KeyIndex, TreeIndex};
use crate::record;
use crate::revision::{self, be_i64, MetaState, Rev};
use crate::store::Result;
use crate::types::AlarmMember;

/// A lease: its granted TTL and the keys attached to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaseEntry {
    pub ttl: i64,
    pub keys: BTreeSet<Vec<u8>>,
}

/// Everything the store knows, guarded by the store's lock. `db` is inside so that a snapshot
/// import or a defragmentation can swap it.
pub(crate) struct State {
    pub db: sled::Db,
    /// Number of the `db-N` directory `db` lives in.
    pub db_gen: u64,
    pub index: TreeIndex,
    pub leases: BTreeMap<i64, LeaseEntry>,
    /// Current store revision (1 for an empty store).
    pub rev: i64,
    /// Compacted revision, `-1` before the first compaction (etcd's `compactMainRev`).
    pub compact: i64,
    pub lease_counter: u64,
    /// Raised alarms (etcd's alarm store).
    pub alarms: BTreeSet<AlarmMember>,
    pub meta: Option<Vec<u8>>,
    /// Bytes of retained records (keys + values of every retained revision, leases, meta).
    pub live_bytes: u64,
    /// Compacted revisions whose records are still in sled, deleted a chunk per batch.
    pub garbage: BTreeSet<Rev>,
}

impl State {
    /// Rebuilds the state from the records in `db`.
    pub(crate) fn load(db: sled::Db, db_gen: u64) -> Result<State> {
        let mut st = State {
            db,
            db_gen,
            index: TreeIndex::new(),
            leases: BTreeMap::new(),
            rev: 1,
            compact: -1,
            lease_counter: 0,
            alarms: BTreeSet::new(),
            meta: None,
            live_bytes: 0,
            garbage: BTreeSet::new(),
        };
        if let Some(v) = st.db.get(revision::META_STATE)? {
            let m = MetaState::decode(&v)?;
            st.live_bytes += v.len() as u64;
            (st.rev, st.compact, st.lease_counter) = (m.rev, m.compact, m.lease_counter);
            st.meta = Some(m.meta);
        }
        for item in st.db.scan_prefix([revision::LEASE_PREFIX]) {
            let (k, v) = item?;
            let id = revision::parse_lease_key(&k)?;
            st.live_bytes += (k.len() + v.len()) as u64;
            st.leases.insert(
                id,
                LeaseEntry {
                    ttl: be_i64(&v)?,
                    keys: BTreeSet::new(),
                },
            );
        }
        for item in st.db.scan_prefix([revision::ALARM_PREFIX]) {
            let (k, _) = item?;
            st.alarms.insert(revision::parse_alarm_key(&k)?);
        }
        for item in st.db.scan_prefix([revision::KV_PREFIX]) {
            let (k, v) = item?;
            let rev = revision::parse_kv_key(&k)?;
            st.live_bytes += (k.len() + v.len()) as u64;
            let r = record::parse(rev, &v)?;
            if !st.index.contains_key(r.key) {
                st.index.insert(r.key.to_vec(), KeyIndex::default());
            }
            let Some(ki) = st.index.get_mut(r.key) else {
                continue;
            };
            load_revision(ki, rev, r.lease, r.create_revision, r.version, r.tombstone);
        }
        st.collect_garbage();
        for (key, ki) in &st.index {
            if ki.live().is_none() || ki.lease == 0 {
                continue;
            }
            match st.leases.get_mut(&ki.lease) {
                Some(lease) => {
                    lease.keys.insert(key.clone());
                }
                // Cannot happen through apply; keep the key readable rather than refuse to open.
                None => {
                    tracing::warn!(key = ?key, lease = ki.lease, "key attached to a missing lease")
                }
            }
        }
        Ok(st)
    }

    /// Finds the records a compaction dropped but a crash kept on disk (the index compaction is
    /// idempotent: nothing is found after a completed one).
    fn collect_garbage(&mut self) {
        if self.compact < 0 {
            return;
        }
        let mut removed = Vec::new();
        self.index
            .retain(|_, ki| !ki.compact(self.compact, &mut removed));
        self.garbage.extend(removed);
    }

    /// The compacted revision as reported to clients (0 before the first compaction).
    pub(crate) fn reported_compact(&self) -> i64 {
        self.compact.max(0)
    }
}

/// Adds one retained record, read in revision order, to a key's index. After a compaction
/// the first retained version of a key need not be its creation, so creation and version come
/// from the record.
fn load_revision(ki: &mut KeyIndex, rev: Rev, lease: i64, created: i64, ver: i64, tomb: bool) {
    match ki.gens.last_mut() {
        Some(g) if !g.closed => {
            g.ver = if tomb { g.ver + 1 } else { ver };
            g.revs.push(rev);
            g.closed = tomb;
        }
        _ => ki.gens.push(Generation {
            created,
            ver,
            revs: vec![rev],
            closed: tomb,
        }),
    }
    ki.lease = if tomb { 0 } else { lease };
}
