//! Event validation (`ValidateEventCreate`/`ValidateEventUpdate`), on the stored core/v1 form
//! with the API version the request came through: core/v1 keeps the legacy rules,
//! events.k8s.io/v1 adds the strict ones. Field paths are upstream's (internal field names,
//! except `reportingController`, which core/v1 calls `reportingComponent`).

use serde_json::Value;

use super::{immutable, qualified_name};
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::is_dns1123_subdomain;

const REASON_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REPORTING_INSTANCE_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn str_at<'a>(ev: &'a Value, f: &str) -> &'a str {
    ev[f].as_str().unwrap_or("")
}

fn unset_time(v: &Value) -> bool {
    v.as_str().is_none_or(str::is_empty)
}

fn too_many_chars(field: &str, limit: usize) -> Cause {
    Cause::invalid(field, "", &format!("can have at most {limit} characters"))
}

/// The rules every event passes, whichever API it came through.
fn legacy(ev: &Value, events_api: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ns = ev["metadata"]["namespace"].as_str().unwrap_or("");
    let involved_ns = ev["involvedObject"]["namespace"].as_str().unwrap_or("");
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if unset_time(&ev["eventTime"]) {
        let ok = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved_ns
        };
        if !ok {
            causes.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            causes.push(mismatch());
        }
        let rc_field = if events_api {
            "reportingController"
        } else {
            "reportingComponent"
        };
        let rc = str_at(ev, "reportingComponent");
        if rc.is_empty() {
            causes.push(Cause::required(rc_field, ""));
        }
        causes.extend(qualified_name(rc, rc_field));
        let instance = str_at(ev, "reportingInstance");
        if instance.is_empty() {
            causes.push(Cause::required("reportingInstance", ""));
        }
        if instance.len() > REPORTING_INSTANCE_LIMIT {
            causes.push(too_many_chars(
                "reportingInstance",
                REPORTING_INSTANCE_LIMIT,
            ));
        }
        for (f, limit) in [("action", ACTION_LIMIT), ("reason", REASON_LIMIT)] {
            let v = str_at(ev, f);
            if v.is_empty() {
                causes.push(Cause::required(f, ""));
            }
            if v.len() > limit {
                causes.push(too_many_chars(f, limit));
            }
        }
        if str_at(ev, "message").len() > NOTE_LIMIT {
            causes.push(too_many_chars("message", NOTE_LIMIT));
        }
    }
    if !is_dns1123_subdomain(ns) {
        causes.push(Cause::invalid(
            "namespace",
            ns,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ));
    }
    causes
}

/// `ValidateEventCreate` for an event (core form) written through core/v1 or, with
/// `events_api`, through events.k8s.io/v1.
pub fn validate(ev: &Value, events_api: bool) -> Vec<Cause> {
    let mut causes = legacy(ev, events_api);
    if !events_api {
        return causes;
    }
    let series = &ev["series"];
    if series.is_object() {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            causes.push(Cause::invalid("series.count", "", "should be at least 2"));
        }
        if unset_time(&series["lastObservedTime"]) {
            causes.push(Cause::required("series.lastObservedTime", ""));
        }
    }
    if unset_time(&ev["eventTime"]) {
        causes.push(Cause::required("eventTime", ""));
    }
    let t = str_at(ev, "type");
    if t != "Normal" && t != "Warning" {
        causes.push(Cause::invalid(
            "type",
            "",
            &format!("has invalid value: {t}"),
        ));
    }
    for (core, shown) in [
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
    ] {
        if !unset_time(&ev[core]) {
            causes.push(Cause::invalid(shown, "", "needs to be unset"));
        }
    }
    if ev["count"].as_i64().unwrap_or(0) != 0 {
        causes.push(Cause::invalid("deprecatedCount", "", "needs to be unset"));
    }
    let source = &ev["source"];
    if !str_at(source, "component").is_empty() || !str_at(source, "host").is_empty() {
        causes.push(Cause::invalid("deprecatedSource", "", "needs to be unset"));
    }
    causes
}

/// `ValidateEventUpdate`: through events.k8s.io/v1, only `series` may change (and not be
/// removed once set).
pub fn validate_update(new: &Value, old: &Value, events_api: bool) -> Vec<Cause> {
    let mut causes = legacy(new, events_api);
    if !events_api {
        return causes;
    }
    if old["series"].is_object() && !new["series"].is_object() {
        causes.push(Cause::required("series", "cannot be unset"));
    }
    for f in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "reportingComponent",
        "reportingInstance",
        "action",
        "type",
        "eventTime",
        "related",
    ] {
        causes.extend(immutable(new, old, f));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::super::fields;
    use super::*;
    use serde_json::json;

    fn new_style() -> Value {
        json!({"metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "k3rs.io/kubelet",
            "reportingInstance": "n1", "action": "Pull", "reason": "Pulled", "type": "Normal"})
    }

    #[test]
    fn legacy_events_only_check_namespaces() {
        let ok = json!({"metadata": {"namespace": "default"}, "involvedObject": {"namespace": "default"}, "reason": "X"});
        assert!(validate(&ok, false).is_empty());
        let bad = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        let c = validate(&bad, false);
        assert_eq!(fields(c.clone()), ["involvedObject.namespace"]);
        assert_eq!(
            c[0].message,
            "Invalid value: \"b\": does not match event.namespace"
        );
    }

    #[test]
    fn new_style_events() {
        assert!(validate(&new_style(), true).is_empty());
        assert!(validate(&new_style(), false).is_empty());
        let mut ev = new_style();
        for f in ["reportingComponent", "action", "reason"] {
            ev.as_object_mut().unwrap().remove(f);
        }
        ev["type"] = json!("Fine");
        ev["count"] = json!(4);
        assert_eq!(
            fields(validate(&ev, true)),
            [
                "reportingController",
                "reportingController",
                "action",
                "reason",
                "type",
                "deprecatedCount"
            ]
        );
        assert_eq!(
            fields(validate(&ev, false)),
            [
                "reportingComponent",
                "reportingComponent",
                "action",
                "reason"
            ]
        );
        let mut ev = new_style();
        ev.as_object_mut().unwrap().remove("eventTime");
        assert!(fields(validate(&ev, true)).contains(&"eventTime".to_string()));
    }

    #[test]
    fn updates_may_change_the_series_only() {
        let old = new_style();
        let mut new = old.clone();
        new["series"] = json!({"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"});
        assert!(validate_update(&new, &old, true).is_empty());
        new["reason"] = json!("Other");
        assert_eq!(fields(validate_update(&new, &old, true)), ["reason"]);
        assert!(validate_update(&new, &old, false).is_empty());
    }
}
