//! Deleted and terminal pods.

use super::*;

#[test]
fn a_deleted_pod_stops_with_its_grace_period_then_is_cleaned_up() {
    let p = pod(json!({
        "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 10},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.35",
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}}]}}));
    let o = observed(
        ready(),
        vec![ctr("c", Exited, 1, 0, 1), ctr("c", Running, 0, 1, 5)],
    );
    assert_eq!(
        actions(&p, &o),
        vec![
            Action::RunPreStop {
                id: "c-1".into(),
                name: "c".into(),
                timeout: Duration::from_secs(10)
            },
            kill("c-1", 10, KillReason::PodStopping, "Stopping container c"),
            kill_sandbox("s1")
        ]
    );
    let o = observed(
        dead(),
        vec![ctr("c", Exited, 1, 0, 1), ctr("c", Exited, 143, 1, 5)],
    );
    assert_eq!(
        actions(&p, &o),
        vec![
            Action::FinishDeletion { uid: "u1".into() },
            Action::RemoveContainer { id: "c-1".into() },
            Action::RemoveContainer { id: "c-0".into() },
            Action::RemoveSandbox { id: "s1".into() }
        ]
    );
    // Created (never started) and unknown containers do not hold the deletion back.
    let o = observed(
        dead(),
        vec![ctr("c", Unknown, 0, 0, 1), ctr("c", Created, 0, 1, 5)],
    );
    assert_eq!(
        actions(&p, &o),
        vec![
            Action::FinishDeletion { uid: "u1".into() },
            Action::RemoveContainer { id: "c-1".into() },
            Action::RemoveContainer { id: "c-0".into() },
            Action::RemoveSandbox { id: "s1".into() }
        ]
    );
}

#[test]
fn a_zero_grace_deletion_skips_the_pre_stop_hook() {
    let p = pod(json!({
        "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.35",
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}}]}}));
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    assert_eq!(
        actions(&p, &o),
        vec![
            kill("c-0", 0, KillReason::PodStopping, "Stopping container c"),
            kill_sandbox("s1")
        ]
    );
}

#[test]
fn a_deleted_pod_never_starts_anything() {
    let p = pod(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
    assert_eq!(
        actions(&p, &observed(vec![], vec![])),
        vec![Action::FinishDeletion { uid: "u1".into() }]
    );
}

#[test]
fn a_terminal_pod_only_stops() {
    let p = pod(json!({"status": {"phase": "Failed"}}));
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    assert_eq!(
        actions(&p, &o),
        vec![
            kill("c-0", 30, KillReason::PodStopping, "Stopping container c"),
            kill_sandbox("s1")
        ]
    );
    let o = observed(dead(), vec![ctr("c", Exited, 1, 0, 1)]);
    assert_eq!(actions(&p, &o), vec![]);
}
