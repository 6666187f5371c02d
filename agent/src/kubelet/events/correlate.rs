//! Upstream's event correlator, reduced to its deduplication: an Event identical to one already
//! recorded (same object, field path, type, reason and message) bumps that Event's `count` and
//! `lastTimestamp` instead of creating another object. The cache is bounded like upstream's LRU
//! (4096 keys; past that it starts over).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// The component kubelet events are reported as.
pub const COMPONENT: &str = "kubelet";

const MAX_KEYS: usize = 4096;

/// One event to record.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEvent {
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

impl PodEvent {
    fn key(&self) -> Key {
        let r = &self.regarding;
        (
            r.namespace.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default(),
            r.uid.clone().unwrap_or_default(),
            r.field_path.clone().unwrap_or_default(),
            self.type_,
            self.reason.clone(),
            self.message.clone(),
        )
    }
}

type Key = (String, String, String, String, &'static str, String, String);

/// What to write for an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Create(Box<Event>),
    /// Patch the existing Event `name` with this count and last timestamp.
    Bump {
        namespace: String,
        name: String,
        count: i32,
        last: Timestamp,
    },
}

/// The events recorded so far, by what makes them identical.
#[derive(Debug, Default)]
pub struct Correlator {
    seen: HashMap<Key, (String, i32)>,
}

impl Correlator {
    /// What recording `ev` at `now` on node `host` writes.
    pub fn observe(&mut self, ev: &PodEvent, host: &str, now: Timestamp) -> Write {
        let key = ev.key();
        if let Some((name, count)) = self.seen.get_mut(&key) {
            *count += 1;
            return Write::Bump {
                namespace: key.0.clone(),
                name: name.clone(),
                count: *count,
                last: now,
            };
        }
        if self.seen.len() >= MAX_KEYS {
            self.seen.clear();
        }
        let event = build(ev, host, now);
        let name = event.metadata.name.clone().unwrap_or_default();
        self.seen.insert(key, (name, 1));
        Write::Create(Box::new(event))
    }

    /// Forgets `ev` (its Event is gone, e.g. expired): the next one is created anew.
    pub fn forget(&mut self, ev: &PodEvent) {
        self.seen.remove(&ev.key());
    }
}

/// The Event first recording `ev` creates.
pub fn build(ev: &PodEvent, host: &str, now: Timestamp) -> Event {
    let r = &ev.regarding;
    let name = r.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(r.namespace.clone().unwrap_or_else(|| "default".into())),
            ..ObjectMeta::default()
        },
        involved_object: r.clone(),
        reason: Some(ev.reason.clone()),
        message: Some(ev.message.clone()),
        type_: Some(ev.type_.to_string()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(host.into()),
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(host.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(message: &str) -> PodEvent {
        PodEvent {
            regarding: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some("web".into()),
                namespace: Some("prod".into()),
                uid: Some("u1".into()),
                field_path: Some("spec.containers{c}".into()),
                ..ObjectReference::default()
            },
            type_: "Warning",
            reason: "Unhealthy".into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_first_event_is_created_as_the_kubelet() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let mut c = Correlator::default();
        let Write::Create(e) = c.observe(&ev("Liveness probe failed: x"), "node-1", now) else {
            panic!("not a create")
        };
        assert_eq!(
            serde_json::to_value(&*e).unwrap(),
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "web.17979cfe362a0000", "namespace": "prod"},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web",
                    "namespace": "prod", "uid": "u1", "fieldPath": "spec.containers{c}"},
                "reason": "Unhealthy",
                "message": "Liveness probe failed: x",
                "type": "Warning",
                "source": {"component": "kubelet", "host": "node-1"},
                "reportingComponent": "kubelet",
                "reportingInstance": "node-1",
                "count": 1,
                "firstTimestamp": "2023-11-14T22:13:20Z",
                "lastTimestamp": "2023-11-14T22:13:20Z",
            })
        );
    }

    #[test]
    fn repeats_bump_the_count_and_other_messages_are_new_events() {
        let t = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
        let mut c = Correlator::default();
        assert!(matches!(c.observe(&ev("a"), "n", t(0)), Write::Create(_)));
        assert_eq!(
            c.observe(&ev("a"), "n", t(5)),
            Write::Bump {
                namespace: "prod".into(),
                name: "web.17979cfe362a0000".into(),
                count: 2,
                last: t(5),
            }
        );
        assert!(matches!(c.observe(&ev("b"), "n", t(6)), Write::Create(_)));
        assert!(matches!(
            c.observe(&ev("a"), "n", t(7)),
            Write::Bump { count: 3, .. }
        ));
        c.forget(&ev("a"));
        assert!(matches!(c.observe(&ev("a"), "n", t(8)), Write::Create(_)));
    }
}
