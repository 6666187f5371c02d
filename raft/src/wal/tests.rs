use std::sync::mpsc;

use k3rs_storage::{Command, PutRequest};
use openraft::{CommittedLeaderId, EntryPayload};

use super::*;

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64) -> Entry {
    let put = PutRequest {
        key: format!("k{index}").into_bytes(),
        value: vec![7; 100],
        ..Default::default()
    };
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(vec![Command::Put(put)]),
    }
}

/// Appends and waits for the group-commit callback.
fn append(wal: &Wal, entries: Vec<Entry>) {
    let (tx, rx) = mpsc::channel();
    wal.append(entries, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
        .unwrap();
    assert!(rx.recv().unwrap());
}

fn indexes(wal: &Wal, range: Range<u64>) -> Vec<u64> {
    wal.entries(range)
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect()
}

fn segment_files(dir: &Path) -> Vec<u64> {
    segment::list(dir)
        .unwrap()
        .into_iter()
        .map(|(f, _)| f)
        .collect()
}

/// A WAL in a fresh directory holding entries `0..n` of term 1, closed again.
fn wal_with(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    append(&wal, (0..n).map(|i| entry(1, i)).collect());
    dir
}

/// Rewrites the last segment's bytes, as a crash or a bad disk would.
fn damage_last_segment(dir: &Path, damage: impl FnOnce(&mut Vec<u8>)) {
    let (_, path) = segment::list(dir).unwrap().pop().unwrap();
    damage_segment(&path, damage);
}

fn damage_segment(path: &Path, damage: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = fs::read(path).unwrap();
    damage(&mut bytes);
    fs::write(path, &bytes).unwrap();
}

/// A WAL of 1000-byte segments holding entries `0..n` of term 1 (one append each), closed.
fn segmented_wal_with(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), 1000).unwrap();
    for i in 0..n {
        append(&wal, vec![entry(1, i)]);
    }
    dir
}

/// A copy of the (flat) WAL directory `dir`.
fn copy_dir(dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    copy
}

#[test]
fn roundtrip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
        assert_eq!(wal.log_state(), (None, None));
        append(&wal, (0..10).map(|i| entry(1, i)).collect());
        append(&wal, vec![entry(2, 10)]);
        assert_eq!(wal.entries(3..5).unwrap(), vec![entry(1, 3), entry(1, 4)]);
        assert_eq!(indexes(&wal, 8..100), vec![8, 9, 10]);
        wal.save_vote(&Vote::new(2, 1)).unwrap();
    }
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(wal.log_state(), (None, Some(log_id(2, 10))));
    assert_eq!(wal.read_vote(), Some(Vote::new(2, 1)));
    assert_eq!(wal.entries(0..11).unwrap().len(), 11);
    append(&wal, vec![entry(2, 11)]);
    assert_eq!(indexes(&wal, 10..12), vec![10, 11]);
}

#[test]
fn refuses_holes() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    let err = wal.append(vec![entry(1, 1)], Box::new(|_| {})).unwrap_err();
    assert!(matches!(
        err,
        WalError::Hole {
            expected: 0,
            got: 1
        }
    ));
}

#[test]
fn rotates_segments() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        for i in 0..30 {
            append(&wal, vec![entry(1, i)]);
        }
        assert!(segment_files(dir.path()).len() > 3);
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert_eq!(indexes(&wal, 0..30), (0..30).collect::<Vec<_>>());
}

#[test]
fn torn_tail_is_cut() {
    let dir = wal_with(5);
    // Cut the last record in half, as a crash in the middle of a write would.
    damage_last_segment(dir.path(), |b| b.truncate(b.len() - 20));
    {
        let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
        assert_eq!(wal.log_state().1, Some(log_id(1, 3)));
        append(&wal, vec![entry(2, 4)]);
    }
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(wal.entries(4..5).unwrap(), vec![entry(2, 4)]);
}

#[test]
fn garbage_tail_is_cut() {
    let dir = wal_with(3);
    damage_last_segment(dir.path(), |b| b.extend_from_slice(&[0u8; 4096]));
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    assert_eq!(wal.log_state().1, Some(log_id(1, 2)));
}

#[test]
fn corruption_in_a_sealed_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        for i in 0..30 {
            append(&wal, vec![entry(1, i)]);
        }
    }
    let (_, path) = segment::list(dir.path()).unwrap().remove(0);
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Wal::open(dir.path(), 1000),
        Err(WalError::Corrupt(_))
    ));
}

#[test]
fn truncate_then_append() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        append(&wal, (0..20).map(|i| entry(1, i)).collect());
        wal.truncate(7).unwrap();
        assert_eq!(wal.log_state().1, Some(log_id(1, 6)));
        assert_eq!(indexes(&wal, 0..20), (0..7).collect::<Vec<_>>());
        append(&wal, (7..9).map(|i| entry(2, i)).collect());
        wal.truncate(100).unwrap();
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert_eq!(wal.log_state().1, Some(log_id(2, 8)));
    assert_eq!(
        wal.entries(6..9).unwrap(),
        vec![entry(1, 6), entry(2, 7), entry(2, 8)]
    );
}

#[test]
fn purge_deletes_whole_segments_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        for i in 0..30 {
            append(&wal, vec![entry(1, i)]);
        }
        let before = segment_files(dir.path());
        wal.purge(log_id(1, 14)).unwrap();
        // In memory at once; the files go on the purge thread, which closing waits for.
        assert_eq!(wal.log_state(), (Some(log_id(1, 14)), Some(log_id(1, 29))));
        assert_eq!(indexes(&wal, 0..30), (15..30).collect::<Vec<_>>());
        drop(wal);
        let after = segment_files(dir.path());
        assert!(after.len() < before.len());
        // The first remaining segment still holds index 15.
        assert!(after[0] <= 15, "{after:?}");
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert_eq!(wal.log_state(), (Some(log_id(1, 14)), Some(log_id(1, 29))));
    assert_eq!(indexes(&wal, 0..30), (15..30).collect::<Vec<_>>());
}

#[test]
fn purge_past_the_end_then_append() {
    let dir = tempfile::tempdir().unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        append(&wal, (0..5).map(|i| entry(1, i)).collect());
        // As after installing a snapshot that is ahead of the log.
        wal.purge(log_id(3, 50)).unwrap();
        assert_eq!(wal.log_state(), (Some(log_id(3, 50)), Some(log_id(3, 50))));
        // Past the end, the marker is durable before `purge` returns: the next append's
        // segment starts at 51, which without the marker would follow the old log with a gap.
        let marker = durable_file::read(dir.path(), PURGED_FILE)
            .unwrap()
            .unwrap();
        let marker: Option<LogId> = rmp_serde::from_slice(&marker).unwrap();
        assert_eq!(marker, Some(log_id(3, 50)));
        append(&wal, vec![entry(3, 51)]);
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert_eq!(wal.log_state(), (Some(log_id(3, 50)), Some(log_id(3, 51))));
    assert_eq!(indexes(&wal, 0..100), vec![51]);
}

#[test]
fn zeroed_sector_in_the_last_record_is_a_torn_tail() {
    let dir = wal_with(20);
    // The last record (≈ 120 bytes) ends in the sector starting at `s`: as if that sector of
    // the final write never reached the disk.
    damage_last_segment(dir.path(), |b| {
        let s = (b.len() - 1) / 512 * 512;
        b[s..].fill(0);
    });
    let wal = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE).unwrap();
    let last = wal.log_state().1.unwrap().index;
    assert!(last < 19, "{last}");
    assert_eq!(indexes(&wal, 0..20), (0..=last).collect::<Vec<_>>());
}

#[test]
fn flipped_bit_in_the_last_segment_is_an_error() {
    let dir = wal_with(20);
    damage_last_segment(dir.path(), |b| {
        let mid = b.len() / 2;
        b[mid] ^= 0x10;
    });
    let err = Wal::open(dir.path(), DEFAULT_SEGMENT_SIZE)
        .err()
        .expect("refused");
    assert!(matches!(err, WalError::Corrupt(_)), "{err}");
}

mod model {
    //! Random sequences of appends, truncations, purges and reopens against a plain model.
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Append(u8),
        /// Truncate `n` entries from the end.
        Truncate(u8),
        /// Purge up to `n` entries from the front.
        Purge(u8),
        Reopen,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u8..20).prop_map(Op::Append),
            1 => (0u8..10).prop_map(Op::Truncate),
            1 => (0u8..15).prop_map(Op::Purge),
            1 => Just(Op::Reopen),
        ]
    }

    /// `PROPTEST_CASES` when set (for long runs), else `default`: a config literal's `cases`
    /// would otherwise override the environment.
    fn cases(default: u32) -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// Runs `ops` against a WAL of tiny segments (so that every operation crosses segment
    /// boundaries) and the model, comparing the state after each.
    fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().unwrap();
        let open = || Wal::open(dir.path(), 700).unwrap();
        let mut wal = open();
        let mut term = 1;
        // The model: present entries and the last purged log id.
        let mut present: Vec<Entry> = Vec::new();
        let mut purged: Option<LogId> = None;
        for op in ops {
            let next = present
                .last()
                .map(|e| e.log_id.index + 1)
                .or(purged.map(|p| p.index + 1))
                .unwrap_or(0);
            match op {
                Op::Append(n) => {
                    let new: Vec<Entry> = (next..next + n as u64).map(|i| entry(term, i)).collect();
                    append(&wal, new.clone());
                    present.extend(new);
                }
                Op::Truncate(n) => {
                    let keep = present.len().saturating_sub(n as usize);
                    if let Some(first_cut) = present.get(keep) {
                        wal.truncate(first_cut.log_id.index).unwrap();
                        present.truncate(keep);
                        term += 1;
                    }
                }
                Op::Purge(n) => {
                    let n = (n as usize).min(present.len());
                    if n > 0 {
                        let upto = present[n - 1].log_id;
                        wal.purge(upto).unwrap();
                        present.drain(..n);
                        purged = Some(upto);
                    }
                }
                Op::Reopen => {
                    drop(wal);
                    wal = open();
                }
            }
            let last = present.last().map(|e| e.log_id).or(purged);
            prop_assert_eq!(wal.log_state(), (purged, last));
            prop_assert_eq!(&wal.entries(0..u64::MAX).unwrap(), &present);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]
        #[test]
        fn behaves_like_a_vec(ops in proptest::collection::vec(op(), 1..40)) {
            check(ops)?;
        }
    }

    /// The minimal case the model found once (a CI run): the append re-created the emptied
    /// segment the purge had handed to the purge thread, before the thread deleted it.
    #[test]
    fn append_after_truncate_and_purge_of_the_whole_log() {
        use Op::*;
        check(vec![Append(11), Truncate(6), Purge(5), Append(1)]).unwrap();
        check(vec![Append(11), Truncate(6), Purge(5), Reopen, Append(1)]).unwrap();
        check(vec![
            Append(11),
            Truncate(6),
            Purge(5),
            Append(1),
            Purge(1),
            Append(9),
        ])
        .unwrap();
    }
}

/// The layout of the minimal model case: entries `0..n` in 700-byte segments (one append),
/// then a truncation at the second segment's first index `b`, which deletes the later segments
/// and leaves `b` as the empty active segment. Returns the WAL and `b`.
fn emptied_active_segment(dir: &Path) -> (Wal, u64) {
    let wal = Wal::open(dir, 700).unwrap();
    append(&wal, (0..11).map(|i| entry(1, i)).collect());
    let files = segment_files(dir);
    assert!(files.len() >= 3, "{files:?}");
    let b = files[1];
    wal.truncate(b).unwrap();
    assert_eq!(segment_files(dir), vec![0, b]);
    (wal, b)
}

/// A purge of the whole log keeps the empty active segment named after the next index: it is
/// not handed to the purge thread (whose late deletion would meet the next append's segment of
/// the same name), and the next append writes into it.
#[test]
fn purge_of_the_whole_log_keeps_the_emptied_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let b = {
        let (wal, b) = emptied_active_segment(dir.path());
        wal.purge(log_id(1, b - 1)).unwrap();
        {
            let inner = wal.lock();
            let kept: Vec<(u64, u64)> = inner.segments.iter().map(|s| (s.first, s.len)).collect();
            assert_eq!(kept, vec![(b, 0)]);
        }
        append(&wal, vec![entry(2, b)]);
        wal.wait_for_purges();
        assert_eq!(segment_files(dir.path()), vec![b]);
        assert_eq!(wal.entries(0..100).unwrap(), vec![entry(2, b)]);
        b
    };
    let wal = Wal::open(dir.path(), 700).unwrap();
    assert_eq!(
        wal.log_state(),
        (Some(log_id(1, b - 1)), Some(log_id(2, b)))
    );
    assert_eq!(wal.entries(0..100).unwrap(), vec![entry(2, b)]);
}

/// The same layout purged past its end (a snapshot ahead of the log): the empty segment's name
/// is below the next index, so it goes, and the next append starts a segment after the purge.
#[test]
fn purge_past_the_end_drops_the_emptied_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (wal, _) = emptied_active_segment(dir.path());
        wal.purge(log_id(3, 40)).unwrap();
        assert!(wal.lock().segments.is_empty());
        append(&wal, vec![entry(3, 41)]);
        wal.wait_for_purges();
        assert_eq!(segment_files(dir.path()), vec![41]);
    }
    let wal = Wal::open(dir.path(), 700).unwrap();
    assert_eq!(wal.log_state(), (Some(log_id(3, 40)), Some(log_id(3, 41))));
}

/// A purge of the whole log, a truncation of nothing left, appends across rotations and a
/// second purge, all while deletions may still be queued: every new segment is named above
/// the purge point, so none meets a pending deletion.
#[test]
fn appends_and_purges_interleaved_with_pending_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), 700).unwrap();
    let mut next = 0;
    for round in 0..20u64 {
        append(&wal, (next..next + 7).map(|i| entry(1, i)).collect());
        next += 7;
        // The whole log, or all but its last two entries.
        let upto = if round % 2 == 0 { next - 1 } else { next - 3 };
        wal.purge(log_id(1, upto)).unwrap();
        wal.truncate(next).unwrap();
        assert_eq!(indexes(&wal, 0..next), (upto + 1..next).collect::<Vec<_>>());
    }
    wal.wait_for_purges();
    // Every handed-over file is gone and every live one is there.
    let live: Vec<u64> = wal.lock().segments.iter().map(|s| s.first).collect();
    assert_eq!(segment_files(dir.path()), live);
    drop(wal);
    let wal = Wal::open(dir.path(), 700).unwrap();
    assert_eq!(wal.log_state().1, Some(log_id(1, next - 1)));
}

/// A crash after the purge marker of a whole-log purge reached the disk, before any deletion:
/// open deletes the purged segment, keeps the emptied active one and goes on appending to it.
#[test]
fn crash_with_a_pending_deletion_after_a_whole_log_purge() {
    let dir = tempfile::tempdir().unwrap();
    let b = {
        let (wal, b) = emptied_active_segment(dir.path());
        drop(wal);
        b
    };
    purger::write_marker(dir.path(), log_id(1, b - 1)).unwrap();
    {
        let wal = Wal::open(dir.path(), 700).unwrap();
        assert_eq!(segment_files(dir.path()), vec![b]);
        assert_eq!(
            wal.log_state(),
            (Some(log_id(1, b - 1)), Some(log_id(1, b - 1)))
        );
        append(&wal, (b..b + 8).map(|i| entry(2, i)).collect());
    }
    let wal = Wal::open(dir.path(), 700).unwrap();
    assert_eq!(wal.log_state().1, Some(log_id(2, b + 7)));
    assert_eq!(indexes(&wal, 0..100), (b..b + 8).collect::<Vec<_>>());
}

/// A deletion that failed (here: the file put back after the purge thread deleted it) leaves a
/// wholly purged segment behind: appends, rotations, truncations and later purges never touch
/// its path, and the next open deletes it.
#[test]
fn a_failed_deletion_leaves_a_file_nothing_reuses() {
    let dir = segmented_wal_with(30);
    let (first, path) = segment::list(dir.path()).unwrap().remove(0);
    let bytes = fs::read(&path).unwrap();
    let wal = Wal::open(dir.path(), 1000).unwrap();
    wal.purge(log_id(1, 14)).unwrap();
    wal.wait_for_purges();
    assert!(!path.exists());
    fs::write(&path, &bytes).unwrap();
    append(&wal, (30..60).map(|i| entry(1, i)).collect());
    wal.truncate(45).unwrap();
    append(&wal, (45..50).map(|i| entry(2, i)).collect());
    wal.purge(log_id(1, 40)).unwrap();
    append(&wal, (50..55).map(|i| entry(2, i)).collect());
    wal.wait_for_purges();
    assert_eq!(fs::read(&path).unwrap(), bytes);
    assert_eq!(indexes(&wal, 0..100), (41..55).collect::<Vec<_>>());
    drop(wal);
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert!(!segment_files(dir.path()).contains(&first));
    assert_eq!(wal.log_state(), (Some(log_id(1, 40)), Some(log_id(2, 54))));
    assert_eq!(indexes(&wal, 0..100), (41..55).collect::<Vec<_>>());
}

/// A crash between a rotation and the sync that would have covered it: the sealed segment's
/// last record never reached the disk (its last sector reads as zeros) while the new segment
/// and its records did. Nothing from the torn record on was acknowledged (the sync thread
/// acknowledges only after syncing both segments), so recovery cuts there and drops the rest.
#[test]
fn torn_sealed_segment_cuts_the_log_and_drops_later_segments() {
    let dir = segmented_wal_with(30);
    let files = segment::list(dir.path()).unwrap();
    assert!(files.len() > 3, "{files:?}");
    let (second_first, sealed) = files[1].clone();
    damage_segment(&sealed, |b| {
        let s = (b.len() - 1) / 512 * 512;
        b[s..].fill(0);
    });
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        let last = wal.log_state().1.unwrap().index;
        assert!(last >= second_first && last < files[2].0 - 1, "{last}");
        assert_eq!(indexes(&wal, 0..30), (0..=last).collect::<Vec<_>>());
        assert_eq!(segment_files(dir.path()), vec![files[0].0, second_first]);
        append(&wal, vec![entry(2, last + 1)]);
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    let last = wal.log_state().1.unwrap();
    assert_eq!(last.leader_id.term, 2);
    assert_eq!(indexes(&wal, 0..30), (0..=last.index).collect::<Vec<_>>());
}

/// The same crash where the sealed segment ends inside its last record (the write was cut
/// short) and the new segment holds a torn record of its own.
#[test]
fn crash_between_rotation_and_sync_with_a_short_sealed_segment() {
    let dir = segmented_wal_with(30);
    let files = segment::list(dir.path()).unwrap();
    damage_segment(&files[0].1, |b| b.truncate(b.len() - 20));
    damage_segment(&files[1].1, |b| b.truncate(b.len() - 20));
    let wal = Wal::open(dir.path(), 1000).unwrap();
    let last = wal.log_state().1.unwrap().index;
    assert_eq!(last, files[1].0 - 2);
    assert_eq!(segment_files(dir.path()), vec![files[0].0]);
    append(&wal, vec![entry(2, last + 1)]);
    assert_eq!(indexes(&wal, 0..30), (0..=last + 1).collect::<Vec<_>>());
}

/// The crash came after the rotation's records were written, but before the directory entry of
/// the new segment was synced: the new segment is gone, the sealed one is whole.
#[test]
fn crash_before_the_new_segment_reached_the_directory() {
    let dir = segmented_wal_with(30);
    let files = segment::list(dir.path()).unwrap();
    let (last_first, last_path) = files.last().unwrap().clone();
    fs::remove_file(last_path).unwrap();
    {
        let wal = Wal::open(dir.path(), 1000).unwrap();
        assert_eq!(wal.log_state().1, Some(log_id(1, last_first - 1)));
        append(&wal, (last_first..30).map(|i| entry(2, i)).collect());
    }
    let wal = Wal::open(dir.path(), 1000).unwrap();
    assert_eq!(wal.log_state().1, Some(log_id(2, 29)));
}

/// An append that starts a segment is acknowledged only after the sealed one, the new one and
/// the directory were synced; the data of both is readable before.
#[test]
fn an_append_across_segments_is_acknowledged_once() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), 1000).unwrap();
    let (tx, rx) = mpsc::channel();
    wal.append(
        (0..20).map(|i| entry(1, i)).collect::<Vec<_>>(),
        Box::new(move |r| tx.send(r.is_ok()).unwrap()),
    )
    .unwrap();
    assert!(segment_files(dir.path()).len() > 2);
    assert_eq!(indexes(&wal, 0..20), (0..20).collect::<Vec<_>>());
    assert!(rx.recv().unwrap());
    assert!(rx.try_recv().is_err());
}

/// A crash at every step of a purge's background work (marker, then each deletion): the WAL
/// reopens either as before the purge or as after it, and goes on appending.
#[test]
fn purge_crash_at_every_step_reopens_consistently() {
    let dir = segmented_wal_with(30);
    let upto = log_id(1, 14);
    let n_steps = {
        let files = segment::list(dir.path()).unwrap();
        let firsts: Vec<u64> = files.iter().map(|(f, _)| *f).collect();
        purge_plan::purgeable(&firsts, Some(29), 14) + 1
    };
    assert!(n_steps > 2, "{n_steps}");
    for done in 0..=n_steps {
        let copy = copy_dir(dir.path());
        let files = segment::list(copy.path()).unwrap();
        let firsts: Vec<u64> = files.iter().map(|(f, _)| *f).collect();
        let job = PurgeJob {
            upto,
            segments: files[..purge_plan::purgeable(&firsts, Some(29), 14)]
                .iter()
                .map(|(_, p)| p.clone())
                .collect(),
        };
        for step in &job.steps()[..done] {
            purger::run_step(copy.path(), step).unwrap();
        }
        {
            let wal = Wal::open(copy.path(), 1000).unwrap();
            let (purged, first) = if done == 0 {
                (None, 0)
            } else {
                (Some(upto), 15)
            };
            assert_eq!(wal.log_state(), (purged, Some(log_id(1, 29))), "{done}");
            assert_eq!(indexes(&wal, 0..30), (first..30).collect::<Vec<_>>());
            if done > 0 {
                // Open finished the purge: no segment is wholly purged.
                let left = segment_files(copy.path());
                assert!(left.len() < 2 || left[1] > 15, "{done}: {left:?}");
            }
            append(&wal, vec![entry(1, 30)]);
        }
        let wal = Wal::open(copy.path(), 1000).unwrap();
        assert_eq!(wal.log_state().1, Some(log_id(1, 30)), "{done}");
    }
}
