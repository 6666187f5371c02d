//! `events.k8s.io/v1` Events are core/v1 Events seen through another schema: kube-apiserver
//! stores both under `/registry/events` and converts field by field (its
//! `Convert_v1_Event_To_core_Event` and back). The store keeps the core/v1 form; these pure
//! functions convert at the edge.
//!
//! # Guarantees
//! - Fields that exist in both schemas keep their values; renamed ones move
//!   (`involvedObject` ↔ `regarding`, `message` ↔ `note`, `reportingComponent` ↔
//!   `reportingController`, `source`/`firstTimestamp`/`lastTimestamp`/`count` ↔ their
//!   `deprecated*` counterparts). Absent fields stay absent.
//! - `to_core(to_events(e)) == e` for a core Event without unknown fields, and vice versa.

use serde_json::{Map, Value};

use k3rs_apimachinery::catalog::Resource;

/// (core/v1 name, events.k8s.io/v1 name) of every Event field besides metadata.
const FIELDS: &[(&str, &str)] = &[
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("involvedObject", "regarding"),
    ("related", "related"),
    ("message", "note"),
    ("type", "type"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Whether `r` is the events.k8s.io view of core Events.
pub fn is_events_api(r: &Resource) -> bool {
    r.group == "events.k8s.io" && r.kind == "Event"
}

fn convert(ev: &Value, api_version: &str, to_events: bool) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::from(api_version));
    out.insert("kind".into(), Value::from("Event"));
    if let Some(m) = ev.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    for (core, events) in FIELDS {
        let (from, to) = if to_events {
            (core, events)
        } else {
            (events, core)
        };
        if let Some(v) = ev.get(*from) {
            out.insert((*to).to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// A core/v1 Event as an events.k8s.io/v1 Event.
pub fn to_events(core: &Value) -> Value {
    convert(core, "events.k8s.io/v1", true)
}

/// An events.k8s.io/v1 Event as a core/v1 Event.
pub fn to_core(events: &Value) -> Value {
    convert(events, "v1", false)
}

/// The object as `r` serves it, from its stored form.
pub fn from_storage(r: &Resource, obj: Value) -> Value {
    if is_events_api(r) {
        to_events(&obj)
    } else {
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn core_event() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default", "resourceVersion": "7"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u1"},
            "reason": "Pulled", "message": "image pulled", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "count": 3,
            "eventTime": null,
            "reportingComponent": "kubelet", "reportingInstance": "n1",
            "action": "Pull",
            "related": {"kind": "Node", "name": "n1"},
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
        })
    }

    #[test]
    fn core_to_events_renames_fields() {
        let e = to_events(&core_event());
        assert_eq!(
            e,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "web.1", "namespace": "default", "resourceVersion": "7"},
                "regarding": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u1"},
                "reason": "Pulled", "note": "image pulled", "type": "Normal",
                "deprecatedSource": {"component": "kubelet", "host": "n1"},
                "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
                "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
                "deprecatedCount": 3,
                "eventTime": null,
                "reportingController": "kubelet", "reportingInstance": "n1",
                "action": "Pull",
                "related": {"kind": "Node", "name": "n1"},
                "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            })
        );
    }

    #[test]
    fn round_trips() {
        let core = core_event();
        assert_eq!(to_core(&to_events(&core)), core);
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "x", "namespace": "ns"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "k3rs.io/scheduler", "reportingInstance": "s1",
            "action": "Binding", "reason": "Scheduled", "note": "assigned",
            "regarding": {"kind": "Pod", "name": "p"}, "type": "Normal",
        });
        let core = to_core(&events);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "assigned");
        assert_eq!(core["reportingComponent"], "k3rs.io/scheduler");
        assert_eq!(core["involvedObject"], json!({"kind": "Pod", "name": "p"}));
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        assert_eq!(to_events(&core), events);
    }
}
