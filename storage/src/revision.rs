//! Revisions and the on-disk key layout.
//!
//! Everything lives in one sled tree so that one `sled::Batch` commits a whole applied batch
//! atomically. Keys are prefixed by one byte:
//!
//! | prefix | key                       | value                               |
//! |--------|---------------------------|-------------------------------------|
//! | `k`    | main (8 BE) + sub (8 BE)  | one key's state at that revision    |
//! | `l`    | lease id (8 BE, sign-flipped) | granted TTL (8 BE)              |
//! | `m`    | name                      | counters and the Raft `meta` blob   |
//!
//! Revisions are never negative, so big-endian bytes sort like the numbers.

use crate::store::{Error, Result};

/// A revision: the store revision of the request (`main`) and the index of the change inside
/// it (`sub`), like etcd's `revision{main, sub}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Rev {
    pub main: i64,
    pub sub: i64,
}

impl Rev {
    pub(crate) const fn new(main: i64, sub: i64) -> Rev {
        Rev { main, sub }
    }
}

pub(crate) const KV_PREFIX: u8 = b'k';
pub(crate) const LEASE_PREFIX: u8 = b'l';

/// Current store revision.
pub(crate) const META_REVISION: &[u8] = b"mrevision";
/// Compacted revision (raw, `-1` before the first compaction, as in etcd).
pub(crate) const META_COMPACT: &[u8] = b"mcompact";
/// Counter behind server-chosen lease IDs.
pub(crate) const META_LEASE_COUNTER: &[u8] = b"mlease_counter";
/// The opaque blob of the last `apply_batch`.
pub(crate) const META_APPLIED: &[u8] = b"mapplied";

/// The sled key of the record at `rev`.
pub(crate) fn kv_key(rev: Rev) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = KV_PREFIX;
    k[1..9].copy_from_slice(&rev.main.to_be_bytes());
    k[9..17].copy_from_slice(&rev.sub.to_be_bytes());
    k
}

/// Parses what [`kv_key`] wrote.
pub(crate) fn parse_kv_key(k: &[u8]) -> Result<Rev> {
    if k.len() != 17 || k[0] != KV_PREFIX {
        return Err(Error::Corrupt(format!("bad revision key {k:?}")));
    }
    Ok(Rev::new(be_i64(&k[1..9])?, be_i64(&k[9..17])?))
}

/// The sled key of lease `id`.
pub(crate) fn lease_key(id: i64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = LEASE_PREFIX;
    k[1..9].copy_from_slice(&((id as u64) ^ (1 << 63)).to_be_bytes());
    k
}

/// Parses what [`lease_key`] wrote.
pub(crate) fn parse_lease_key(k: &[u8]) -> Result<i64> {
    if k.len() != 9 || k[0] != LEASE_PREFIX {
        return Err(Error::Corrupt(format!("bad lease key {k:?}")));
    }
    Ok((be_i64(&k[1..9])? as u64 ^ (1 << 63)) as i64)
}

/// Reads a big-endian i64 from exactly 8 bytes.
pub(crate) fn be_i64(b: &[u8]) -> Result<i64> {
    let a: [u8; 8] = b
        .try_into()
        .map_err(|_| Error::Corrupt(format!("expected 8 bytes, got {}", b.len())))?;
    Ok(i64::from_be_bytes(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_keys_sort_like_revisions() {
        let a = kv_key(Rev::new(2, 300));
        let b = kv_key(Rev::new(3, 0));
        assert!(a < b);
        assert_eq!(parse_kv_key(&a).unwrap(), Rev::new(2, 300));
        assert!(parse_kv_key(b"k12").is_err());
    }

    #[test]
    fn lease_keys_roundtrip_and_sort() {
        for id in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert_eq!(parse_lease_key(&lease_key(id)).unwrap(), id);
        }
        assert!(lease_key(-1) < lease_key(1));
    }
}
