//! The API server's datastore trait, one conformance suite run against both implementations:
//! the embedded Raft store (in-process) and a real etcd 3.4 (plain http on loopback).

use std::time::Duration;

use crate::common;
use futures::StreamExt;
use k3rs_datastore::{
    prefix_end, Datastore, Embedded, Error, EtcdClient, EtcdTls, Event, ListRequest, WatchItem,
    WatchRequest, WriteOutcome,
};

fn done(o: WriteOutcome) -> i64 {
    match o {
        WriteOutcome::Done { revision } => revision,
        other => panic!("expected success, got {other:?}"),
    }
}

async fn next_events(s: &mut futures::stream::BoxStream<'static, WatchItem>) -> Vec<Event> {
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("watch event within 10s")
            .expect("watch open");
        match item {
            WatchItem::Events(e) => return e,
            WatchItem::Progress { .. } => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The suite: every operation kube-apiserver uses, with its etcd answer.
async fn conformance(ds: &dyn Datastore) {
    let p = b"/registry/conformance/".to_vec();
    let key = |n: &str| [p.as_slice(), n.as_bytes()].concat();
    let start = ds.current_revision().await.unwrap();

    // Create: MOD==0, then Put; a second create fails with the current state.
    let r1 = done(ds.create(&key("a"), b"v1".to_vec(), 0).await.unwrap());
    assert!(r1 > start);
    match ds.create(&key("a"), b"other".to_vec(), 0).await.unwrap() {
        WriteOutcome::Conflict { current, revision } => {
            let cur = current.expect("current state");
            assert_eq!((cur.value.as_slice(), cur.mod_revision), (&b"v1"[..], r1));
            assert_eq!(revision, r1);
        }
        other => panic!("create over an existing key: {other:?}"),
    }

    // Get.
    let (kv, rev) = ds.get(&key("a")).await.unwrap();
    let kv = kv.expect("created key");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (r1, r1, 1)
    );
    assert_eq!(rev, r1);
    assert_eq!(ds.get(&key("missing")).await.unwrap().0, None);

    // Update: stale revision → the current state; right revision → a new revision.
    match ds.update(&key("a"), r1 - 1, b"x".to_vec()).await.unwrap() {
        WriteOutcome::Conflict { current, .. } => assert_eq!(current.unwrap().mod_revision, r1),
        other => panic!("stale update: {other:?}"),
    }
    let r2 = done(ds.update(&key("a"), r1, b"v2".to_vec()).await.unwrap());
    assert_eq!(r2, r1 + 1);
    match ds.update(&key("gone"), 5, b"x".to_vec()).await.unwrap() {
        WriteOutcome::Conflict { current, .. } => assert!(current.is_none()),
        other => panic!("update of a missing key: {other:?}"),
    }

    // Lists: limit, more, count, continue key, a past revision.
    for n in ["b", "c", "d", "e"] {
        done(ds.create(&key(n), n.as_bytes().to_vec(), 0).await.unwrap());
    }
    let end = prefix_end(&p);
    let page = ds
        .list(ListRequest {
            key: p.clone(),
            range_end: end.clone(),
            limit: 2,
            revision: 0,
        })
        .await
        .unwrap();
    assert!(page.more);
    assert_eq!(page.count, 5);
    assert_eq!(page.kvs.len(), 2);
    let list_rev = page.revision;
    let mut cont = page.kvs[1].key.clone();
    cont.push(0);
    let rest = ds
        .list(ListRequest {
            key: cont,
            range_end: end.clone(),
            limit: 0,
            revision: list_rev,
        })
        .await
        .unwrap();
    assert!(!rest.more);
    let names: Vec<_> = rest.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(names, vec![key("c"), key("d"), key("e")]);
    let past = ds
        .list(ListRequest {
            key: key("a"),
            range_end: Vec::new(),
            limit: 0,
            revision: r1,
        })
        .await
        .unwrap();
    assert_eq!(past.kvs[0].value, b"v1");
    assert!(
        past.revision >= list_rev,
        "header carries the current revision"
    );
    let future = ds
        .list(ListRequest {
            key: p.clone(),
            range_end: end.clone(),
            limit: 0,
            revision: list_rev + 100,
        })
        .await;
    assert_eq!(future, Err(Error::FutureRevision));

    // Watch from a past revision: ordered history, then live events, with prev_kv.
    let mut w = ds
        .watch(WatchRequest {
            key: p.clone(),
            range_end: end.clone(),
            start_revision: r2,
            prev_kv: true,
            progress_notify: false,
        })
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        seen.extend(next_events(&mut w).await);
    }
    assert_eq!(
        seen.iter().map(Event::revision).collect::<Vec<_>>(),
        (r2..r2 + 5).collect::<Vec<_>>()
    );
    match &seen[0] {
        Event::Put { kv, prev } => {
            assert_eq!(kv.value, b"v2");
            assert_eq!(prev.as_ref().unwrap().value, b"v1");
        }
        other => panic!("{other:?}"),
    }

    // Delete: wrong revision → current state; right → gone, and the watch sees it.
    let (b, _) = ds.get(&key("b")).await.unwrap();
    let b = b.unwrap();
    match ds.delete(&key("b"), b.mod_revision + 1).await.unwrap() {
        WriteOutcome::Conflict { current, .. } => assert_eq!(current.unwrap(), b),
        other => panic!("stale delete: {other:?}"),
    }
    let rd = done(ds.delete(&key("b"), b.mod_revision).await.unwrap());
    assert_eq!(ds.get(&key("b")).await.unwrap().0, None);
    match next_events(&mut w).await.as_slice() {
        [Event::Delete {
            key: k,
            revision,
            prev,
        }] => {
            assert_eq!((k.as_slice(), *revision), (key("b").as_slice(), rd));
            assert_eq!(prev.as_ref().unwrap().value, b"b");
        }
        other => panic!("delete event: {other:?}"),
    }
    assert_eq!(ds.current_revision().await.unwrap(), rd);

    // Leases: a key written with one carries it.
    let lease = ds.grant_lease(3600).await.unwrap();
    assert_ne!(lease, 0);
    done(
        ds.create(&key("leased"), b"l".to_vec(), lease)
            .await
            .unwrap(),
    );
    assert_eq!(
        ds.get(&key("leased")).await.unwrap().0.unwrap().lease,
        lease
    );
    let rd = ds.current_revision().await.unwrap();

    // Compaction: older revisions are gone for reads and watches.
    ds.compact(rd).await.unwrap();
    let old = ds
        .list(ListRequest {
            key: p.clone(),
            range_end: end.clone(),
            limit: 0,
            revision: r1,
        })
        .await;
    assert!(matches!(old, Err(Error::Compacted { .. })), "{old:?}");
    let old_watch = ds
        .watch(WatchRequest {
            key: p.clone(),
            range_end: end.clone(),
            start_revision: r1,
            prev_kv: false,
            progress_notify: false,
        })
        .await;
    match old_watch {
        Err(Error::Compacted { .. }) => {}
        Ok(mut s) => match tokio::time::timeout(Duration::from_secs(10), s.next()).await {
            Ok(Some(WatchItem::Compacted { .. })) => {}
            other => panic!("watch from a compacted revision: {other:?}"),
        },
        Err(e) => panic!("watch from a compacted revision: {e}"),
    }
}

#[test]
fn embedded_store_conforms() {
    let rt = common::client::runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let node = k3rs_raft::Node::start(k3rs_raft::NodeConfig {
            data_dir: dir.path().join("db"),
            node_id: 1,
            name: "conformance".into(),
            peer_urls: vec!["https://127.0.0.1:2380".into()],
            client_urls: vec!["https://127.0.0.1:2379".into()],
            heartbeat_interval: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            snapshot_entries: 10_000,
        })
        .await
        .unwrap();
        conformance(&Embedded::new(node.clone())).await;
        node.shutdown().await.unwrap();
    });
}

#[test]
fn real_etcd_conforms() {
    let etcd = common::Etcd::start();
    let rt = common::client::runtime();
    rt.block_on(async {
        let ds = EtcdClient::connect(&etcd.endpoint().url, &EtcdTls::default()).unwrap();
        conformance(&ds).await;
    });
}
