//! Batches whose sled write is left to the caller (`apply_batch_deferred`): nothing reads or
//! changes the store before that write, wherever and whenever it happens.
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::common::*;
use k3rs_storage::*;

fn value(s: &Store, key: &str) -> Option<String> {
    get(s, key).map(|kv| String::from_utf8(kv.value).unwrap())
}

#[test]
fn readers_and_the_next_batch_wait_for_the_pending_write() {
    let (_dir, s) = open();
    let s = Arc::new(s);
    apply(&s, put("x", "0"));
    let measured = s.db_size_recent();
    let (outputs, commit) = s.apply_batch_deferred(&[put("x", "1")], b"m1").unwrap();
    assert_eq!(
        outputs[0].revision, 3,
        "the outputs are final before the write"
    );
    let (tx, rx) = mpsc::channel();
    for who in ["reader", "writer"] {
        let (s, tx) = (s.clone(), tx.clone());
        std::thread::spawn(move || {
            let seen = match who {
                "reader" => value(&s, "x"),
                _ => {
                    let out = s.apply_batch(&[put("y", "2")], b"m2").unwrap();
                    Some(out[0].revision.to_string())
                }
            };
            tx.send((who, seen)).unwrap();
        });
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "nobody gets past an unwritten batch"
    );
    // Quota checks on the hot path do not wait: they answer from the last measurement.
    let (size_tx, size_rx) = mpsc::channel();
    let sizer = s.clone();
    std::thread::spawn(move || size_tx.send(sizer.db_size_recent()).unwrap());
    assert_eq!(size_rx.recv_timeout(Duration::from_secs(10)), Ok(measured));
    commit.commit().unwrap();
    let mut seen: Vec<_> = (0..2)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![("reader", Some("1".into())), ("writer", Some("4".into()))]
    );
    assert_eq!(s.applied_meta().unwrap(), Some(b"m2".to_vec()));
}

#[test]
fn a_dropped_commit_is_written_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let (_, commit) = s.apply_batch_deferred(&[put("x", "1")], b"m1").unwrap();
    drop(commit);
    assert_eq!(value(&s, "x").as_deref(), Some("1"));
    s.flush().unwrap();
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(value(&s, "x").as_deref(), Some("1"));
    assert_eq!(s.applied_meta().unwrap(), Some(b"m1".to_vec()));
}

#[test]
fn closing_the_store_waits_for_a_write_on_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let (_, commit) = s.apply_batch_deferred(&[put("x", "1")], b"m1").unwrap();
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        commit.commit().unwrap();
    });
    drop(s);
    late.join().unwrap();
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(
        value(&s, "x").as_deref(),
        Some("1"),
        "closed after the write"
    );
    assert_eq!(s.applied_meta().unwrap(), Some(b"m1".to_vec()));
}
