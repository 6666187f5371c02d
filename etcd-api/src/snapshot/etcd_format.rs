//! etcd's v3 backend layout (etcd 3.4/3.5 `mvcc/kvstore.go`, `mvcc/revision.go`,
//! `lease/lessor.go`, `etcdserver/api/membership/store.go`) in a bbolt file: what
//! `etcdctl snapshot save` writes and `etcdctl snapshot restore` reads.
//!
//! | bucket | key | value |
//! |---|---|---|
//! | `key` | revision: main (8 BE) `_` sub (8 BE), plus `t` for a tombstone | `mvccpb.KeyValue` (a tombstone: only the key) |
//! | `meta` | `consistent_index`; `finishedCompactRev`, `scheduledCompactRev` | 8 BE; revision bytes of `{compact, 0}` |
//! | `lease` | lease ID (8 BE) | `leasepb.Lease {ID, TTL}` |
//! | `cluster` | `clusterVersion` | `3.4.0` |
//! | `auth` | `authRevision` | 8 BE (1) |
//! | `alarm` | `etcdserverpb.AlarmMember` of each raised alarm | empty |
//! | `authRoles`, `authUsers`, `members`, `members_removed` | | empty |
//!
//! # Written
//! Every retained revision of every key (compacted ones are gone, as in etcd), tombstones,
//! leases (granted TTL), the compacted revision, the raised alarms. Members are not written: `etcdctl snapshot
//! restore` replaces them with the restored cluster's anyway. 3.5's `term` and `confState`
//! meta keys are not written (3.5 reads a 3.4 file without them).
//!
//! # Read
//! `key`, `meta` (compaction) and `lease`; other buckets are ignored (alarms too: they name
//! members of the cluster the snapshot came from). The current revision is
//! the newest record's, or the compacted revision if later (as etcd restores it).
//!
//! A snapshot file is the database followed by the sha256 of it (32 bytes) when its size
//! modulo 512 is 32, as etcdctl decides; the trailer is checked when present.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use k3rs_bbolt::Database;
use k3rs_datastore::mvccpb;
use k3rs_storage::etcd_layout::{
    alarm_member_pb, key_value_pb, lease_pb, parse_revision_key, revision_key,
};
use k3rs_storage::{AlarmType, HistoryRecord, HistoryState, KeyValue, Store};
use prost::Message;
use sha2::{Digest, Sha256};

/// etcd's bucket of key revisions.
pub const KEY_BUCKET: &[u8] = b"key";
/// etcd's bucket of backend metadata.
pub const META_BUCKET: &[u8] = b"meta";
/// etcd's bucket of leases.
pub const LEASE_BUCKET: &[u8] = b"lease";
/// The `meta` key of the last applied Raft index.
pub const CONSISTENT_INDEX: &[u8] = b"consistent_index";
/// The `meta` key of the last finished compaction's revision.
pub const FINISHED_COMPACT: &[u8] = b"finishedCompactRev";
/// The `meta` key of the last scheduled compaction's revision.
pub const SCHEDULED_COMPACT: &[u8] = b"scheduledCompactRev";
/// The cluster version written into the `cluster` bucket.
pub const CLUSTER_VERSION: &[u8] = b"3.4.0";
/// Length of the sha256 trailer of a snapshot file.
pub const SHA256_LEN: u64 = 32;
/// etcdctl recognizes the trailer by `size % 512 == 32`.
pub const TRAILER_ALIGN: u64 = 512;

/// etcd's `leasepb.Lease`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseRecord {
    /// The lease id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// The granted TTL in seconds.
    #[prost(int64, tag = "2")]
    pub ttl: i64,
    /// The TTL left when it was written (etcd writes 0 unless checkpointing).
    #[prost(int64, tag = "3")]
    pub remaining_ttl: i64,
}

/// Why an etcd-format snapshot could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The bbolt file is unreadable or could not be written.
    #[error(transparent)]
    Bbolt(#[from] k3rs_bbolt::Error),
    /// The store could not be read or loaded.
    #[error("reading the store: {0}")]
    Store(#[from] k3rs_storage::Error),
    /// Reading or writing the snapshot file failed.
    #[error("snapshot i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The sha256 trailer does not match the database.
    #[error("sha256 mismatch: the snapshot is corrupt or truncated")]
    Sha256Mismatch,
    /// A record that is not in etcd's encoding.
    #[error("bucket {bucket}, key {key:?}: {reason}")]
    Record {
        /// Its bucket.
        bucket: &'static str,
        /// Its key.
        key: Vec<u8>,
        /// What is wrong with it.
        reason: String,
    },
    /// The database has no `key` bucket.
    #[error("no `key` bucket: not an etcd v3 backend")]
    NoKeyBucket,
}

/// A store's history read from an etcd database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdHistory {
    /// Revision, compacted revision and leases.
    pub state: HistoryState,
    /// Every key revision, in revision order.
    pub records: Vec<HistoryRecord>,
}

/// Writes `store`'s whole retained history as an etcd bbolt database at the start of `out`
/// (which should be empty); returns the revision it holds.
pub fn write_db(store: &Store, out: &mut File, consistent_index: u64) -> Result<i64, FormatError> {
    let mut w = k3rs_bbolt::Writer::new(BufWriter::with_capacity(1 << 16, &mut *out))?;
    let mut alarms: Vec<Vec<u8>> = store
        .alarms(AlarmType::None)
        .iter()
        .map(|a| alarm_member_pb(a.member_id, a.alarm.number()))
        .collect();
    alarms.sort();
    let alarms = alarms.iter().map(|k| (&k[..], Vec::new())).collect();
    for (bucket, entries) in [
        (&b"alarm"[..], alarms),
        (
            b"auth",
            vec![(&b"authRevision"[..], 1u64.to_be_bytes().to_vec())],
        ),
        (b"authRoles", vec![]),
        (b"authUsers", vec![]),
        (
            b"cluster",
            vec![(&b"clusterVersion"[..], CLUSTER_VERSION.to_vec())],
        ),
    ] {
        put_all(&mut w, bucket, &entries)?;
    }
    let mut keys = w.bucket(KEY_BUCKET)?;
    let state = store.export_history(&mut |r: HistoryRecord| -> Result<(), FormatError> {
        let kv = if r.tombstone {
            key_value_pb(&r.kv.key, 0, 0, 0, &[], 0)
        } else {
            key_value_pb(
                &r.kv.key,
                r.kv.create_revision,
                r.kv.mod_revision,
                r.kv.version,
                &r.kv.value,
                r.kv.lease,
            )
        };
        keys.put(&revision_key(r.main, r.sub, r.tombstone), &kv)?;
        Ok(())
    })?;
    keys.finish()?;
    let mut leases = w.bucket(LEASE_BUCKET)?;
    for &(id, ttl) in &state.leases {
        leases.put(&id.to_be_bytes(), &lease_pb(id, ttl))?;
    }
    leases.finish()?;
    put_all(&mut w, b"members", &[])?;
    put_all(&mut w, b"members_removed", &[])?;
    let mut meta = vec![(CONSISTENT_INDEX, consistent_index.to_be_bytes().to_vec())];
    if state.compact_revision > 0 {
        let compact = revision_key(state.compact_revision, 0, false);
        meta.push((FINISHED_COMPACT, compact.clone()));
        meta.push((SCHEDULED_COMPACT, compact));
    }
    meta.sort();
    put_all(&mut w, META_BUCKET, &meta)?;
    w.finish()?.flush()?;
    Ok(state.revision)
}

fn put_all<W: Write + Seek>(
    w: &mut k3rs_bbolt::Writer<W>,
    bucket: &[u8],
    entries: &[(&[u8], Vec<u8>)],
) -> Result<(), FormatError> {
    let mut b = w.bucket(bucket)?;
    for (k, v) in entries {
        b.put(k, v)?;
    }
    b.finish()?;
    Ok(())
}

/// Writes a snapshot file as `etcdctl snapshot save` leaves it: the database, then its sha256.
/// Returns the revision it holds.
pub fn write_snapshot(
    store: &Store,
    out: &mut File,
    consistent_index: u64,
) -> Result<i64, FormatError> {
    let revision = write_db(store, out, consistent_index)?;
    let len = out.seek(SeekFrom::End(0))?;
    out.seek(SeekFrom::Start(0))?;
    let mut h = Sha256::new();
    std::io::copy(&mut BufReader::new(&mut *out).take(len), &mut h)?;
    out.seek(SeekFrom::Start(len))?;
    out.write_all(&h.finalize())?;
    out.flush()?;
    Ok(revision)
}

/// Whether `head` (the first bytes of a file) is a bbolt database: its first meta page's magic.
pub fn is_bbolt(head: &[u8]) -> bool {
    head.get(16..20) == Some(&k3rs_bbolt::page::MAGIC.to_le_bytes()[..])
}

/// Checks and strips the sha256 trailer when the size says there is one (as etcdctl does).
pub fn strip_trailer(mut data: Vec<u8>) -> Result<Vec<u8>, FormatError> {
    let len = data.len() as u64;
    if len % TRAILER_ALIGN == SHA256_LEN {
        let body = (len - SHA256_LEN) as usize;
        if Sha256::digest(&data[..body]).as_slice() != &data[body..] {
            return Err(FormatError::Sha256Mismatch);
        }
        data.truncate(body);
    }
    Ok(data)
}

/// Reads a snapshot file's bytes (trailer checked if present) into a history.
pub fn read_snapshot(data: Vec<u8>) -> Result<EtcdHistory, FormatError> {
    let db = Database::parse(strip_trailer(data)?)?;
    read_db(&db)
}

/// The history an etcd database holds.
pub fn read_db(db: &Database) -> Result<EtcdHistory, FormatError> {
    let keys = db.bucket(KEY_BUCKET)?.ok_or(FormatError::NoKeyBucket)?;
    let mut records = Vec::new();
    let mut failed = None;
    keys.for_each(&mut |e| {
        match history_record(e.key, e.value) {
            Ok(r) => records.push(r),
            Err(err) => {
                failed.get_or_insert(err);
            }
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut compact = -1;
    if let Some(meta) = db.bucket(META_BUCKET)? {
        for (k, v) in meta.entries()? {
            if k == FINISHED_COMPACT || k == SCHEDULED_COMPACT {
                let (main, _, _) = parse_revision_key(&v).ok_or_else(|| FormatError::Record {
                    bucket: "meta",
                    key: k.clone(),
                    reason: "not a revision".into(),
                })?;
                compact = compact.max(main);
            }
        }
    }
    let mut leases = Vec::new();
    if let Some(bucket) = db.bucket(LEASE_BUCKET)? {
        for (k, v) in bucket.entries()? {
            let lease = LeaseRecord::decode(v.as_slice()).map_err(|e| FormatError::Record {
                bucket: "lease",
                key: k.clone(),
                reason: e.to_string(),
            })?;
            leases.push((lease.id, lease.ttl));
        }
    }
    leases.sort();
    let newest = records.iter().map(|r| r.main).max().unwrap_or(1);
    Ok(EtcdHistory {
        state: HistoryState {
            revision: newest.max(compact).max(1),
            compact_revision: compact,
            leases,
        },
        records,
    })
}

/// One `key` bucket entry as a history record.
fn history_record(key: &[u8], value: &[u8]) -> Result<HistoryRecord, FormatError> {
    let bad = |reason: String| FormatError::Record {
        bucket: "key",
        key: key.to_vec(),
        reason,
    };
    let (main, sub, tombstone) =
        parse_revision_key(key).ok_or_else(|| bad("not a revision".into()))?;
    let kv = mvccpb::KeyValue::decode(value).map_err(|e| bad(e.to_string()))?;
    if kv.key.is_empty() {
        return Err(bad("a record without a key".into()));
    }
    let kv = if tombstone {
        KeyValue {
            key: kv.key,
            mod_revision: main,
            ..Default::default()
        }
    } else {
        KeyValue {
            key: kv.key,
            create_revision: kv.create_revision,
            mod_revision: main,
            version: kv.version,
            value: kv.value,
            lease: kv.lease,
        }
    };
    Ok(HistoryRecord {
        main,
        sub,
        tombstone,
        kv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_storage::{Command, DeleteRangeRequest, PutRequest};

    fn put(key: &str, value: &str, lease: i64) -> Command {
        Command::Put(PutRequest {
            key: key.into(),
            value: value.into(),
            lease,
            ..Default::default()
        })
    }

    /// A store with overwrites, a delete, a lease with a key and a compaction.
    fn populated() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("sm")).unwrap();
        let del = Command::DeleteRange(DeleteRangeRequest {
            key: b"b".to_vec(),
            ..Default::default()
        });
        for cmds in [
            vec![Command::LeaseGrant { id: 7, ttl: 90 }],
            vec![put("a", "1", 0)],
            vec![put("a", "2", 0), put("b", "x", 7)],
            vec![del],
            vec![Command::Compact { revision: 3 }],
            vec![put("c", &"z".repeat(9000), 7)],
        ] {
            store.apply_batch(&cmds, b"m").unwrap();
        }
        (tmp, store)
    }

    #[test]
    fn written_snapshot_reads_back_as_the_same_history() {
        let (_tmp, store) = populated();
        let raise = |member_id, alarm| Command::Alarm {
            action: k3rs_storage::AlarmAction::Activate,
            member_id,
            alarm,
        };
        store
            .apply_batch(
                &[raise(9, AlarmType::Corrupt), raise(2, AlarmType::Nospace)],
                b"m",
            )
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let path = out.path().join("snap");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        assert_eq!(write_snapshot(&store, &mut f, 42).unwrap(), 6);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len() % 4096, 32);

        let db = Database::parse(strip_trailer(data.clone()).unwrap()).unwrap();
        db.check().unwrap();
        let names: Vec<String> = db
            .bucket_names()
            .unwrap()
            .into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "alarm",
                "auth",
                "authRoles",
                "authUsers",
                "cluster",
                "key",
                "lease",
                "members",
                "members_removed",
                "meta"
            ]
        );
        let alarms = db.bucket(b"alarm").unwrap().unwrap().entries().unwrap();
        assert_eq!(
            alarms,
            vec![
                (b"\x08\x02\x10\x01".to_vec(), vec![]),
                (b"\x08\x09\x10\x02".to_vec(), vec![]),
            ]
        );
        let meta = db.bucket(META_BUCKET).unwrap().unwrap().entries().unwrap();
        assert_eq!(
            meta,
            vec![
                (CONSISTENT_INDEX.to_vec(), 42u64.to_be_bytes().to_vec()),
                (FINISHED_COMPACT.to_vec(), revision_key(3, 0, false)),
                (SCHEDULED_COMPACT.to_vec(), revision_key(3, 0, false)),
            ]
        );
        let keys = db.bucket(KEY_BUCKET).unwrap().unwrap().entries().unwrap();
        let revs: Vec<Vec<u8>> = keys.iter().map(|(k, _)| k.clone()).collect();
        // a@3 survives the compaction at 3 (a@2 does not), then b, b's tombstone and c.
        assert_eq!(
            revs,
            [
                revision_key(3, 0, false),
                revision_key(4, 0, false),
                revision_key(5, 0, true),
                revision_key(6, 0, false)
            ]
        );
        let b = mvccpb::KeyValue::decode(keys[1].1.as_slice()).unwrap();
        assert_eq!(
            (
                b.key.as_slice(),
                b.create_revision,
                b.mod_revision,
                b.version,
                b.lease
            ),
            (&b"b"[..], 4, 4, 1, 7)
        );
        let tomb = mvccpb::KeyValue::decode(keys[2].1.as_slice()).unwrap();
        assert_eq!(
            tomb,
            mvccpb::KeyValue {
                key: b"b".to_vec(),
                ..Default::default()
            }
        );
        let lease = db.bucket(LEASE_BUCKET).unwrap().unwrap().entries().unwrap();
        assert_eq!(lease[0].0, 7i64.to_be_bytes());
        assert_eq!(
            LeaseRecord::decode(lease[0].1.as_slice()).unwrap(),
            LeaseRecord {
                id: 7,
                ttl: 90,
                remaining_ttl: 0
            }
        );

        // Read back: the same records and state as the store exports.
        let history = read_snapshot(data.clone()).unwrap();
        let mut expected = Vec::new();
        let state = store
            .export_history(&mut |r| {
                expected.push(r);
                Ok::<_, k3rs_storage::Error>(())
            })
            .unwrap();
        assert_eq!(history.state, state);
        assert_eq!(history.records, expected);

        // A flipped byte fails the trailer; without the trailer the pages are still read.
        let mut bad = data.clone();
        bad[4096 * 3 + 40] ^= 1;
        assert!(matches!(
            read_snapshot(bad),
            Err(FormatError::Sha256Mismatch)
        ));
        let bare = data[..data.len() - 32].to_vec();
        assert_eq!(read_snapshot(bare).unwrap(), history);
    }

    #[test]
    fn a_database_without_a_key_bucket_is_refused() {
        let mut w = k3rs_bbolt::Writer::new(std::io::Cursor::new(Vec::new())).unwrap();
        w.bucket(b"other").unwrap().finish().unwrap();
        let data = w.finish().unwrap().into_inner();
        assert!(is_bbolt(&data));
        assert!(matches!(read_snapshot(data), Err(FormatError::NoKeyBucket)));
        assert!(!is_bbolt(b"K3RSSNAP"));
    }
}
