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
    while let Some(Some(e)) = s.next().now_or_never() {
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
async fn the_list_is_read_from_the_cache_when_the_subscriber_gets_to_it() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    let mut s = informer.subscribe();
    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    feed.apply(watcher::Event::Apply(cm("a", "2")));
    feed.apply(watcher::Event::Delete(cm("b", "1")));
    // The list shows the cache as it is by then; the changes after it come again.
    assert_eq!(
        drain(&mut s),
        vec![
            ev("Init", "", ""),
            ev("InitApply", "a", "2"),
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
async fn a_relist_is_given_as_a_complete_list_once_it_is_done() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[cm("a", "1"), cm("b", "1")]);
    let mut s = informer.subscribe();
    drain(&mut s);

    // "b" went away while the watch was down: the relist does not name it.
    list(&mut feed, &[cm("a", "3")]);
    assert_eq!(
        drain(&mut s),
        vec![
            ev("Init", "", ""),
            ev("InitApply", "a", "3"),
            ev("InitDone", "", ""),
        ]
    );
    assert_eq!(informer.store().state().len(), 1);
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_gets_a_complete_list() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[]);
    let mut slow = informer.subscribe();
    drain(&mut slow);
    for i in 0..BUFFER + 10 {
        feed.apply(watcher::Event::Apply(cm(&format!("o{i}"), "1")));
    }
    let got = drain(&mut slow);
    let lists = got.iter().filter(|e| e.0 == "InitDone").count();
    assert_eq!(lists, 1, "one complete list for the lag");
    let listed = got.iter().filter(|e| e.0 == "InitApply").count();
    assert_eq!(listed, BUFFER + 10, "the list holds every object");
}

#[tokio::test]
async fn cached_objects_have_no_managed_fields_and_are_shared_with_subscribers() {
    let (informer, mut feed) = Informer::<ConfigMap>::new();
    list(&mut feed, &[]);
    let mut s = informer.subscribe();
    drain(&mut s);
    feed.apply(watcher::Event::Apply(cm("a", "1")));
    let cached = informer.store().state().pop().unwrap();
    assert_eq!(cached.metadata.managed_fields, None);
    let Some(Some(watcher::Event::Apply(seen))) = s.next().now_or_never() else {
        panic!("no apply")
    };
    assert!(Arc::ptr_eq(&cached, &seen), "one copy of the object");
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
