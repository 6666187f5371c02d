//! etcd's consistency hashes, computed over etcd's own encoding of the data.
//!
//! # `HashKV` ([`hash_kv`])
//! etcd 3.4's `store.HashByRev`: CRC-32C (Castagnoli) over the bucket name `key`, then every
//! record of etcd's `key` bucket up to the revision, in revision order, as etcd writes it:
//! the revision key (main 8 BE, `_`, sub 8 BE, and `t` for a tombstone) and the
//! `mvccpb.KeyValue` protobuf value (a tombstone holds only its key). Records at or below the
//! compacted revision count only if they are the key's version at the hash revision (etcd's
//! `kvindex.Keep`), and all of them count when no key exists at that revision (etcd's
//! `len(keep) > 0` condition). A store holding the same history as an etcd 3.4 (the same
//! requests from an empty store, the same compactions) gives the same hash, provided the
//! leases attached to the records have the same IDs (k3rs numbers leases granted with ID 0
//! from a counter, etcd picks them at random).
//!
//! One difference remains by construction: etcd deletes compacted records in the background,
//! and while it does, a hash with no key live at its revision counts the records not yet
//! deleted; k3rs hashes as if the deletion had finished.
//!
//! # `Hash` ([`hash_all`])
//! etcd hashes every bucket of its bbolt database (bucket names and key/value pairs, in
//! bbolt's order, skipping `meta/consistent_index`). Two databases of different clusters
//! never match: the `members`, `cluster`, `meta` and `auth` buckets hold member IDs, peer
//! URLs, the cluster version and Raft state. k3rs hashes, the same way, the buckets it holds
//! the data of, in etcd's layout: `alarm` (`AlarmMember` protobuf keys), `key` (every
//! retained record, as in `HashKV` without a revision bound) and `lease` (8-byte BE ID keys,
//! `leasepb.Lease` values). Members of one k3rs cluster that agree give equal hashes; the
//! value is never equal to a real etcd's.

use std::collections::HashSet;

use crate::etcd_layout::{alarm_member_pb, key_value_pb, lease_pb, revision_key};
use crate::record;
use crate::revision::{self, Rev};
use crate::state::State;
use crate::store::Result;
use crate::types::RequestError;

/// What `HashKV` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvHash {
    /// etcd's CRC-32C over the key bucket up to the compared revision.
    pub hash: u32,
    /// The store's current revision (the response header's).
    pub current_revision: i64,
    /// The compacted revision as etcd reports it here: `-1` before the first compaction.
    pub compact_revision: i64,
}

/// etcd's `HashByRev(revision)` (0 = current).
pub(crate) fn hash_kv(st: &State, revision: i64) -> Result<Result<KvHash, RequestError>> {
    if revision > 0 && revision <= st.compact {
        return Ok(Err(RequestError::Compacted {
            compact_revision: st.reported_compact(),
        }));
    }
    if revision > st.rev {
        return Ok(Err(RequestError::FutureRevision));
    }
    let at = if revision == 0 { st.rev } else { revision };
    let keep: HashSet<Rev> = st
        .index
        .values()
        .filter_map(|ki| ki.get(at))
        .map(|k| k.rev)
        .collect();
    let mut h = Crc32c::default();
    h.write(b"key");
    for item in st.db.scan_prefix([revision::KV_PREFIX]) {
        let (k, v) = item?;
        let rev = revision::parse_kv_key(&k)?;
        if rev.main > at {
            break;
        }
        if st.garbage.contains(&rev) {
            continue;
        }
        if rev.main <= st.compact && !keep.is_empty() && !keep.contains(&rev) {
            continue;
        }
        write_record(&mut h, rev, &v)?;
    }
    Ok(Ok(KvHash {
        hash: h.sum(),
        current_revision: st.rev,
        compact_revision: st.compact,
    }))
}

/// etcd's `Hash` over the buckets k3rs holds (see the module docs).
pub(crate) fn hash_all(st: &State) -> Result<u32> {
    let mut h = Crc32c::default();
    h.write(b"alarm");
    let mut alarms: Vec<Vec<u8>> = st
        .alarms
        .iter()
        .map(|a| alarm_member_pb(a.member_id, a.alarm.number()))
        .collect();
    alarms.sort();
    for a in alarms {
        h.write(&a);
    }
    h.write(b"key");
    for item in st.db.scan_prefix([revision::KV_PREFIX]) {
        let (k, v) = item?;
        let rev = revision::parse_kv_key(&k)?;
        if !st.garbage.contains(&rev) {
            write_record(&mut h, rev, &v)?;
        }
    }
    h.write(b"lease");
    // bbolt orders the 8-byte big-endian keys as unsigned numbers.
    let mut leases: Vec<(u64, i64)> = st
        .leases
        .iter()
        .map(|(&id, l)| (id as u64, l.ttl))
        .collect();
    leases.sort();
    for (id, ttl) in leases {
        h.write(&id.to_be_bytes());
        h.write(&lease_pb(id as i64, ttl));
    }
    Ok(h.sum())
}

fn write_record(h: &mut Crc32c, rev: Rev, stored: &[u8]) -> Result<()> {
    let r = record::parse(rev, stored)?;
    h.write(&revision_key(rev.main, rev.sub, r.tombstone));
    let kv = if r.tombstone {
        key_value_pb(r.key, 0, 0, 0, &[], 0)
    } else {
        key_value_pb(
            r.key,
            r.create_revision,
            rev.main,
            r.version,
            r.value,
            r.lease,
        )
    };
    h.write(&kv);
    Ok(())
}

/// Go's `crc32.New(crc32.MakeTable(crc32.Castagnoli))`, written to piece by piece.
#[derive(Default)]
struct Crc32c(u32);

impl Crc32c {
    fn write(&mut self, data: &[u8]) {
        self.0 = crc32c::crc32c_append(self.0, data);
    }

    fn sum(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_is_castagnoli() {
        // The CRC-32C check value (RFC 3720): "123456789" → 0xe3069283.
        let mut h = Crc32c::default();
        h.write(b"1234");
        h.write(b"56789");
        assert_eq!(h.sum(), 0xe306_9283);
    }
}
