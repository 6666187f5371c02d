//! Watch: history then live, filters, prev_kv, compaction, lagging watchers, progress.
use crate::common::*;
use k3rs_storage::*;

fn all_keys(start: i64) -> WatchRequest {
    WatchRequest {
        key: vec![0],
        range_end: vec![0],
        start_revision: start,
        ..Default::default()
    }
}

/// Collects events until revision `until` is reached.
async fn collect(w: &mut Watcher, until: i64) -> Vec<Event> {
    let mut out = Vec::new();
    while out.last().is_none_or(|e: &Event| e.kv.mod_revision < until) {
        match w.next().await {
            WatchBatch::Events { revision, events } => {
                assert!(events.iter().all(|e| e.kv.mod_revision <= revision));
                out.extend(events);
            }
            WatchBatch::Compacted { compact_revision } => panic!("compacted at {compact_revision}"),
        }
    }
    out
}

fn summary(events: &[Event]) -> Vec<(EventKind, String, i64)> {
    events
        .iter()
        .map(|e| {
            (
                e.kind,
                String::from_utf8(e.kv.key.clone()).unwrap(),
                e.kv.mod_revision,
            )
        })
        .collect()
}

#[tokio::test]
async fn history_then_live_with_prev_kv() {
    let (_d, s) = open();
    apply(&s, put("a", "1")); // 2
    apply(&s, put("a", "2")); // 3
    apply(&s, del("a", "")); // 4
    let mut w = s
        .watch(WatchRequest {
            prev_kv: true,
            ..all_keys(2)
        })
        .unwrap();
    assert_eq!(w.progress_revision(), None);
    let ev = collect(&mut w, 4).await;
    assert_eq!(
        ev[0],
        Event {
            kind: EventKind::Put,
            kv: kv("a", "1", 2, 2, 1),
            prev_kv: None
        }
    );
    assert_eq!(ev[1].prev_kv, Some(kv("a", "1", 2, 2, 1)));
    assert_eq!(
        ev[2],
        Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: "a".into(),
                mod_revision: 4,
                ..Default::default()
            },
            prev_kv: Some(kv("a", "2", 2, 3, 2)),
        }
    );
    assert_eq!(w.progress_revision(), Some(4));
    apply(&s, put("b", "1")); // 5
    apply(&s, put("b", "2")); // 6
    let ev = collect(&mut w, 6).await;
    assert_eq!(ev[1].prev_kv, Some(kv("b", "1", 5, 5, 1)));
    assert_eq!(
        summary(&ev),
        vec![
            (EventKind::Put, "b".into(), 5),
            (EventKind::Put, "b".into(), 6)
        ]
    );
    assert_eq!(w.progress_revision(), Some(6));
}

#[tokio::test]
async fn filters_ranges_and_start_zero() {
    let (_d, s) = open();
    apply(&s, put("a", "1"));
    let mut only_del = s
        .watch(WatchRequest {
            key: "a".into(),
            range_end: "c".into(),
            filter_put: true,
            ..all_keys(0)
        })
        .unwrap();
    let mut only_put = s
        .watch(WatchRequest {
            key: "b".into(),
            range_end: vec![],
            filter_delete: true,
            ..all_keys(0)
        })
        .unwrap();
    assert_eq!(only_put.progress_revision(), Some(2));
    apply(&s, put("b", "1")); // 3
    apply(&s, put("c", "1")); // 4
    apply(&s, del("a", "z")); // 5: a, b, c deleted
    apply(&s, put("b", "2")); // 6
    assert_eq!(
        summary(&collect(&mut only_del, 5).await),
        vec![
            (EventKind::Delete, "a".into(), 5),
            (EventKind::Delete, "b".into(), 5)
        ]
    );
    assert_eq!(
        summary(&collect(&mut only_put, 6).await),
        vec![
            (EventKind::Put, "b".into(), 3),
            (EventKind::Put, "b".into(), 6)
        ]
    );
}

#[tokio::test]
async fn txn_revision_is_one_batch_and_lagging_watchers_catch_up() {
    let (_d, s) = open();
    let mut w = s.watch(all_keys(0)).unwrap();
    let txn = Command::Txn(TxnRequest {
        compare: vec![],
        success: vec![
            RequestOp::Put(put_req("x", "1")),
            RequestOp::Put(put_req("y", "1")),
        ],
        failure: vec![],
    });
    apply(&s, txn);
    match w.next().await {
        WatchBatch::Events {
            revision: 2,
            events,
        } => assert_eq!(events.len(), 2),
        other => panic!("{other:?}"),
    }
    // Far more batches than the channel holds: the watcher falls back to history.
    for i in 0..3000 {
        apply(&s, put(&format!("k{}", i % 7), "v"));
    }
    let ev = collect(&mut w, 3002).await;
    let revs: Vec<i64> = ev.iter().map(|e| e.kv.mod_revision).collect();
    assert_eq!(revs, (3..=3002).collect::<Vec<_>>());
    assert_eq!(w.progress_revision(), Some(3002));
}

#[tokio::test]
async fn compaction_while_lagging_ends_the_watch() {
    let (_d, s) = open();
    apply(&s, put("a", "0"));
    let mut w = s.watch(all_keys(2)).unwrap();
    for _ in 0..2000 {
        apply(&s, put("a", "v"));
    }
    apply(&s, Command::Compact { revision: 1000 });
    assert_eq!(
        w.next().await,
        WatchBatch::Compacted {
            compact_revision: 1000
        }
    );
}

#[tokio::test]
async fn next_is_cancel_safe() {
    let (_d, s) = open();
    let mut w = s.watch(all_keys(0)).unwrap();
    let mut revs = Vec::new();
    for i in 0..50 {
        let polled = tokio::time::timeout(std::time::Duration::from_millis(1), w.next()).await;
        if let Ok(WatchBatch::Events { events, .. }) = polled {
            revs.extend(events.iter().map(|e| e.kv.mod_revision));
        }
        apply(&s, put("k", &i.to_string()));
    }
    let rest = collect(&mut w, 51).await;
    revs.extend(rest.iter().map(|e| e.kv.mod_revision));
    assert_eq!(revs, (2..=51).collect::<Vec<_>>());
}

#[test]
fn store_and_watchers_can_move_between_tasks() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let (_d, s) = open();
    send_sync(&s);
    let mut w = s.watch(all_keys(0)).unwrap();
    send(&w);
    send(&w.next());
}

#[tokio::test]
async fn watchers_follow_a_snapshot_import() {
    let (_d, src) = open();
    for i in 0..5 {
        apply(&src, put("k", &i.to_string())); // 2..=6
    }
    let mut snap = Vec::new();
    src.export_snapshot(&mut snap).unwrap();
    let (_d2, dst) = open();
    apply(&dst, put("k", "old")); // 2
    let mut w = dst.watch(all_keys(0)).unwrap();
    dst.import_snapshot(&mut snap.as_slice()).unwrap();
    let revs: Vec<i64> = collect(&mut w, 6)
        .await
        .iter()
        .map(|e| e.kv.mod_revision)
        .collect();
    assert_eq!(revs, vec![3, 4, 5, 6]);
}

#[test]
fn thousands_of_watchers() {
    let (_d, s) = open();
    let watch = |i: usize| WatchRequest {
        key: format!("k{}", i % 10).into(),
        range_end: vec![],
        ..all_keys(0)
    };
    let mut ws: Vec<Watcher> = (0..3000).map(|i| s.watch(watch(i)).unwrap()).collect();
    for i in 0..100 {
        apply(&s, put(&format!("k{}", i % 10), "v"));
    }
    for (i, w) in ws.iter_mut().enumerate() {
        let mut revs = vec![];
        while let Some(WatchBatch::Events { events, .. }) = w.try_next() {
            revs.extend(events.iter().map(|e| e.kv.mod_revision));
        }
        let expected: Vec<i64> = (0..10).map(|j| 2 + (i % 10) as i64 + 10 * j).collect();
        assert_eq!(revs, expected);
        assert_eq!(w.progress_revision(), Some(101));
    }
}

#[test]
fn import_of_an_older_state_leaves_watchers_waiting() {
    let (_d, older) = open();
    apply(&older, put("k", "1")); // 2
    let mut snap = Vec::new();
    older.export_snapshot(&mut snap).unwrap();
    let (_d2, s) = open();
    for i in 0..5 {
        apply(&s, put("k", &i.to_string())); // 2..=6
    }
    let mut w = s.watch(all_keys(5)).unwrap();
    s.import_snapshot(&mut snap.as_slice()).unwrap();
    let mut revs = vec![];
    while let Some(WatchBatch::Events { events, .. }) = w.try_next() {
        revs.extend(events.iter().map(|e| e.kv.mod_revision));
    }
    assert!(revs.is_empty(), "{revs:?}");
    for i in 0..5 {
        apply(&s, put("k", &i.to_string())); // 3..=7
    }
    while let Some(WatchBatch::Events { events, .. }) = w.try_next() {
        revs.extend(events.iter().map(|e| e.kv.mod_revision));
    }
    assert_eq!(revs, vec![5, 6, 7]);
}
