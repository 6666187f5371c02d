//! Encoding of one key's state at one revision (the value of a `k` record).
//!
//! Layout: `flags u8` (bit 0 = tombstone), `create_revision i64`, `version i64`, `lease i64`,
//! `key length u32`, key bytes, value bytes; integers big-endian. The mod revision is the
//! record's sled key.

use crate::revision::{be_i64, Rev};
use crate::store::{Error, Result};
use crate::types::KeyValue;

const HEADER: usize = 1 + 8 + 8 + 8 + 4;
const TOMBSTONE: u8 = 1;

/// Encodes a live key-value (its `mod_revision` is not stored).
pub(crate) fn encode_put(kv: &KeyValue) -> Vec<u8> {
    encode(
        0,
        kv.create_revision,
        kv.version,
        kv.lease,
        &kv.key,
        &kv.value,
    )
}

/// Encodes the tombstone of `key`.
pub(crate) fn encode_tombstone(key: &[u8]) -> Vec<u8> {
    encode(TOMBSTONE, 0, 0, 0, key, &[])
}

fn encode(flags: u8, create: i64, version: i64, lease: i64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + key.len() + value.len());
    b.push(flags);
    b.extend_from_slice(&create.to_be_bytes());
    b.extend_from_slice(&version.to_be_bytes());
    b.extend_from_slice(&lease.to_be_bytes());
    b.extend_from_slice(&(key.len() as u32).to_be_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b
}

/// A record, borrowed from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordRef<'a> {
    pub tombstone: bool,
    pub create_revision: i64,
    pub version: i64,
    pub lease: i64,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Parses a record without copying (what the key index needs on open).
pub(crate) fn parse(rev: Rev, b: &[u8]) -> Result<RecordRef<'_>> {
    let corrupt = |what: &str| Error::Corrupt(format!("record at {rev:?}: {what}"));
    let (head, rest) = b
        .split_at_checked(HEADER)
        .ok_or_else(|| corrupt("truncated"))?;
    let key_len = u32::from_be_bytes([head[25], head[26], head[27], head[28]]) as usize;
    let (key, value) = rest
        .split_at_checked(key_len)
        .ok_or_else(|| corrupt("key overruns record"))?;
    Ok(RecordRef {
        tombstone: head[0] & TOMBSTONE != 0,
        create_revision: be_i64(&head[1..9])?,
        version: be_i64(&head[9..17])?,
        lease: be_i64(&head[17..25])?,
        key,
        value,
    })
}

/// A decoded record: the key-value (a tombstone has version 0) and whether it is a tombstone.
pub(crate) fn decode(rev: Rev, b: &[u8]) -> Result<(KeyValue, bool)> {
    let r = parse(rev, b)?;
    let kv = KeyValue {
        key: r.key.to_vec(),
        create_revision: r.create_revision,
        mod_revision: rev.main,
        version: r.version,
        value: r.value.to_vec(),
        lease: r.lease,
    };
    Ok((kv, r.tombstone))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let kv = KeyValue {
            key: b"a".to_vec(),
            create_revision: 2,
            mod_revision: 5,
            version: 3,
            value: b"xyz".to_vec(),
            lease: -7,
        };
        let (back, tomb) = decode(Rev::new(5, 1), &encode_put(&kv)).unwrap();
        assert_eq!((back, tomb), (kv, false));
        let (t, tomb) = decode(Rev::new(6, 0), &encode_tombstone(b"a")).unwrap();
        assert!(tomb);
        assert_eq!(t.key, b"a");
        assert_eq!(t.mod_revision, 6);
        assert_eq!(
            parse(Rev::new(6, 0), &encode_tombstone(b"ab")).unwrap().key,
            b"ab"
        );
        assert!(decode(Rev::new(1, 0), &[1, 2]).is_err());
    }
}
