//! The one event recorder of the controllers, end to end: a StatefulSet whose pod the
//! namespace's quota refuses keeps failing (retried with backoff), and its `FailedCreate`
//! Event is one Event whose `count` grows (client-go's correlator), not one Event per try.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, wait_json, Kubectl};
use serde_json::Value;

const QUOTA: &str = r#"{"apiVersion": "v1", "kind": "ResourceQuota",
    "metadata": {"name": "none", "namespace": "ev"}, "spec": {"hard": {"pods": "0"}}}"#;

const STATEFUL_SET: &str = r#"{"apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "web", "namespace": "ev"},
    "spec": {"replicas": 1, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}"#;

/// The `FailedCreate` Events about StatefulSet `web`.
fn failed_creates(k: &Kubectl) -> Vec<Value> {
    let events = json(k, &["get", "events", "-n", "ev"]);
    events["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e["reason"] == "FailedCreate"
                && e["involvedObject"]["kind"] == "StatefulSet"
                && e["involvedObject"]["name"] == "web"
        })
        .collect()
}

#[test]
fn a_repeated_controller_event_is_counted_on_one_event() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "ev"]);
    k.ok_stdin(&["create", "-f", "-"], Some(QUOTA));
    wait_json(
        &k,
        "the quota's status",
        &["get", "resourcequota", "none", "-n", "ev"],
        |q| q["status"]["hard"]["pods"] == "0",
    );
    k.ok_stdin(&["create", "-f", "-"], Some(STATEFUL_SET));

    let events = common::wait_for(
        "a FailedCreate Event counted 3 times",
        Duration::from_secs(60),
        || {
            let events = failed_creates(&k);
            events
                .iter()
                .any(|e| e["count"].as_i64().unwrap_or(0) >= 3)
                .then_some(events)
        },
    );
    assert_eq!(events.len(), 1, "one Event for the repeats: {events:#?}");
    let e = &events[0];
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(r#"pods "web-0" is forbidden: exceeded quota: none"#),
        "{e:#}"
    );
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["source"]["component"], "statefulset-controller");
    assert!(
        e["lastTimestamp"].as_str() >= e["firstTimestamp"].as_str(),
        "{e:#}"
    );
    assert!(k
        .run(&["get", "pod", "web-0", "-n", "ev"])
        .stderr
        .contains("NotFound"));
}
