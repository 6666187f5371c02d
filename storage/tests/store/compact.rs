//! Compaction: errors, what stays readable, physical deletion, defragmentation.
use crate::common::*;
use k3rs_storage::*;

#[test]
fn compaction_keeps_latest_live_versions() {
    let (_d, s) = open();
    apply(&s, put("a", "1")); // 2
    apply(&s, put("a", "2")); // 3
    apply(&s, put("b", "1")); // 4
    apply(&s, del("b", "")); // 5
    apply(&s, put("a", "3")); // 6
    let c = |rev| apply(&s, Command::Compact { revision: rev });
    assert_eq!(c(7).result, Err(RequestError::FutureRevision));
    let out = c(5);
    assert_eq!(
        (out.revision, out.result),
        (6, Ok(CommandResponse::Compact))
    );
    assert_eq!(s.compact_revision(), 5);
    assert_eq!(
        c(5).result,
        Err(RequestError::Compacted {
            compact_revision: 5
        })
    );
    assert_eq!(
        c(4).result,
        Err(RequestError::Compacted {
            compact_revision: 5
        })
    );
    let at = |rev| {
        range(
            &s,
            RangeRequest {
                key: vec![0],
                range_end: vec![0],
                revision: rev,
                ..Default::default()
            },
        )
    };
    assert_eq!(
        at(4),
        Err(RequestError::Compacted {
            compact_revision: 5
        })
    );
    assert_eq!(at(5).unwrap().1.kvs, vec![kv("a", "2", 2, 3, 2)]);
    assert_eq!(at(0).unwrap().1.kvs, vec![kv("a", "3", 2, 6, 3)]);
    // The next put continues the version of the compacted generation.
    apply(&s, put("a", "4"));
    assert_eq!(get(&s, "a"), Some(kv("a", "4", 2, 7, 4)));
    assert!(matches!(
        s.watch(WatchRequest {
            key: "a".into(),
            start_revision: 4,
            ..Default::default()
        }),
        Err(RequestError::Compacted {
            compact_revision: 5
        })
    ));
}

#[test]
fn compaction_survives_reopen_and_frees_space() {
    let dir = tempfile::tempdir().unwrap();
    let value = "x".repeat(4096);
    {
        let s = Store::open(dir.path()).unwrap();
        for i in 0..2000 {
            apply(&s, put(&format!("k{}", i % 10), &value));
        }
        let before = s.db_size_in_use();
        s.flush().unwrap();
        let disk_before = s.db_size();
        let rev = s.current_revision();
        apply(&s, Command::Compact { revision: rev });
        // Compacted records are deleted a chunk per batch; a reopen finds the rest again.
        drop(s);
        let s = Store::open(dir.path()).unwrap();
        for i in 0..40 {
            s.apply_batch(&[], &[i]).unwrap();
        }
        let after = s.db_size_in_use();
        assert!(after < before / 50, "in use {before} -> {after}");
        s.defragment().unwrap();
        s.flush().unwrap();
        assert!(
            s.db_size() < disk_before / 2,
            "on disk {disk_before} -> {}",
            s.db_size()
        );
        assert_eq!(s.applied_meta().unwrap(), Some(vec![39]));
        apply(&s, put("k0", "last"));
    }
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.current_revision(), 2002);
    assert_eq!(s.compact_revision(), 2001);
    assert_eq!(get(&s, "k0"), Some(kv("k0", "last", 2, 2002, 201)));
    assert_eq!(get(&s, "k9").unwrap().version, 200);
    let r = range(
        &s,
        RangeRequest {
            key: "k".into(),
            range_end: "l".into(),
            revision: 2001,
            ..Default::default()
        },
    );
    assert_eq!(r.unwrap().1.count, 10);
}
