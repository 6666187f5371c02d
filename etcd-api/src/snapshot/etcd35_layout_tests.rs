//! `--cluster-reset-restore-path` with a snapshot in etcd 3.5's layout (k3s's embedded etcd is
//! 3.5), built bucket by bucket as etcd 3.5 writes its backend (`server/mvcc/buckets/bucket.go`:
//! `key`, `meta`, `lease`, `alarm`, `cluster`, `members`, `members_removed`, `auth`,
//! `authUsers`, `authRoles`), with what 3.5 adds over 3.4: the `term` and `confState` meta
//! keys, the cluster version 3.5.0 and the `downgrade` record. No etcd 3.5 binary is at hand,
//! so this checks the layout; the bbolt pages themselves are checked against a real etcd 3.4
//! snapshot (`bbolt/src/tests.rs`) and the restore end to end with etcd 3.4
//! (`tests/etcd/etcd_snapshot_interop.rs`).

use std::io::Write;

use k3rs_storage::etcd_layout::{alarm_member_pb, key_value_pb, lease_pb, revision_key};
use k3rs_storage::{HistoryRecord, KeyValue, Store};
use sha2::{Digest, Sha256};

use super::{etcd_format, restore};

/// A protobuf length-delimited field.
fn bytes_field(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut b = vec![(tag << 3) | 2, value.len() as u8];
    b.extend_from_slice(value);
    b
}

/// etcd 3.5's backend of a k3s server: a namespace, a secret overwritten once, a deleted
/// configmap, a lease with a key on it, compacted at revision 3; an alarm, a removed member
/// and the root user and role (3.5 keeps them even with auth off).
fn etcd35_database() -> Vec<u8> {
    let mut w = k3rs_bbolt::Writer::new(std::io::Cursor::new(Vec::new())).unwrap();
    let mut put = |bucket: &[u8], entries: &[(Vec<u8>, Vec<u8>)]| {
        let mut b = w.bucket(bucket).unwrap();
        for (k, v) in entries {
            b.put(k, v).unwrap();
        }
        b.finish().unwrap();
    };
    // Buckets in name order, as bbolt keeps its root.
    put(
        b"alarm",
        &[(alarm_member_pb(0x8e9e05c52164694d, 1), vec![])],
    );
    put(
        b"auth",
        &[
            (b"authEnabled".to_vec(), vec![0]),
            (b"authRevision".to_vec(), 2u64.to_be_bytes().to_vec()),
        ],
    );
    put(b"authRoles", &[(b"root".to_vec(), bytes_field(1, b"root"))]);
    let mut user = bytes_field(1, b"root");
    user.extend(bytes_field(2, b"$2a$10$abcdefghijklmnopqrstuv"));
    user.extend(bytes_field(3, b"root"));
    put(b"authUsers", &[(b"root".to_vec(), user)]);
    put(
        b"cluster",
        &[
            (b"clusterVersion".to_vec(), b"3.5.0".to_vec()),
            (
                b"downgrade".to_vec(),
                br#"{"target-version":"","enabled":false}"#.to_vec(),
            ),
        ],
    );
    let secret = b"/registry/secrets/default/token".to_vec();
    let ns = b"/registry/namespaces/prod".to_vec();
    let cm = b"/registry/configmaps/default/gone".to_vec();
    let leased = b"/registry/leases/kube-system/k3s".to_vec();
    put(
        b"key",
        &[
            // Revision 2 (compacted away under revision 3 for `secret`) is not kept.
            (
                revision_key(3, 0, false),
                key_value_pb(&secret, 2, 3, 2, b"v2", 0),
            ),
            (
                revision_key(4, 0, false),
                key_value_pb(&ns, 4, 4, 1, b"ns", 0),
            ),
            (
                revision_key(5, 0, false),
                key_value_pb(&cm, 5, 5, 1, b"cm", 0),
            ),
            (revision_key(6, 0, true), key_value_pb(&cm, 0, 0, 0, b"", 0)),
            (
                revision_key(7, 0, false),
                key_value_pb(&leased, 7, 7, 1, b"holder", 0x694d7d1c2a8b0a05),
            ),
        ],
    );
    put(
        b"lease",
        &[(
            0x694d7d1c2a8b0a05i64.to_be_bytes().to_vec(),
            lease_pb(0x694d7d1c2a8b0a05, 60),
        )],
    );
    put(
        b"members",
        &[(
            b"8e9e05c52164694d".to_vec(),
            br#"{"id":10276657743932975437,"peerURLs":["https://10.0.0.1:2380"],"name":"k3s-1-5f6a","clientURLs":["https://10.0.0.1:2379"]}"#.to_vec(),
        )],
    );
    put(
        b"members_removed",
        &[(b"91bc3c398fb3c146".to_vec(), b"removed".to_vec())],
    );
    put(
        b"meta",
        &[
            (
                etcd_format::CONF_STATE.to_vec(),
                br#"{"voters":[10276657743932975437],"auto_leave":false}"#.to_vec(),
            ),
            (
                etcd_format::CONSISTENT_INDEX.to_vec(),
                912u64.to_be_bytes().to_vec(),
            ),
            (
                etcd_format::FINISHED_COMPACT.to_vec(),
                revision_key(3, 0, false),
            ),
            (
                etcd_format::SCHEDULED_COMPACT.to_vec(),
                revision_key(3, 0, false),
            ),
            (etcd_format::TERM.to_vec(), 4u64.to_be_bytes().to_vec()),
        ],
    );
    w.finish().unwrap().into_inner()
}

/// The snapshot file `etcdctl snapshot save` (3.5) leaves: the database padded to 512 bytes'
/// multiple by bbolt's pages, then its sha256.
fn snapshot_file(dir: &std::path::Path) -> std::path::PathBuf {
    let db = etcd35_database();
    assert_eq!(db.len() % 512, 0);
    let path = dir.join("etcd-snapshot-k3s-1-1732000000");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&db).unwrap();
    f.write_all(&Sha256::digest(&db)).unwrap();
    path
}

#[test]
fn an_etcd_3_5_snapshot_restores_with_its_revisions_tombstones_leases_and_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let path = snapshot_file(tmp.path());

    let checked = restore::verify(&path).unwrap();
    assert_eq!(checked.found.revision, 7);
    let server_dir = tmp.path().join("server");
    assert_eq!(restore::install(&server_dir, &checked, 1).unwrap(), None);

    let member = super::layout::member_dir(&server_dir).unwrap();
    let store = Store::open(&member.join("sm")).unwrap();
    let mut records = Vec::new();
    let state = store
        .export_history(&mut |r| {
            records.push(r);
            Ok::<_, k3rs_storage::Error>(())
        })
        .unwrap();
    assert_eq!(state.revision, 7);
    assert_eq!(state.compact_revision, 3);
    assert_eq!(state.leases, vec![(0x694d7d1c2a8b0a05, 60)]);
    let kv = |key: &str, create, modr, version, value: &str, lease| KeyValue {
        key: key.into(),
        create_revision: create,
        mod_revision: modr,
        version,
        value: value.into(),
        lease,
    };
    let rec = |main, tombstone, kv| HistoryRecord {
        main,
        sub: 0,
        tombstone,
        kv,
    };
    assert_eq!(
        records,
        vec![
            rec(
                3,
                false,
                kv("/registry/secrets/default/token", 2, 3, 2, "v2", 0)
            ),
            rec(4, false, kv("/registry/namespaces/prod", 4, 4, 1, "ns", 0)),
            rec(
                5,
                false,
                kv("/registry/configmaps/default/gone", 5, 5, 1, "cm", 0)
            ),
            rec(
                6,
                true,
                KeyValue {
                    key: "/registry/configmaps/default/gone".into(),
                    mod_revision: 6,
                    ..Default::default()
                }
            ),
            rec(
                7,
                false,
                kv(
                    "/registry/leases/kube-system/k3s",
                    7,
                    7,
                    1,
                    "holder",
                    0x694d7d1c2a8b0a05
                )
            ),
        ]
    );
    assert_eq!(store.current_revision(), 7);
    assert_eq!(store.compact_revision(), 3);
}

#[test]
fn a_damaged_etcd_3_5_snapshot_is_refused_before_anything_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let path = snapshot_file(tmp.path());
    let mut data = std::fs::read(&path).unwrap();
    data[4096 * 2 + 100] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    assert!(restore::verify(&path).is_err());
    assert!(!tmp.path().join("server").exists());
}
