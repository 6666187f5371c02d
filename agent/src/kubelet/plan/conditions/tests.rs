use super::*;
use crate::kubelet::plan::spec::tests::pod;
use serde_json::{json, Value};

fn statuses(v: Value) -> Vec<ContainerStatus> {
    serde_json::from_value(v).unwrap()
}

fn s(name: &str, ready: bool, state: Value) -> Value {
    json!({"name": name, "image": "i", "imageID": "", "ready": ready, "restartCount": 0, "state": state})
}

fn two_inits() -> Pod {
    pod(json!({"spec": {"initContainers": [
        {"name": "i1", "image": "i"}, {"name": "i2", "image": "i"}]}}))
}

#[test]
fn go_lists_print_like_fmt() {
    assert_eq!(go_list(&["a"]), "[a]");
    assert_eq!(go_list(&["a", "b"]), "[a b]");
}

#[test]
fn initialized_reports_unknown_then_incomplete() {
    let p = two_inits();
    let all = statuses(json!([s("i1", false, json!({"running": {}}))]));
    assert_eq!(
        initialized(&p, &all, "Pending"),
        cond(
            "Initialized",
            false,
            "ContainersNotInitialized",
            "containers with unknown status: [i2], containers with incomplete status: [i1]".into()
        )
    );
    // A regular container that started means the pod was initialized.
    let all = statuses(json!([s(
        "c",
        false,
        json!({"terminated": {"exitCode": 1}})
    )]));
    assert_eq!(initialized(&p, &all, "Running").status, "True");
}

#[test]
fn containers_ready_on_terminal_phases() {
    let p = pod(json!({}));
    let all = statuses(json!([s(
        "c",
        false,
        json!({"terminated": {"exitCode": 0}})
    )]));
    assert_eq!(
        containers_ready(&p, &all, "Succeeded"),
        cond("ContainersReady", false, "PodCompleted", String::new())
    );
    assert_eq!(
        containers_ready(&p, &all, "Failed"),
        cond("ContainersReady", false, "PodFailed", String::new())
    );
    // Succeeded but a container status is missing: the usual message.
    assert_eq!(
        containers_ready(&p, &[], "Succeeded"),
        cond(
            "ContainersReady",
            false,
            "ContainersNotReady",
            "containers with unknown status: [c]".into()
        )
    );
}

#[test]
fn stamp_keeps_the_time_of_an_unchanged_status() {
    let old = vec![PodCondition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: Some(Time("2027-01-01T00:00:00Z".parse().unwrap())),
        ..Default::default()
    }];
    let now: Timestamp = "2027-01-02T00:00:00Z".parse().unwrap();
    let kept = stamp(cond("Ready", true, "", String::new()), &old, now);
    assert_eq!(
        kept.last_transition_time,
        Some(Time("2027-01-01T00:00:00Z".parse().unwrap()))
    );
    let moved = stamp(cond("Ready", false, "", String::new()), &old, now);
    assert_eq!(moved.last_transition_time, Some(Time(now)));
    let new = stamp(cond("Initialized", true, "", String::new()), &old, now);
    assert_eq!(new.last_transition_time, Some(Time(now)));
}
