use super::*;
use crate::kubelet::plan::lifecycle::tests::{at, ctr, sandbox};
use crate::kubelet::plan::observed::{
    ObservedContainer, ObservedPod, ObservedSandbox, ProbeResult, ProbeResults, Reasons, Waiting,
};
use crate::kubelet::plan::spec::tests::{merge, pod as base_pod};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use ContainerState::*;

const SCHEDULED_AT: &str = "2027-01-15T08:00:00Z";

/// A pod as the scheduler left it (PodScheduled True at [`SCHEDULED_AT`]), `extra` merged in.
fn pod(extra: Value) -> Pod {
    let mut v = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED_AT}]}});
    merge(&mut v, extra);
    base_pod(v)
}

fn t(s: i64) -> String {
    at(s).to_string()
}

struct World {
    observed: ObservedPod,
    probes: ProbeResults,
    reasons: Reasons,
}

fn world(sandboxes: Vec<ObservedSandbox>, containers: Vec<ObservedContainer>) -> World {
    World {
        observed: ObservedPod {
            sandboxes,
            containers,
            ..Default::default()
        },
        probes: ProbeResults::default(),
        reasons: Reasons::default(),
    }
}

fn status(p: &Pod, w: &World, now: i64) -> Value {
    let inputs = StatusInputs {
        pod: p,
        observed: &w.observed,
        probes: &w.probes,
        reasons: &w.reasons,
    };
    let host: IpAddr = "192.0.2.10".parse().unwrap();
    serde_json::to_value(pod_status(inputs, &[host], at(now))).unwrap()
}

fn cond(type_: &str, status: bool, at: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" }, "lastTransitionTime": at})
}

fn cond_r(type_: &str, status: bool, at: &str, reason: &str, message: &str) -> Value {
    let mut c = cond(type_, status, at);
    c["reason"] = json!(reason);
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    c
}

#[test]
fn a_new_pod_is_pending_with_its_containers_creating() {
    let now = t(100);
    assert_eq!(
        status(&pod(json!({})), &world(vec![], vec![]), 100),
        json!({
            "phase": "Pending",
            "conditions": [
                cond("PodReadyToStartContainers", false, &now),
                cond("Initialized", true, &now),
                cond_r("Ready", false, &now, "ContainersNotReady", "containers with unready status: [c]"),
                cond_r("ContainersReady", false, &now, "ContainersNotReady", "containers with unready status: [c]"),
                cond("PodScheduled", true, SCHEDULED_AT),
            ],
            "hostIP": "192.0.2.10",
            "hostIPs": [{"ip": "192.0.2.10"}],
            "startTime": now,
            "qosClass": "BestEffort",
            "containerStatuses": [{
                "name": "c", "image": "busybox:1.35", "imageID": "", "ready": false,
                "restartCount": 0, "started": false,
                "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
            }],
        })
    );
}

#[test]
fn a_running_pod_is_ready_with_its_sandbox_ip() {
    let p = pod(json!({"status": {"startTime": t(50)}}));
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    let now = t(100);
    assert_eq!(
        status(&p, &w, 100),
        json!({
            "phase": "Running",
            "conditions": [
                cond("PodReadyToStartContainers", true, &now),
                cond("Initialized", true, &now),
                cond("Ready", true, &now),
                cond("ContainersReady", true, &now),
                cond("PodScheduled", true, SCHEDULED_AT),
            ],
            "hostIP": "192.0.2.10",
            "hostIPs": [{"ip": "192.0.2.10"}],
            "podIP": "10.42.0.5",
            "podIPs": [{"ip": "10.42.0.5"}],
            "startTime": t(50),
            "qosClass": "BestEffort",
            "containerStatuses": [{
                "name": "c", "image": "docker.io/library/busybox:1.35", "imageID": "sha256:b0b0",
                "containerID": "containerd://c-0", "ready": true, "restartCount": 0,
                "started": true, "state": {"running": {"startedAt": t(2)}}, "lastState": {},
            }],
        })
    );
}

#[test]
fn transition_times_are_kept_while_a_condition_holds() {
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    let first = status(&pod(json!({})), &w, 100);
    let mut p = pod(json!({}));
    p.status = Some(serde_json::from_value(first).unwrap());
    let mut w2 = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    w2.probes
        .readiness
        .insert("c-0".into(), ProbeResult::Failure);
    let p = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
        "readinessProbe": {"exec": {"command": ["true"]}}}]}, "status": serde_json::to_value(p.status).unwrap()}),
    );
    let second = status(&p, &w2, 200);
    let c = &second["conditions"];
    assert_eq!(c[0], cond("PodReadyToStartContainers", true, &t(100)));
    assert_eq!(c[1], cond("Initialized", true, &t(100)));
    let unready = "containers with unready status: [c]";
    assert_eq!(
        c[2],
        cond_r("Ready", false, &t(200), "ContainersNotReady", unready)
    );
    assert_eq!(
        c[3],
        cond_r(
            "ContainersReady",
            false,
            &t(200),
            "ContainersNotReady",
            unready
        )
    );
    assert_eq!(c[4], cond("PodScheduled", true, SCHEDULED_AT));
    assert_eq!(second["startTime"], json!(t(100)));
}

#[test]
fn probes_decide_started_and_ready() {
    let p = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
        "readinessProbe": {"exec": {"command": ["true"]}},
        "startupProbe": {"exec": {"command": ["true"]}}}]}}),
    );
    let mut w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    let flags = |w: &World| {
        let s = status(&p, w, 100);
        let c = &s["containerStatuses"][0];
        (c["started"].clone(), c["ready"].clone(), s["phase"].clone())
    };
    // Neither probe has run: not started, not ready, but Running.
    assert_eq!(flags(&w), (json!(false), json!(false), json!("Running")));
    w.probes.startup.insert("c-0".into(), ProbeResult::Success);
    assert_eq!(flags(&w), (json!(true), json!(false), json!("Running")));
    w.probes
        .readiness
        .insert("c-0".into(), ProbeResult::Success);
    assert_eq!(flags(&w), (json!(true), json!(true), json!("Running")));
    w.probes.startup.insert("c-0".into(), ProbeResult::Failure);
    assert_eq!(flags(&w), (json!(false), json!(false), json!("Running")));
}

#[test]
fn a_crash_looping_container_shows_the_backoff_and_its_last_run() {
    let mut w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Exited, 1, 0, 1), ctr("c", Exited, 2, 1, 10)],
    );
    let message = "back-off 10s restarting failed container=c pod=web_default(u1)";
    w.reasons
        .insert("c".into(), Waiting::new("CrashLoopBackOff", message));
    let s = status(&pod(json!({})), &w, 100);
    assert_eq!(s["phase"], json!("Running"));
    assert_eq!(
        s["containerStatuses"],
        json!([{
            "name": "c", "image": "docker.io/library/busybox:1.35", "imageID": "sha256:b0b0",
            "containerID": "containerd://c-1", "ready": false, "restartCount": 1, "started": false,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
            "lastState": {"terminated": {
                "exitCode": 2, "reason": "Error", "startedAt": t(11), "finishedAt": t(12),
                "containerID": "containerd://c-1"}},
        }])
    );
}

#[test]
fn without_a_recorded_reason_an_exited_container_shows_terminated() {
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Exited, 1, 0, 1), ctr("c", Exited, 2, 1, 10)],
    );
    let s = status(&pod(json!({})), &w, 100);
    let c = &s["containerStatuses"][0];
    assert_eq!(c["state"]["terminated"]["exitCode"], json!(2));
    assert_eq!(c["lastState"]["terminated"]["exitCode"], json!(1));
    assert_eq!(
        c["lastState"]["terminated"]["containerID"],
        json!("containerd://c-0")
    );
}

#[test]
fn image_pull_errors_show_as_waiting() {
    let mut w = world(vec![sandbox("s1", true, 0, 0)], vec![]);
    w.reasons.insert(
        "c".into(),
        Waiting::new(
            "ImagePullBackOff",
            "Back-off pulling image \"busybox:1.35\"",
        ),
    );
    let s = status(&pod(json!({})), &w, 100);
    assert_eq!(s["phase"], json!("Pending"));
    assert_eq!(
        s["containerStatuses"][0]["state"],
        json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"busybox:1.35\""}})
    );
}

#[test]
fn init_containers_in_progress() {
    let p = pod(json!({"spec": {"initContainers": [
        {"name": "i1", "image": "busybox:1.35"}, {"name": "i2", "image": "busybox:1.35"}]}}));
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("i1", Running, 0, 0, 1)],
    );
    let s = status(&p, &w, 100);
    let now = t(100);
    assert_eq!(s["phase"], json!("Pending"));
    assert_eq!(
        s["conditions"][1],
        cond_r(
            "Initialized",
            false,
            &now,
            "ContainersNotInitialized",
            "containers with incomplete status: [i1 i2]"
        )
    );
    assert_eq!(
        s["initContainerStatuses"],
        json!([
            {"name": "i1", "image": "docker.io/library/busybox:1.35", "imageID": "sha256:b0b0",
             "containerID": "containerd://i1-0", "ready": false, "restartCount": 0, "started": true,
             "state": {"running": {"startedAt": t(2)}}, "lastState": {}},
            {"name": "i2", "image": "busybox:1.35", "imageID": "", "ready": false,
             "restartCount": 0, "started": false,
             "state": {"waiting": {"reason": "PodInitializing"}}, "lastState": {}},
        ])
    );
    assert_eq!(
        s["containerStatuses"][0]["state"],
        json!({"waiting": {"reason": "PodInitializing"}})
    );
    // Both done: initialized, the container is being created.
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("i1", Exited, 0, 0, 1), ctr("i2", Exited, 0, 0, 5)],
    );
    let s = status(&p, &w, 100);
    assert_eq!(s["conditions"][1], cond("Initialized", true, &now));
    assert_eq!(s["initContainerStatuses"][1]["ready"], json!(true));
    assert_eq!(
        s["initContainerStatuses"][1]["state"]["terminated"]["reason"],
        json!("Completed")
    );
}

#[test]
fn a_failed_init_container_fails_a_never_pod() {
    let p = pod(json!({"spec": {"restartPolicy": "Never",
        "initContainers": [{"name": "i1", "image": "busybox:1.35"}]}}));
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("i1", Exited, 3, 0, 1)],
    );
    let s = status(&p, &w, 100);
    assert_eq!(s["phase"], json!("Failed"));
    assert_eq!(
        s["conditions"][2],
        cond_r("Ready", false, &t(100), "PodFailed", "")
    );
}

#[test]
fn a_finished_pod_succeeds_or_fails_per_exit_codes() {
    let p = pod(json!({"spec": {"restartPolicy": "Never"}}));
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("c", Exited, 0, 0, 1)],
    );
    let s = status(&p, &w, 100);
    let now = t(100);
    assert_eq!(s["phase"], json!("Succeeded"));
    assert_eq!(
        s["conditions"],
        json!([
            cond("PodReadyToStartContainers", false, &now),
            cond_r("Initialized", true, &now, "PodCompleted", ""),
            cond_r("Ready", false, &now, "PodCompleted", ""),
            cond_r("ContainersReady", false, &now, "PodCompleted", ""),
            cond("PodScheduled", true, SCHEDULED_AT),
        ])
    );
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("c", Exited, 1, 0, 1)],
    );
    assert_eq!(status(&p, &w, 100)["phase"], json!("Failed"));
}

#[test]
fn a_terminal_phase_is_never_left() {
    let p = pod(json!({"status": {"phase": "Succeeded"}}));
    let s = status(&p, &world(vec![], vec![]), 100);
    assert_eq!(s["phase"], json!("Succeeded"));
}

#[test]
fn a_deleted_always_pod_ends_by_its_exit_codes() {
    let p = pod(json!({"metadata": {"deletionTimestamp": "2027-01-15T09:00:00Z"}}));
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("c", Exited, 0, 0, 1)],
    );
    assert_eq!(status(&p, &w, 100)["phase"], json!("Succeeded"));
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("c", Exited, 143, 0, 1)],
    );
    assert_eq!(status(&p, &w, 100)["phase"], json!("Failed"));
    // Still stopping: Running.
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    assert_eq!(status(&p, &w, 100)["phase"], json!("Running"));
}

#[test]
fn pod_ips_come_from_the_sandbox_or_the_host() {
    let mut s = sandbox("s1", true, 0, 0);
    s.additional_ips = vec!["fd00:42::5".parse().unwrap()];
    let w = world(vec![s], vec![ctr("c", Running, 0, 0, 1)]);
    let st = status(&pod(json!({})), &w, 100);
    assert_eq!(st["podIP"], json!("10.42.0.5"));
    assert_eq!(
        st["podIPs"],
        json!([{"ip": "10.42.0.5"}, {"ip": "fd00:42::5"}])
    );

    let mut s = sandbox("s1", true, 0, 0);
    s.ip = None;
    s.host_network = true;
    let w = world(vec![s], vec![ctr("c", Running, 0, 0, 1)]);
    let st = status(&pod(json!({"spec": {"hostNetwork": true}})), &w, 100);
    assert_eq!(st["podIP"], json!("192.0.2.10"));
    assert_eq!(st["podIPs"], json!([{"ip": "192.0.2.10"}]));
    assert_eq!(st["conditions"][0]["status"], json!("True"));

    // The sandbox stopped: the pod keeps the IPs it had.
    let p = pod(json!({"status": {"podIP": "10.42.0.9", "podIPs": [{"ip": "10.42.0.9"}]}}));
    let w = world(
        vec![sandbox("s1", false, 0, 0)],
        vec![ctr("c", Exited, 0, 0, 1)],
    );
    let st = status(&p, &w, 100);
    assert_eq!(st["podIP"], json!("10.42.0.9"));
}

#[test]
fn a_container_that_vanished_after_running_is_shown_stopped() {
    let p = pod(
        json!({"status": {"phase": "Running", "containerStatuses": [{
        "name": "c", "image": "busybox:1.35", "imageID": "", "ready": true, "restartCount": 2,
        "state": {"running": {"startedAt": t(5)}}}]}}),
    );
    let w = world(vec![sandbox("s1", true, 0, 0)], vec![]);
    let s = status(&p, &w, 100);
    assert_eq!(
        s["containerStatuses"][0],
        json!({
            "name": "c", "image": "busybox:1.35", "imageID": "", "ready": false,
            "restartCount": 3, "started": false,
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was deleted.  The container used to be Running"}},
        })
    );
    assert_eq!(s["phase"], json!("Running"));
}

#[test]
fn conditions_of_others_and_readiness_gates() {
    let p = pod(json!({
    "spec": {"readinessGates": [{"conditionType": "example.com/lb"}]},
    "status": {"conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED_AT},
        {"type": "example.com/lb", "status": "False", "lastTransitionTime": SCHEDULED_AT},
    ]}}));
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("c", Running, 0, 0, 1)],
    );
    let s = status(&p, &w, 100);
    let now = t(100);
    assert_eq!(
        s["conditions"],
        json!([
            cond("example.com/lb", false, SCHEDULED_AT),
            cond("PodReadyToStartContainers", true, &now),
            cond("Initialized", true, &now),
            cond_r(
                "Ready",
                false,
                &now,
                "ReadinessGatesNotReady",
                "the status of pod readiness gate \"example.com/lb\" is not \"True\", but False"
            ),
            cond("ContainersReady", true, &now),
            cond("PodScheduled", true, SCHEDULED_AT),
        ])
    );
    let p = pod(json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}}));
    let s = status(&p, &w, 100);
    assert_eq!(
        s["conditions"][2],
        cond_r(
            "Ready",
            false,
            &now,
            "ReadinessGatesNotReady",
            "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
        )
    );
}

#[test]
fn regular_statuses_are_sorted_by_name_and_qos_is_reported() {
    let p = pod(json!({"spec": {"containers": [
        {"name": "z", "image": "i", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "a", "image": "i"}]}}));
    let s = status(&p, &world(vec![], vec![]), 100);
    assert_eq!(s["containerStatuses"][0]["name"], json!("a"));
    assert_eq!(s["containerStatuses"][1]["name"], json!("z"));
    assert_eq!(s["qosClass"], json!("Burstable"));
    assert_eq!(
        s["conditions"][3]["message"],
        json!("containers with unready status: [z a]")
    );
}

#[test]
fn a_sidecar_is_initialized_once_started_and_counts_for_readiness() {
    let p = pod(
        json!({"spec": {"initContainers": [{"name": "sc", "image": "busybox:1.35",
        "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["true"]}}}]}}),
    );
    let now = t(100);
    let mut w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("sc", Running, 0, 0, 1)],
    );
    let s = status(&p, &w, 100);
    assert_eq!(s["phase"], json!("Pending"));
    assert_eq!(s["conditions"][1], cond("Initialized", true, &now));
    let unready = "containers with unready status: [sc c]";
    assert_eq!(
        s["conditions"][3],
        cond_r(
            "ContainersReady",
            false,
            &now,
            "ContainersNotReady",
            unready
        )
    );
    assert_eq!(s["initContainerStatuses"][0]["started"], json!(true));
    assert_eq!(s["initContainerStatuses"][0]["ready"], json!(false));

    w.observed.containers.push(ctr("c", Running, 0, 0, 5));
    w.probes
        .readiness
        .insert("sc-0".into(), ProbeResult::Success);
    let s = status(&p, &w, 100);
    assert_eq!(s["phase"], json!("Running"));
    assert_eq!(s["conditions"][2], cond("Ready", true, &now));
    assert_eq!(s["initContainerStatuses"][0]["ready"], json!(true));

    // The sidecar crashed after the pod ran: still Running, not ready.
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("sc", Exited, 1, 0, 1), ctr("c", Running, 0, 0, 5)],
    );
    let s = status(&p, &w, 100);
    assert_eq!(s["phase"], json!("Running"));
    assert_eq!(
        s["conditions"][3],
        cond_r(
            "ContainersReady",
            false,
            &now,
            "ContainersNotReady",
            "containers with unready status: [sc]"
        )
    );
}

#[test]
fn a_sidecar_not_yet_started_keeps_the_pod_pending() {
    let p = pod(
        json!({"spec": {"initContainers": [{"name": "sc", "image": "busybox:1.35",
        "restartPolicy": "Always", "startupProbe": {"exec": {"command": ["true"]}}}]}}),
    );
    let w = world(
        vec![sandbox("s1", true, 0, 0)],
        vec![ctr("sc", Running, 0, 0, 1)],
    );
    let s = status(&p, &w, 100);
    assert_eq!(s["phase"], json!("Pending"));
    assert_eq!(
        s["conditions"][1],
        cond_r(
            "Initialized",
            false,
            &t(100),
            "ContainersNotInitialized",
            "containers with incomplete status: [sc]"
        )
    );
}
