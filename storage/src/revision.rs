//! Revisions and the on-disk key layout.
//!
//! Everything lives in one sled tree so that one `sled::Batch` commits a whole applied batch
//! atomically. Keys are prefixed by one byte:
//!
//! | prefix | key                       | value                               |
//! |--------|---------------------------|-------------------------------------|
//! | `k`    | main (8 BE) + sub (8 BE)  | one key's state at that revision    |
//! | `l`    | lease id (8 BE, sign-flipped) | granted TTL (8 BE)              |
//! | `m`    | `mstate`                  | counters and the Raft `meta` blob   |
//! | `a`    | member id (8 BE) + alarm type (1) | empty: the alarm is raised  |
//!
//! Revisions are never negative, so big-endian bytes sort like the numbers.

use crate::store::{Error, Result};
use crate::types::{AlarmMember, AlarmType};

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
pub(crate) const ALARM_PREFIX: u8 = b'a';

/// The store's counters and the opaque blob of the last `apply_batch`, in one record so a
/// batch writes one key for them: current revision, compacted revision (raw, `-1` before the
/// first compaction, as in etcd), the counter behind server-chosen lease IDs (8 bytes BE
/// each), then the blob.
pub(crate) const META_STATE: &[u8] = b"mstate";

/// What [`META_STATE`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetaState {
    pub rev: i64,
    pub compact: i64,
    pub lease_counter: u64,
    pub meta: Vec<u8>,
}

impl MetaState {
    pub(crate) fn encode(rev: i64, compact: i64, lease_counter: u64, meta: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(24 + meta.len());
        b.extend_from_slice(&rev.to_be_bytes());
        b.extend_from_slice(&compact.to_be_bytes());
        b.extend_from_slice(&lease_counter.to_be_bytes());
        b.extend_from_slice(meta);
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<MetaState> {
        if b.len() < 24 {
            return Err(Error::Corrupt(format!("state record of {} bytes", b.len())));
        }
        Ok(MetaState {
            rev: be_i64(&b[..8])?,
            compact: be_i64(&b[8..16])?,
            lease_counter: be_i64(&b[16..24])? as u64,
            meta: b[24..].to_vec(),
        })
    }
}

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

/// The sled key of a raised alarm.
pub(crate) fn alarm_key(a: AlarmMember) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[0] = ALARM_PREFIX;
    k[1..9].copy_from_slice(&a.member_id.to_be_bytes());
    k[9] = a.alarm.number();
    k
}

/// Parses what [`alarm_key`] wrote.
pub(crate) fn parse_alarm_key(k: &[u8]) -> Result<AlarmMember> {
    let bad = || Error::Corrupt(format!("bad alarm key {k:?}"));
    if k.len() != 10 || k[0] != ALARM_PREFIX {
        return Err(bad());
    }
    let alarm = AlarmType::from_number(i64::from(k[9])).ok_or_else(bad)?;
    Ok(AlarmMember {
        member_id: be_i64(&k[1..9])? as u64,
        alarm,
    })
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
    fn meta_state_roundtrip() {
        let m = MetaState {
            rev: 9,
            compact: -1,
            lease_counter: 3,
            meta: b"raft".to_vec(),
        };
        assert_eq!(
            MetaState::decode(&MetaState::encode(9, -1, 3, b"raft")).unwrap(),
            m
        );
        assert!(MetaState::decode(&[0; 23]).is_err());
    }

    #[test]
    fn alarm_keys_roundtrip() {
        let a = AlarmMember {
            member_id: u64::MAX,
            alarm: AlarmType::Corrupt,
        };
        assert_eq!(parse_alarm_key(&alarm_key(a)).unwrap(), a);
        let mut bad = alarm_key(a);
        bad[9] = 7;
        assert!(parse_alarm_key(&bad).is_err());
        assert!(parse_alarm_key(b"a1").is_err());
    }

    #[test]
    fn lease_keys_roundtrip_and_sort() {
        for id in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert_eq!(parse_lease_key(&lease_key(id)).unwrap(), id);
        }
        assert!(lease_key(-1) < lease_key(1));
    }
}
