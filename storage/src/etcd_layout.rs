//! etcd's on-disk encoding of the records k3rs holds, as etcd's bbolt backend stores them:
//! the keys and values of the `key`, `lease` and `alarm` buckets. Used to compute etcd's
//! hashes ([`crate::hash`]) and to write etcd-format snapshots.
//!
//! Protobuf messages are encoded as etcd's gogoproto (proto3) marshals them: fields in number
//! order, zero values left out.

/// Bytes of a revision key (etcd's `revBytesLen`); a tombstone's has one more, `t`.
pub const REV_BYTES_LEN: usize = 17;
const TOMBSTONE_MARK: u8 = b't';

/// A key of etcd's `key` bucket: `main` 8 BE, `_`, `sub` 8 BE, then `t` for a tombstone.
pub fn revision_key(main: i64, sub: i64, tombstone: bool) -> Vec<u8> {
    let mut k = Vec::with_capacity(REV_BYTES_LEN + 1);
    k.extend_from_slice(&main.to_be_bytes());
    k.push(b'_');
    k.extend_from_slice(&sub.to_be_bytes());
    if tombstone {
        k.push(TOMBSTONE_MARK);
    }
    k
}

/// Parses a key of etcd's `key` bucket: (main, sub, tombstone).
pub fn parse_revision_key(b: &[u8]) -> Option<(i64, i64, bool)> {
    let tombstone = match b.len() {
        REV_BYTES_LEN => false,
        n if n == REV_BYTES_LEN + 1 && b[REV_BYTES_LEN] == TOMBSTONE_MARK => true,
        _ => return None,
    };
    if b[8] != b'_' {
        return None;
    }
    let main = i64::from_be_bytes(b[0..8].try_into().ok()?);
    let sub = i64::from_be_bytes(b[9..17].try_into().ok()?);
    Some((main, sub, tombstone))
}

/// `mvccpb.KeyValue` (a value of the `key` bucket; a tombstone's holds only the key).
pub fn key_value_pb(
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

/// `leasepb.Lease {ID, TTL}` (a value of the `lease` bucket, whose key is the ID 8 BE).
pub fn lease_pb(id: i64, ttl: i64) -> Vec<u8> {
    let mut b = Vec::new();
    varint_field(&mut b, 1, id as u64);
    varint_field(&mut b, 2, ttl as u64);
    b
}

/// `etcdserverpb.AlarmMember {MemberID, Alarm}` (a key of the `alarm` bucket; its value is
/// empty). `alarm` is the `AlarmType` number.
pub fn alarm_member_pb(member_id: u64, alarm: u8) -> Vec<u8> {
    let mut b = Vec::new();
    varint_field(&mut b, 1, member_id);
    varint_field(&mut b, 2, u64::from(alarm));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_keys_as_etcd_writes_them() {
        assert_eq!(
            revision_key(5, 2, false),
            [0, 0, 0, 0, 0, 0, 0, 5, b'_', 0, 0, 0, 0, 0, 0, 0, 2]
        );
        assert_eq!(revision_key(300, 0, true).len(), 18);
        assert_eq!(revision_key(300, 0, true)[17], b't');
        assert_eq!(
            parse_revision_key(&revision_key(9, 1, true)),
            Some((9, 1, true))
        );
        assert_eq!(
            parse_revision_key(&revision_key(9, 1, false)),
            Some((9, 1, false))
        );
        assert_eq!(parse_revision_key(b"short"), None);
        let mut bad = revision_key(9, 1, false);
        bad[8] = b'-';
        assert_eq!(parse_revision_key(&bad), None);
        let mut bad = revision_key(9, 1, true);
        bad[17] = b'x';
        assert_eq!(parse_revision_key(&bad), None);
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
    fn lease_and_alarm_messages() {
        assert_eq!(lease_pb(7, 90), b"\x08\x07\x10\x5a".to_vec());
        assert_eq!(lease_pb(0, 0), Vec::<u8>::new());
        // AlarmMember{MemberID: 1, Alarm: NOSPACE (1)}.
        assert_eq!(alarm_member_pb(1, 1), b"\x08\x01\x10\x01".to_vec());
    }
}
