use k8s_openapi::api::core::v1::ObjectReference;

use super::*;
use crate::events::{build, EventType};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some("prod".into()),
        uid: Some(format!("uid-{name}")),
        field_path: Some("spec.containers{c}".into()),
        ..ObjectReference::default()
    }
}

fn ev(object: &str, reason: &str, message: &str, at: Timestamp) -> Event {
    build(
        &pod(object),
        EventType::Warning,
        reason,
        message,
        "kubelet",
        "node-1",
        at,
    )
}

fn created(w: Option<Write>) -> Event {
    match w {
        Some(Write::Create(e)) => *e,
        other => panic!("not a create: {other:?}"),
    }
}

#[test]
fn the_first_event_is_created_as_built() {
    let mut c = Correlator::default();
    let e = ev("web", "Unhealthy", "Liveness probe failed", t(0));
    assert_eq!(created(c.correlate(e.clone(), t(0))), e);
}

#[test]
fn repeats_patch_the_count_of_the_first_event() {
    let mut c = Correlator::default();
    let first = created(c.correlate(ev("web", "Unhealthy", "a", t(0)), t(0)));
    assert_eq!(first.metadata.name.as_deref(), Some("web.17979cfe362a0000"));

    let w = c
        .correlate(ev("web", "Unhealthy", "a", t(5)), t(5))
        .unwrap();
    let Write::Patch {
        namespace,
        name,
        patch,
        event,
    } = w
    else {
        panic!("not a patch: {w:?}")
    };
    assert_eq!(namespace, "prod");
    assert_eq!(name, "web.17979cfe362a0000");
    assert_eq!(
        patch,
        serde_json::json!({"count": 2, "lastTimestamp": "2023-11-14T22:13:25Z", "message": "a"})
    );
    // If the Event is gone, it is created again under its name with the count so far.
    assert_eq!(event.metadata.name.as_deref(), Some("web.17979cfe362a0000"));
    assert_eq!(event.count, Some(2));
    assert_eq!(event.first_timestamp, Some(Time(t(0))));
    assert_eq!(event.last_timestamp, Some(Time(t(5))));

    // Another message, object or field path is another Event; the first keeps counting.
    created(c.correlate(ev("web", "Unhealthy", "b", t(6)), t(6)));
    created(c.correlate(ev("db", "Unhealthy", "a", t(6)), t(6)));
    let mut other_container = ev("web", "Unhealthy", "a", t(6));
    other_container.involved_object.field_path = Some("spec.containers{d}".into());
    created(c.correlate(other_container, t(6)));
    let w = c.correlate(ev("web", "Unhealthy", "a", t(7)), t(7));
    assert!(
        matches!(&w, Some(Write::Patch { patch, .. }) if patch["count"] == 3),
        "{w:?}"
    );
}

#[test]
fn the_tenth_similar_message_within_ten_minutes_is_combined() {
    let mut c = Correlator::default();
    for i in 0..9 {
        let e = created(c.correlate(ev("web", "FailedCreate", &format!("m{i}"), t(i)), t(i)));
        assert_eq!(e.message, Some(format!("m{i}")));
    }
    let combined = created(c.correlate(ev("web", "FailedCreate", "m9", t(9)), t(9)));
    assert_eq!(
        combined.message.as_deref(),
        Some("(combined from similar events): m9")
    );
    assert_eq!(combined.count, Some(1));
    assert_eq!(combined.reason.as_deref(), Some("FailedCreate"));
    assert_eq!(
        combined.metadata.name.as_deref(),
        Some("web.17979d004e9b1a00")
    );

    // Further similar ones count on the combined Event, with the latest message.
    let w = c
        .correlate(ev("web", "FailedCreate", "m10", t(10)), t(10))
        .unwrap();
    let Write::Patch { name, patch, .. } = w else {
        panic!("not a patch: {w:?}")
    };
    assert_eq!(name, "web.17979d004e9b1a00");
    assert_eq!(
        patch,
        serde_json::json!({"count": 2, "lastTimestamp": "2023-11-14T22:13:30Z",
            "message": "(combined from similar events): m10"})
    );

    // Another reason is not similar.
    created(c.correlate(ev("web", "BackOff", "m0", t(11)), t(11)));
}

#[test]
fn similar_events_further_apart_than_ten_minutes_start_over() {
    let mut c = Correlator::default();
    for i in 0..9 {
        created(c.correlate(ev("web", "R", &format!("m{i}"), t(i)), t(i)));
    }
    // 601 s after the last one: the record starts over, so this is a plain new Event.
    let e = created(c.correlate(ev("web", "R", "m9", t(8 + 601)), t(8 + 601)));
    assert_eq!(e.message.as_deref(), Some("m9"));
}

#[test]
fn the_spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() {
    let mut c = Correlator::default();
    let writes: Vec<_> = (0..30)
        .map(|_| c.correlate(ev("web", "Unhealthy", "a", t(0)), t(0)))
        .collect();
    assert_eq!(writes.iter().filter(|w| w.is_some()).count(), 25);
    assert!(writes[25..].iter().all(Option::is_none));

    // Counting went on while skipped: the next write that passes carries the full count.
    assert!(c
        .correlate(ev("web", "Unhealthy", "a", t(299)), t(299))
        .is_none());
    let w = c.correlate(ev("web", "Unhealthy", "a", t(300)), t(300));
    assert!(
        matches!(&w, Some(Write::Patch { patch, .. }) if patch["count"] == 32),
        "{w:?}"
    );
    assert!(c
        .correlate(ev("web", "Unhealthy", "a", t(301)), t(301))
        .is_none());

    // The bucket is per source, object, reason and message: another pod, another reason
    // or another message about the same pod still has its burst.
    assert!(c
        .correlate(ev("web", "BackOff", "a", t(301)), t(301))
        .is_some());
    assert!(c
        .correlate(ev("web", "Unhealthy", "b", t(301)), t(301))
        .is_some());
    assert!(c
        .correlate(ev("db", "Unhealthy", "a", t(301)), t(301))
        .is_some());
    let mut other_source = ev("web", "Unhealthy", "a", t(301));
    other_source.source = Some(k8s_openapi::api::core::v1::EventSource {
        component: Some("kubelet".into()),
        host: Some("node-2".into()),
    });
    assert!(c.correlate(other_source, t(301)).is_some());
}

#[test]
fn the_caches_start_over_when_full() {
    let mut c = Correlator::default();
    for i in 0..MAX_KEYS {
        created(c.correlate(ev(&format!("p{i}"), "R", "m", t(0)), t(0)));
    }
    assert!(matches!(
        c.correlate(ev("p1", "R", "m", t(1)), t(1)),
        Some(Write::Patch { .. })
    ));
    created(c.correlate(ev("one-too-many", "R", "m", t(2)), t(2)));
    // p1 was forgotten with the rest: its next repeat is a new Event.
    created(c.correlate(ev("p1", "R", "m", t(3)), t(3)));
}
