//! A WAL an older release wrote (byte strings as integer arrays) replays, and keeps replaying
//! once entries in the compact form follow it.

use std::sync::mpsc;

use k3rs_storage::bytes_form::{with_form, BytesForm};
use k3rs_storage::{Command, CompareTarget, DeleteRangeRequest, PutRequest, RequestOp};
use openraft::{CommittedLeaderId, EntryPayload};

use super::*;

/// The segment of a single-member server of main at 4f9aa08 after `etcdctl put
/// /registry/pods/default/p1 <28 bytes of MessagePack>`, `put /k/ascii hello`, a txn
/// (`value("/k/ascii") = "hello"` → put `/k/ascii world`, del `/k/gone`; else put
/// `/k/failed x`) and `del /registry/pods/default/p1`, and its vote file.
const SEGMENT: &[u8] = include_bytes!("testdata/old-release.wal");
const VOTE: &[u8] = include_bytes!("testdata/old-release.vote");
const MEMBER: u64 = 0x5aa2_cf94_b0c8_ad37;
const POD_KEY: &[u8] = b"/registry/pods/default/p1";
const POD_VALUE: &[u8] = b"\x82\xa4kind\xa3Pod\xa8metadata\x81\xa4name\xa2p1";

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, MEMBER), index)
}

fn put(key: &[u8], value: &[u8]) -> PutRequest {
    PutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        ..PutRequest::default()
    }
}

fn delete(key: &[u8]) -> DeleteRangeRequest {
    DeleteRangeRequest {
        key: key.to_vec(),
        ..DeleteRangeRequest::default()
    }
}

fn commands(e: &Entry) -> &[Command] {
    match &e.payload {
        EntryPayload::Normal(cmds) => cmds,
        other => panic!("entry {} is not normal: {other:?}", e.log_id),
    }
}

/// A data dir's `wal/` holding the old release's files.
fn old_wal_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("00000000000000000000.wal"), SEGMENT).unwrap();
    fs::write(dir.path().join("vote"), VOTE).unwrap();
    dir
}

fn assert_old_entries(wal: &Wal) {
    let entries = wal.entries(0..6).unwrap();
    assert_eq!(entries.len(), 6);
    assert!(matches!(entries[0].payload, EntryPayload::Membership(_)));
    assert!(matches!(entries[1].payload, EntryPayload::Blank));
    assert_eq!(
        commands(&entries[2]),
        [Command::Put(put(POD_KEY, POD_VALUE))]
    );
    assert_eq!(
        commands(&entries[3]),
        [Command::Put(put(b"/k/ascii", b"hello"))]
    );
    // The txn's byte strings: its guard's operand and key, and its three operations' keys.
    let [Command::Txn(txn)] = commands(&entries[4]) else {
        panic!("entry 4 is not one txn: {:?}", entries[4]);
    };
    let guard = &txn.compare[0];
    assert_eq!(guard.target, CompareTarget::Value(b"hello".to_vec()));
    assert_eq!(
        (guard.key.as_slice(), guard.range_end.len()),
        (&b"/k/ascii"[..], 0)
    );
    let keys: Vec<&[u8]> = txn
        .success
        .iter()
        .chain(&txn.failure)
        .map(|op| match op {
            RequestOp::Put(p) => p.key.as_slice(),
            RequestOp::DeleteRange(d) => d.key.as_slice(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(keys, [&b"/k/ascii"[..], b"/k/gone", b"/k/failed"]);
    assert_eq!(txn.success[0], RequestOp::Put(put(b"/k/ascii", b"world")));
    assert_eq!(
        commands(&entries[5]),
        [Command::DeleteRange(delete(POD_KEY))]
    );
}

#[test]
fn a_wal_of_an_older_release_replays() {
    let dir = old_wal_dir();
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(wal.log_state(), (None, Some(log_id(5))));
    assert_eq!(wal.read_vote(), Some(Vote::new_committed(1, MEMBER)));
    assert_old_entries(&wal);
}

#[test]
fn compact_entries_after_old_ones_replay() {
    let dir = old_wal_dir();
    let value = vec![0xa5; 3000];
    {
        let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
        let entry = Entry {
            log_id: log_id(6),
            payload: EntryPayload::Normal(vec![Command::Put(put(b"/k/new", &value))]),
        };
        let (tx, rx) = mpsc::channel();
        with_form(BytesForm::Bin, || {
            wal.append([entry], Box::new(move |r| tx.send(r.is_ok()).unwrap()))
        })
        .unwrap();
        assert!(rx.recv().unwrap());
    }
    // One byte per value byte: the value went in as a bin, not as an array of `cc a5`.
    let grown = fs::metadata(dir.path().join("00000000000000000000.wal"))
        .unwrap()
        .len()
        - SEGMENT.len() as u64;
    assert!((3000..3100).contains(&grown), "{grown} bytes appended");
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(wal.log_state(), (None, Some(log_id(6))));
    assert_old_entries(&wal);
    assert_eq!(
        commands(&wal.entries(6..7).unwrap()[0]),
        [Command::Put(put(b"/k/new", &value))]
    );
}
