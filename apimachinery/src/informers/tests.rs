use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

use super::*;

fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                ..ManagedFieldsEntry::default()
            }]),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// What the subscription has delivered so far, as `(event, name, value)`.
fn drain(s: &mut Subscription<ConfigMap>) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    // Outside Tokio's cooperative budget, which would make a long drain stop after 128.
    while let Some(Some(e)) = tokio::task::unconstrained(s.next()).now_or_never() {
        let (kind, o) = match e {
            watcher::Event::Init => ("Init", None),
            watcher::Event::InitApply(o) => ("InitApply", Some(o)),
            watcher::Event::InitDone => ("InitDone", None),
            watcher::Event::Apply(o) => ("Apply", Some(o)),
            watcher::Event::Delete(o) => ("Delete", Some(o)),
        };
        let name = o.as_ref().and_then(|o| o.metadata.name.clone());
        let value = o.as_ref().and_then(|o| o.data.as_ref()?.get("k").cloned());
        out.push((kind, name.unwrap_or_default(), value.unwrap_or_default()));
    }
    out
}

fn list(feed: &mut Feed<ConfigMap>, objects: &[ConfigMap]) {
    feed.apply(watcher::Event::Init);
    for o in objects {
        feed.apply(watcher::Event::InitApply(o.clone()));
    }
    feed.apply(watcher::Event::InitDone);
}

fn ev(kind: &'static str, name: &str, value: &str) -> (&'static str, String, String) {
    (kind, name.into(), value.into())
}

#[tokio::test]
async fn an_early_subscriber_gets_the_first_list_then_the_changes() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let mut early = informer.subscribe();
    assert_eq!(drain(&mut early), vec![], "nothing before the list");

    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    let mut got = drain(&mut early);
    got[1..3].sort();
    assert_eq!(
        got,
        vec![
            ev("Init", "", ""),
            ev("InitApply", "a", "1"),
            ev("InitApply", "b", "1"),
            ev("InitDone", "", ""),
        ]
    );
    feed.apply(watcher::Event::Apply(cm("a", "2")));
    feed.apply(watcher::Event::Delete(cm("b", "1")));
    assert_eq!(
        drain(&mut early),
        vec![ev("Apply", "a", "2"), ev("Delete", "b", "1")]
    );
}

#[tokio::test]
async fn the_list_is_the_cache_when_listed_and_the_changes_after_it_follow_in_order() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let mut s = informer.subscribe();
    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    feed.apply(watcher::Event::Apply(cm("a", "2")));
    feed.apply(watcher::Event::Delete(cm("b", "1")));
    let mut got = drain(&mut s);
    got[1..3].sort();
    assert_eq!(
        got,
        vec![
            ev("Init", "", ""),
            ev("InitApply", "a", "1"),
            ev("InitApply", "b", "1"),
            ev("InitDone", "", ""),
            ev("Apply", "a", "2"),
            ev("Delete", "b", "1"),
        ]
    );
}

#[tokio::test]
async fn a_late_subscriber_starts_with_the_cache_as_a_list() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[cm("a", "1")]);
    feed.apply(watcher::Event::Apply(cm("a", "2")));

    let mut late = informer.subscribe();
    feed.apply(watcher::Event::Apply(cm("c", "1")));
    assert_eq!(
        drain(&mut late),
        vec![
            ev("Init", "", ""),
            ev("InitApply", "a", "2"),
            ev("InitDone", "", ""),
            ev("Apply", "c", "1"),
        ]
    );
}

#[tokio::test]
async fn a_relist_announces_what_it_lacks_as_deleted_then_gives_the_complete_list() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    let mut s = informer.subscribe();
    drain(&mut s);

    // "b" went away while the watch was down: the relist does not name it.
    list(&mut feed, &[cm("a", "3"), cm("c", "1")]);
    let mut got = drain(&mut s);
    got[2..4].sort();
    assert_eq!(
        got,
        vec![
            ev("Delete", "b", "1"),
            ev("Init", "", ""),
            ev("InitApply", "a", "3"),
            ev("InitApply", "c", "1"),
            ev("InitDone", "", ""),
        ]
    );
    assert_eq!(informer.store.state().len(), 2);
}

#[tokio::test]
async fn a_subscriber_that_falls_far_behind_misses_nothing() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[]);
    let mut slow = informer.subscribe();
    drain(&mut slow);
    for i in 0..10_000 {
        feed.apply(watcher::Event::Apply(cm(&format!("o{i}"), "1")));
    }
    feed.apply(watcher::Event::Delete(cm("o0", "1")));
    let got = drain(&mut slow);
    assert_eq!(got.len(), 10_001, "every change, in order");
    assert_eq!(got[9_999], ev("Apply", "o9999", "1"));
    assert_eq!(got[10_000], ev("Delete", "o0", "1"));
}

#[tokio::test]
async fn a_dropped_subscriber_is_forgotten() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let kept = informer.subscribe();
    drop(informer.subscribe());
    list(&mut feed, &[cm("a", "1")]);
    assert_eq!(lock(&informer.subscribers).queues.len(), 1);
    drop(kept);
    feed.apply(watcher::Event::Apply(cm("a", "2")));
    assert_eq!(lock(&informer.subscribers).queues.len(), 0);
}

#[tokio::test]
async fn cached_objects_have_no_managed_fields_and_are_shared_with_subscribers() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[]);
    let mut s = informer.subscribe();
    drain(&mut s);
    feed.apply(watcher::Event::Apply(cm("a", "1")));
    let cached = informer.store.state().pop().unwrap();
    assert_eq!(cached.metadata.managed_fields, None);
    let Some(Some(watcher::Event::Apply(seen))) = s.next().now_or_never() else {
        panic!("no apply")
    };
    assert!(Arc::ptr_eq(&cached, &seen), "one copy of the object");
}

/// An index of each ConfigMap's value by name (a relist starts it afresh).
#[derive(Default)]
struct Values(std::collections::BTreeMap<String, String>);

impl Indexer<ConfigMap> for Values {
    fn apply(&mut self, event: watcher::Event<Arc<ConfigMap>>) {
        let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
        match event {
            watcher::Event::Init => self.0.clear(),
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                let value = o.data.as_ref().and_then(|d| d.get("k").cloned());
                self.0.insert(name(&o), value.unwrap_or_default());
            }
            watcher::Event::Delete(o) => {
                self.0.remove(&name(&o));
            }
            watcher::Event::InitDone => {}
        }
    }
}

fn values(view: &Shared<Values>) -> Vec<(String, String)> {
    read(view, |v| v.0.clone().into_iter().collect())
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn an_index_is_fed_before_any_subscriber_and_shared_by_type() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    // Made before the first list: returns once the list is in it.
    let mut early = Box::pin(informer.index::<Values>());
    assert!((&mut early).now_or_never().is_none(), "waits for the list");
    let mut s = informer.subscribe();
    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    let view = early.now_or_never().expect("synced");
    assert_eq!(values(&view), pairs(&[("a", "1"), ("b", "1")]));
    drain(&mut s);

    // A change is in the index by the time any subscriber is told of it.
    feed.apply(watcher::Event::Apply(cm("a", "2")));
    feed.apply(watcher::Event::Delete(cm("b", "1")));
    assert_eq!(values(&view), pairs(&[("a", "2")]));
    assert_eq!(drain(&mut s).len(), 2);

    // One index per type: a second reader gets the same one.
    let again = informer.index::<Values>().now_or_never().expect("synced");
    assert!(Arc::ptr_eq(&view, &again));
    assert_eq!(lock(&informer.subscribers).indexes.len(), 1);

    // A relist: what it lacks goes, the index is the new list.
    list(&mut feed, &[cm("c", "1")]);
    assert_eq!(values(&view), pairs(&[("c", "1")]));
}

#[tokio::test]
async fn an_index_made_after_the_first_list_starts_with_the_cache() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[cm("a", "1")]);
    feed.apply(watcher::Event::Apply(cm("b", "1")));
    let view = informer.index::<Values>().now_or_never().expect("synced");
    assert_eq!(values(&view), pairs(&[("a", "1"), ("b", "1")]));
    feed.apply(watcher::Event::Apply(cm("b", "2")));
    assert_eq!(values(&view), pairs(&[("a", "1"), ("b", "2")]));
}

#[tokio::test]
async fn touched_yields_listed_applied_and_deleted_objects() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let mut touched = Box::pin(informer.touched());
    let mut next = move || {
        let o = touched.next().now_or_never().flatten();
        o.map(|o| o.metadata.name.clone().unwrap_or_default())
    };
    list(&mut feed, &[cm("a", "1")]);
    assert_eq!(next(), Some("a".into()));
    feed.apply(watcher::Event::Apply(cm("b", "1")));
    assert_eq!(next(), Some("b".into()));
    feed.apply(watcher::Event::Delete(cm("a", "1")));
    assert_eq!(next(), Some("a".into()));
    assert_eq!(next(), None);
}

#[tokio::test]
async fn every_task_waiting_for_the_synced_store_gets_it() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let informer = informer.clone();
            tokio::spawn(async move { informer.synced_store().await.state().len() })
        })
        .collect();
    // Every waiter is parked before the list completes.
    tokio::task::yield_now().await;
    assert!(waiters.iter().all(|w| !w.is_finished()));
    list(&mut feed, &[cm("a", "1")]);
    let sizes = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        futures::future::join_all(waiters),
    )
    .await
    .expect("every waiter woke");
    assert!(sizes.into_iter().all(|n| n.unwrap() == 1));
    // Their stores are kube-runtime's, already ready for later `wait_until_ready` calls.
    assert!(informer
        .store
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok()));
}

#[tokio::test]
async fn two_tasks_waiting_for_sync_both_wake_and_read_the_list() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    assert!(!informer.has_synced());
    assert!(informer.list().is_empty(), "empty before the first list");
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let informer = informer.clone();
            tokio::spawn(async move {
                informer.wait_synced().await;
                informer.list().len()
            })
        })
        .collect();
    tokio::task::yield_now().await;
    assert!(waiters.iter().all(|w| !w.is_finished()));
    feed.apply(watcher::Event::Init);
    feed.apply(watcher::Event::InitApply(cm("a", "1")));
    assert!(informer.list().is_empty(), "a list in progress is not read");
    feed.apply(watcher::Event::InitDone);
    let sizes = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        futures::future::join_all(waiters),
    )
    .await
    .expect("both waiters woke");
    assert_eq!(
        sizes.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        vec![1, 1]
    );
    assert!(informer.has_synced());
    let a = informer.get(&ObjectRef::new("a").within("ns")).unwrap();
    assert_eq!(a.metadata.managed_fields, None);
}

#[tokio::test]
async fn an_unstarted_factory_shares_its_informers_and_starts_none_before_its_client() {
    let factory = SharedInformerFactory::unstarted(CancellationToken::new());
    let a = factory.informer::<ConfigMap>();
    let b = factory.informer::<ConfigMap>();
    assert!(
        Arc::ptr_eq(&a.subscribers, &b.subscribers),
        "one informer per type"
    );
    {
        let state = lock(&factory.state);
        assert!(state.client.is_none());
        assert_eq!(state.unstarted.len(), 1, "its watch waits for the client");
    }
    // Without a client it never syncs.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), a.wait_synced())
            .await
            .is_err()
    );
}
