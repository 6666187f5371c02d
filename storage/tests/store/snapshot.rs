//! Snapshot export/import roundtrip and corrupt-snapshot rejection.
use crate::common::*;
use k3rs_storage::*;

fn dump(s: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    s.export_snapshot(&mut out).unwrap();
    out
}

/// Every key at `rev` (0: current).
fn all(s: &Store, rev: i64) -> Result<(i64, RangeResponse), RequestError> {
    range(
        s,
        RangeRequest {
            key: vec![0],
            range_end: vec![0],
            revision: rev,
            ..Default::default()
        },
    )
}

fn populated() -> (tempfile::TempDir, Store) {
    let (d, s) = open();
    apply(&s, Command::LeaseGrant { id: 3, ttl: 60 });
    apply(&s, put("a", "1"));
    apply(
        &s,
        Command::Put(PutRequest {
            lease: 3,
            ..put_req("b", "2")
        }),
    );
    apply(&s, put("a", "3"));
    apply(&s, Command::Compact { revision: 3 });
    apply(&s, del("a", ""));
    (d, s)
}

#[test]
fn roundtrip_replaces_state() {
    let (_d, src) = populated();
    let snap = dump(&src);
    let (_d2, dst) = open();
    apply(&dst, put("zzz", "old"));
    dst.import_snapshot(&mut snap.as_slice()).unwrap();
    assert_eq!(dst.current_revision(), src.current_revision());
    assert_eq!(dst.compact_revision(), 3);
    assert_eq!(dst.applied_meta().unwrap(), Some(b"meta".to_vec()));
    assert_eq!(get(&dst, "zzz"), None);
    assert_eq!(dst.leases().unwrap(), src.leases().unwrap());
    for rev in 0..=src.current_revision() {
        assert_eq!(all(&dst, rev), all(&src, rev), "at {rev}");
    }
    assert_eq!(dump(&dst), snap);
    // The imported state is durable and keeps working.
    apply(&dst, put("c", "x"));
    assert_eq!(
        get(&dst, "c").unwrap().mod_revision,
        src.current_revision() + 1
    );
}

#[test]
fn corrupt_snapshots_are_rejected_and_leave_the_store_unchanged() {
    let (_d, src) = populated();
    let snap = dump(&src);
    let (_d2, dst) = open();
    apply(&dst, put("keep", "me"));
    let before = dump(&dst);
    let mut flipped = snap.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    let truncated = &snap[..snap.len() - 3];
    let mut bad_magic = snap.clone();
    bad_magic[0] = b'X';
    for bad in [flipped.as_slice(), truncated, bad_magic.as_slice(), &[]] {
        let mut r = bad;
        assert!(dst.import_snapshot(&mut r).is_err());
        assert_eq!(dump(&dst), before);
        assert_eq!(get(&dst, "keep").unwrap().value, b"me");
    }
}

#[test]
fn verify_reads_the_counters_and_refuses_damage() {
    let (_d, src) = populated();
    let snap = dump(&src);
    let info = Store::verify_snapshot(&mut snap.as_slice()).unwrap();
    // The lease grant takes no revision: puts at 2, 3, 4, the delete at 5.
    assert_eq!(info.revision, 5);
    assert_eq!(info.revision, src.current_revision());
    assert_eq!(info.compact_revision, 3);
    assert_eq!(info.meta, b"meta".to_vec());
    let mut flipped = snap.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    let e = Store::verify_snapshot(&mut flipped.as_slice()).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    let e = Store::verify_snapshot(&mut &snap[..snap.len() - 3]).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    // Trailing padding (the etcd API's 512-byte alignment) is not read at all.
    let mut padded = snap.clone();
    padded.extend_from_slice(&[0; 100]);
    assert_eq!(
        Store::verify_snapshot(&mut padded.as_slice())
            .unwrap()
            .revision,
        5
    );
}

#[test]
fn history_roundtrip_keeps_every_revision() {
    let (_d, src) = populated();
    let mut records = Vec::new();
    let state = src
        .export_history(&mut |r| {
            records.push(r);
            Ok::<_, Error>(())
        })
        .unwrap();
    assert_eq!(state.revision, src.current_revision());
    assert_eq!(state.compact_revision, 3);
    assert_eq!(state.leases, vec![(3, 60)]);
    // Nothing is compacted away here (a@2 is a's value at the compacted revision 3); the
    // tombstone of `a` is there.
    let revs: Vec<(i64, bool)> = records.iter().map(|r| (r.main, r.tombstone)).collect();
    assert_eq!(revs, vec![(2, false), (3, false), (4, false), (5, true)]);
    assert_eq!(records[3].kv.key, b"a");

    let (_d2, dst) = open();
    apply(&dst, put("zzz", "old"));
    dst.import_history(&state, &mut records.clone().into_iter(), b"m2")
        .unwrap();
    assert_eq!(dst.current_revision(), src.current_revision());
    assert_eq!(dst.compact_revision(), 3);
    assert_eq!(dst.applied_meta().unwrap(), Some(b"m2".to_vec()));
    assert_eq!(dst.leases().unwrap(), src.leases().unwrap());
    for rev in 3..=src.current_revision() {
        assert_eq!(all(&dst, rev), all(&src, rev), "at {rev}");
    }
    let mut again = Vec::new();
    dst.export_history(&mut |r| {
        again.push(r);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(again, records);

    // A record past the current revision is refused and changes nothing.
    let bad = HistoryState {
        revision: 2,
        ..state
    };
    assert!(dst
        .import_history(&bad, &mut records.into_iter(), b"x")
        .is_err());
    assert_eq!(dst.current_revision(), src.current_revision());
}

#[test]
fn an_export_is_the_state_when_it_began_while_applies_go_on() {
    let (_d, src) = populated();
    let expected = dump(&src);
    let export = src.begin_export().unwrap();
    assert_eq!(export.meta(), Some(&b"meta"[..]));
    // Applies are not blocked by the export: new revisions, a lease, and a compaction whose
    // garbage (more than one batch deletes) must stay readable until the export is written.
    for i in 0..200 {
        apply(&src, put(&format!("k{}", i % 7), "v"));
    }
    apply(&src, Command::LeaseGrant { id: 9, ttl: 60 });
    let rev = src.current_revision();
    apply(&src, Command::Compact { revision: rev });
    for i in 0..50 {
        apply(&src, put(&format!("k{i}"), "w"));
    }
    let mut written = Vec::new();
    export.write(&mut written).unwrap();
    assert_eq!(written, expected);

    // Once the export is gone, compacted records are deleted again and later exports hold the
    // new state.
    let in_use = src.db_size_in_use();
    apply(&src, put("last", "x"));
    assert!(
        src.db_size_in_use() < in_use,
        "compacted records are deleted again"
    );
    let (_d2, dst) = open();
    dst.import_snapshot(&mut dump(&src).as_slice()).unwrap();
    assert_eq!(dst.current_revision(), src.current_revision());
    assert_eq!(dst.leases().unwrap(), src.leases().unwrap());
    assert_eq!(all(&dst, 0), all(&src, 0));
}
