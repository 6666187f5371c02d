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

/// A decoded record: the key-value (a tombstone has version 0) and whether it is a tombstone.
pub(crate) fn decode(rev: Rev, b: &[u8]) -> Result<(KeyValue, bool)> {
    if b.len() < HEADER {
        return Err(Error::Corrupt(format!(
            "record at {rev:?} is {} bytes",
            b.len()
        )));
    }
    let key_len = u32::from_be_bytes([b[25], b[26], b[27], b[28]]) as usize;
    let Some(rest) = b.get(HEADER..) else {
        return Err(Error::Corrupt(format!("record at {rev:?} truncated")));
    };
    if rest.len() < key_len {
        return Err(Error::Corrupt(format!(
            "record at {rev:?}: key overruns record"
        )));
    }
    let tombstone = b[0] & TOMBSTONE != 0;
    let kv = KeyValue {
        key: rest[..key_len].to_vec(),
        create_revision: be_i64(&b[1..9])?,
        mod_revision: rev.main,
        version: be_i64(&b[9..17])?,
        value: rest[key_len..].to_vec(),
        lease: be_i64(&b[17..25])?,
    };
    Ok((kv, tombstone))
}

/// Whether a record is a tombstone (an empty record is not).
pub(crate) fn is_tombstone(b: &[u8]) -> bool {
    b.first().is_some_and(|f| f & TOMBSTONE != 0)
}

/// Only the key of a record (cheaper than [`decode`] when filtering watch history).
pub(crate) fn decode_key(rev: Rev, b: &[u8]) -> Result<&[u8]> {
    if b.len() < HEADER {
        return Err(Error::Corrupt(format!(
            "record at {rev:?} is {} bytes",
            b.len()
        )));
    }
    let key_len = u32::from_be_bytes([b[25], b[26], b[27], b[28]]) as usize;
    b.get(HEADER..HEADER + key_len)
        .ok_or_else(|| Error::Corrupt(format!("record at {rev:?}: key overruns record")))
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
            decode_key(Rev::new(6, 0), &encode_tombstone(b"ab")).unwrap(),
            b"ab"
        );
        assert!(decode(Rev::new(1, 0), &[1, 2]).is_err());
    }
}
