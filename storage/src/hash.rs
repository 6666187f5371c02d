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

use crate::record;
use crate::revision::{self, Rev};
use crate::state::State;
use crate::store::Result;
use crate::types::{AlarmMember, RequestError};

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
    let mut alarms: Vec<Vec<u8>> = st.alarms.iter().map(|&a| alarm_member_pb(a)).collect();
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
        let mut pb = Vec::new();
        varint_field(&mut pb, 1, id);
        varint_field(&mut pb, 2, ttl as u64);
        h.write(&pb);
    }
    Ok(h.sum())
}

fn write_record(h: &mut Crc32c, rev: Rev, stored: &[u8]) -> Result<()> {
    let r = record::parse(rev, stored)?;
    h.write(&etcd_revision_key(rev, r.tombstone));
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

/// A key of etcd's `key` bucket: `main` 8 BE, `_`, `sub` 8 BE, then `t` for a tombstone.
pub(crate) fn etcd_revision_key(rev: Rev, tombstone: bool) -> Vec<u8> {
    let mut k = Vec::with_capacity(18);
    k.extend_from_slice(&rev.main.to_be_bytes());
    k.push(b'_');
    k.extend_from_slice(&rev.sub.to_be_bytes());
    if tombstone {
        k.push(b't');
    }
    k
}

/// `mvccpb.KeyValue` in protobuf as etcd (gogoproto, proto3) marshals it: fields in number
/// order, zero values left out.
pub(crate) fn key_value_pb(
    key: &[u8],
    create_revision: i64,
    mod_revision: i64,
    version: i64,
    value: &[u8],
    lease: i64,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(key.len() + value.len() + 40);
    bytes_field(&mut b, 1, key);
    varint_field(&mut b, 2, create_revision as u64);
    varint_field(&mut b, 3, mod_revision as u64);
    varint_field(&mut b, 4, version as u64);
    bytes_field(&mut b, 5, value);
    varint_field(&mut b, 6, lease as u64);
    b
}

/// `etcdserverpb.AlarmMember` in protobuf (the key of etcd's `alarm` bucket).
fn alarm_member_pb(a: AlarmMember) -> Vec<u8> {
    let mut b = Vec::new();
    varint_field(&mut b, 1, a.member_id);
    varint_field(&mut b, 2, u64::from(a.alarm.number()));
    b
}

fn varint(b: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        b.push((n as u8) | 0x80);
        n >>= 7;
    }
    b.push(n as u8);
}

fn varint_field(b: &mut Vec<u8>, field: u64, n: u64) {
    if n != 0 {
        varint(b, field << 3);
        varint(b, n);
    }
}

fn bytes_field(b: &mut Vec<u8>, field: u64, data: &[u8]) {
    if !data.is_empty() {
        varint(b, (field << 3) | 2);
        varint(b, data.len() as u64);
        b.extend_from_slice(data);
    }
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
    fn revision_keys_as_etcd_writes_them() {
        assert_eq!(
            etcd_revision_key(Rev::new(2, 1), false),
            b"\0\0\0\0\0\0\0\x02_\0\0\0\0\0\0\0\x01".to_vec()
        );
        assert_eq!(etcd_revision_key(Rev::new(300, 0), true).len(), 18);
        assert_eq!(etcd_revision_key(Rev::new(300, 0), true)[17], b't');
    }

    #[test]
    fn key_value_protobuf_leaves_zero_fields_out() {
        // etcd's KeyValue{Key: "foo", CreateRevision: 2, ModRevision: 2, Version: 1,
        // Value: "bar"}: tags 0x0a, 0x10, 0x18, 0x20, 0x2a.
        assert_eq!(
            key_value_pb(b"foo", 2, 2, 1, b"bar", 0),
            b"\x0a\x03foo\x10\x02\x18\x02\x20\x01\x2a\x03bar".to_vec()
        );
        assert_eq!(key_value_pb(b"k", 0, 0, 0, &[], 0), b"\x0a\x01k".to_vec());
        // A 300 lease: varint 0xac 0x02 under tag 0x30; negative numbers take 10 bytes.
        assert_eq!(
            key_value_pb(b"", 0, 0, 0, &[], 300),
            b"\x30\xac\x02".to_vec()
        );
        assert_eq!(key_value_pb(b"", 0, 0, 0, &[], -1).len(), 11);
    }

    #[test]
    fn crc32c_is_castagnoli() {
        // The CRC-32C check value (RFC 3720): "123456789" → 0xe3069283.
        let mut h = Crc32c::default();
        h.write(b"1234");
        h.write(b"56789");
        assert_eq!(h.sum(), 0xe306_9283);
    }
}
