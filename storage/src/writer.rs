//! The write side of one `apply_batch`: mutates the in-memory state, collects the records and
//! events of the batch, and turns them with the batch's meta into one sled batch.

use std::collections::BTreeMap;

use crate::keyindex::range_iter;
use crate::range::View;
use crate::reader::{KvReader, Pending};
use crate::record;
use crate::revision::{self, alarm_key, kv_key, lease_key, MetaState, Rev};
use crate::state::State;
use crate::store::Result;
use crate::types::{AlarmMember, KeyValue};
use crate::watch::{EventKind, RawEvent};

/// Applies commands to a [`State`]; nothing reaches sled before the batch of [`Writer::finish`]
/// is written.
pub(crate) struct Writer<'a> {
    pub st: &'a mut State,
    pub pending: Pending,
    /// Lease records to write (`Some(ttl)`) or remove (`None`).
    pub lease_writes: BTreeMap<i64, Option<i64>>,
    /// Alarm records to write (`true`) or remove (`false`).
    pub alarm_writes: BTreeMap<AlarmMember, bool>,
    pub events: Vec<RawEvent>,
    /// Changes made by the current request (the next change's sub revision).
    changes: i64,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(st: &'a mut State) -> Self {
        Writer {
            st,
            pending: Pending::new(),
            lease_writes: BTreeMap::new(),
            alarm_writes: BTreeMap::new(),
            events: Vec::new(),
            changes: 0,
        }
    }

    /// Starts a modifying request.
    pub(crate) fn begin(&mut self) {
        self.changes = 0;
    }

    /// Ends a modifying request: the revision moves only if it changed something.
    pub(crate) fn end(&mut self) {
        if self.changes > 0 {
            self.st.rev += 1;
        }
        self.changes = 0;
    }

    /// The read view inside the current request (sees its earlier writes).
    pub(crate) fn view(&self) -> View<'_> {
        View {
            index: &self.st.index,
            kvs: KvReader::new(&self.st.db, Some(&self.pending)),
            current: self.st.rev + i64::from(self.changes > 0),
            compact: self.st.compact,
        }
    }

    /// The live version of `key` (seeing this batch's writes).
    pub(crate) fn live_kv(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        match self.st.index.get(key).and_then(|ki| ki.live()) {
            Some(k) => Ok(Some(self.view().kvs.must_get(k.rev)?)),
            None => Ok(None),
        }
    }

    fn next_rev(&self) -> Rev {
        Rev::new(self.st.rev + 1, self.changes)
    }

    /// Writes a new version of `key`. The lease must exist (checked by the caller).
    pub(crate) fn put(&mut self, key: &[u8], value: Vec<u8>, lease: i64) {
        let rev = self.next_rev();
        if !self.st.index.contains_key(key) {
            self.st.index.insert(key.to_vec(), Default::default());
        }
        let Some(ki) = self.st.index.get_mut(key) else {
            return;
        };
        // etcd's prev_kv is the key at the revision before this request; a creation has none.
        let before = ki.get(self.st.rev).map(|k| k.rev);
        let old_lease = std::mem::replace(&mut ki.lease, lease);
        let (create_revision, version) = ki.put(rev);
        let prev = if version == 1 { None } else { before };
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision,
            mod_revision: rev.main,
            version,
            value,
            lease,
        };
        let rec = record::encode_put(&kv);
        self.st.live_bytes += (rec.len() + 17) as u64;
        self.pending.insert(rev, rec);
        self.detach(old_lease, key);
        if let Some(l) = self.st.leases.get_mut(&lease) {
            l.keys.insert(key.to_vec());
        }
        self.events.push(RawEvent {
            kind: EventKind::Put,
            kv,
            prev,
        });
        self.changes += 1;
    }

    /// Deletes `key` if it is live; returns whether it was.
    pub(crate) fn delete(&mut self, key: &[u8]) -> bool {
        let rev = self.next_rev();
        let Some(ki) = self.st.index.get_mut(key) else {
            return false;
        };
        if ki.live().is_none() {
            return false;
        }
        let prev = ki.get(self.st.rev).map(|k| k.rev);
        let old_lease = ki.lease;
        ki.tombstone(rev);
        let rec = record::encode_tombstone(key);
        self.st.live_bytes += (rec.len() + 17) as u64;
        self.pending.insert(rev, rec);
        self.detach(old_lease, key);
        let kv = KeyValue {
            key: key.to_vec(),
            mod_revision: rev.main,
            ..KeyValue::default()
        };
        self.events.push(RawEvent {
            kind: EventKind::Delete,
            kv,
            prev,
        });
        self.changes += 1;
        true
    }

    /// The live keys of etcd range `[key, end)`, in key order.
    pub(crate) fn live_keys(&self, key: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
        range_iter(&self.st.index, key, end)
            .filter(|(_, ki)| ki.live().is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn detach(&mut self, lease: i64, key: &[u8]) {
        if lease != 0 {
            if let Some(l) = self.st.leases.get_mut(&lease) {
                l.keys.remove(key);
            }
        }
    }

    /// Drops the record at `rev` (compaction): never written if it is still pending, else
    /// left for [`Writer::finish`] to delete from sled a chunk at a time.
    pub(crate) fn drop_record(&mut self, rev: Rev) {
        match self.pending.remove(&rev) {
            Some(rec) => {
                self.st.live_bytes = self.st.live_bytes.saturating_sub((rec.len() + 17) as u64)
            }
            None => {
                self.st.garbage.insert(rev);
            }
        }
    }

    /// Everything applied so far plus `meta` as one atomic sled batch (which also deletes up to
    /// `gc` compacted records); the caller writes it.
    pub(crate) fn finish(&mut self, meta: &[u8], gc: usize) -> Result<sled::Batch> {
        let mut batch = sled::Batch::default();
        for (rev, rec) in std::mem::take(&mut self.pending) {
            batch.insert(&kv_key(rev)[..], rec);
        }
        for _ in 0..gc {
            let Some(rev) = self.st.garbage.pop_first() else {
                break;
            };
            let key = kv_key(rev);
            let len = self.st.db.get(key)?.map_or(0, |v| v.len() + key.len());
            self.st.live_bytes = self.st.live_bytes.saturating_sub(len as u64);
            batch.remove(&key[..]);
        }
        for (id, ttl) in std::mem::take(&mut self.lease_writes) {
            match ttl {
                Some(ttl) => batch.insert(&lease_key(id)[..], &ttl.to_be_bytes()[..]),
                None => batch.remove(&lease_key(id)[..]),
            }
        }
        for (alarm, raised) in std::mem::take(&mut self.alarm_writes) {
            match raised {
                true => batch.insert(&alarm_key(alarm)[..], &[][..]),
                false => batch.remove(&alarm_key(alarm)[..]),
            }
        }
        let st = &mut *self.st;
        let state = MetaState::encode(st.rev, st.compact, st.lease_counter, meta);
        batch.insert(revision::META_STATE, state);
        let old_meta = st.meta.replace(meta.to_vec()).map_or(0, |m| m.len());
        st.live_bytes = st.live_bytes.saturating_sub(old_meta as u64) + meta.len() as u64;
        Ok(batch)
    }
}
