use super::*;
use crate::kubelet::plan::lifecycle::tests::ctr;
use serde_json::json;

#[test]
fn an_unknown_container_that_was_running_is_reported_terminated() {
    let c = ctr("c", ContainerState::Unknown, 0, 4, 1);
    let old: ContainerStatus = serde_json::from_value(json!({
        "name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 4,
        "state": {"running": {}}}))
    .unwrap();
    let s = convert(&c, Some(&old));
    assert_eq!(s.restart_count, 5);
    assert_eq!(
        serde_json::to_value(&s.state).unwrap(),
        json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated"}})
    );
    // Never seen running: just waiting.
    let s = convert(&c, None);
    assert_eq!(s.restart_count, 4);
    assert_eq!(
        serde_json::to_value(&s.state).unwrap(),
        json!({"waiting": {}})
    );
}

#[test]
fn created_containers_wait() {
    let s = convert(&ctr("c", ContainerState::Created, 0, 0, 1), None);
    assert_eq!(
        serde_json::to_value(&s.state).unwrap(),
        json!({"waiting": {}})
    );
    assert_eq!(s.container_id.as_deref(), Some("containerd://c-0"));
}
