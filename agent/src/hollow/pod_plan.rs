//! What a hollow kubelet does with one observed pod bound to its node: the pure decision
//! ("observed pod → status patch, delete, or nothing; look again at …"), without I/O.
//!
//! The simulated lifecycle, as a kubelet with instantly starting containers would report it:
//! - a pod that is not running yet starts: phase `Running`, every container `running`, `ready`
//!   and `started`, init containers `terminated` with exit code 0, the pod conditions
//!   `PodReadyToStartContainers`, `Initialized`, `Ready`, `ContainersReady` and `PodScheduled`
//!   `True`, `hostIP`, `podIP` and `startTime` set;
//! - a pod owned by a Job runs for the configured time, then its containers exit with code 0
//!   (phase `Succeeded`) or with the code in the [`EXIT_CODE_ANNOTATION`] (phase `Failed` with
//!   `restartPolicy: Never`; a restart with `restartCount + 1` with `OnFailure`);
//! - a pod with a `deletionTimestamp` is deleted with grace period 0 (its containers "stop" at
//!   once), with the pod's UID as precondition, as the kubelet finishes graceful deletion.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::kubelet::plan::spec::{containers, init_containers};

/// Annotation with the exit code the containers of a Job's pod end with (default 0).
pub const EXIT_CODE_ANNOTATION: &str = "hollow.k3rs.io/exit-code";

/// What the planner knows besides the pod.
/// What the planner knows besides the pod.
#[derive(Debug, Clone)]
pub struct PodContext {
    /// The node's InternalIP (the pod's `hostIP`, and `podIP` of host-network pods).
    pub host_ip: IpAddr,
    /// The IP to give the pod if it starts now (allocated by the caller from the node's pod
    /// CIDR); `None` leaves `podIP` unset.
    pub pod_ip: Option<IpAddr>,
    /// The time the plan is for.
    pub now: Timestamp,
    /// How long the containers of a Job's pod run before they exit.
    pub job_duration: Duration,
}

/// The one change to make now.
#[derive(Debug, Clone, PartialEq)]
pub enum PodAction {
    /// A JSON merge patch for the pod's `status` subresource.
    PatchStatus(Value),
    /// Delete with grace period 0 and this UID as precondition.
    Delete {
        /// The pod's UID.
        uid: String,
    },
}

/// The planner's answer: at most one action, and when to look at the pod again if nothing
/// changes meanwhile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// What to do now, if anything.
    pub action: Option<PodAction>,
    /// When to plan again; `None`: only on the pod's next change.
    pub requeue_after: Option<Duration>,
}

/// Whether the pod still needs a pod IP: it is about to start and does not use the host's
/// network.
pub fn needs_pod_ip(pod: &Pod) -> bool {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    !host_network
        && pod.metadata.deletion_timestamp.is_none()
        && !is_terminal(pod)
        && !is_running(pod)
}

/// Whether the pod is `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Succeeded" | "Failed"))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn is_running(pod: &Pod) -> bool {
    phase(pod) == Some("Running")
}

fn owned_by_job(pod: &Pod) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|o| {
        o.kind == "Job" && o.api_version.starts_with("batch/") && o.controller == Some(true)
    })
}

fn exit_code(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXIT_CODE_ANNOTATION))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Decides what to do with `pod` (bound to this node) now.
pub fn plan(pod: &Pod, ctx: &PodContext) -> Plan {
    if pod.metadata.deletion_timestamp.is_some() {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        return Plan {
            action: Some(PodAction::Delete { uid }),
            requeue_after: None,
        };
    }
    if is_terminal(pod) {
        return Plan::default();
    }
    let job = owned_by_job(pod);
    if !is_running(pod) {
        return Plan {
            action: Some(PodAction::PatchStatus(start_patch(pod, ctx))),
            requeue_after: job.then_some(ctx.job_duration),
        };
    }
    if let Some(patch) = ready_again_patch(pod, ctx) {
        return Plan {
            action: Some(PodAction::PatchStatus(patch)),
            requeue_after: None,
        };
    }
    if !job {
        return Plan::default();
    }
    let started = last_container_start(pod).unwrap_or(ctx.now);
    let ends = started
        .checked_add(ctx.job_duration)
        .unwrap_or(Timestamp::MAX);
    if ctx.now < ends {
        let left = ends.duration_since(ctx.now).unsigned_abs();
        return Plan {
            action: None,
            requeue_after: Some(left),
        };
    }
    let code = exit_code(pod);
    let restart_on_failure =
        pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    if code != 0 && restart_on_failure {
        return Plan {
            action: Some(PodAction::PatchStatus(restart_patch(pod, ctx, code))),
            requeue_after: Some(ctx.job_duration),
        };
    }
    Plan {
        action: Some(PodAction::PatchStatus(finish_patch(pod, ctx, code))),
        requeue_after: None,
    }
}

fn time(t: Timestamp) -> Value {
    Value::String(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn container_id(pod: &Pod, name: &str) -> String {
    format!(
        "hollow://{}/{name}",
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The latest `state.running.startedAt` of the pod's containers (restarts move it).
fn last_container_start(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0)
        .max()
}

fn scheduled_since(pod: &Pod, now: Timestamp) -> Value {
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    time(existing.unwrap_or(now))
}

fn condition(type_: &str, status: bool, at: &Value, reason: Option<&str>) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": at,
    });
    if let Some(reason) = reason {
        c["reason"] = json!(reason);
    }
    c
}

fn ip_list(ip: Option<IpAddr>) -> Value {
    match ip {
        Some(ip) => json!([{ "ip": ip.to_string() }]),
        None => Value::Null,
    }
}

fn start_patch(pod: &Pod, ctx: &PodContext) -> Value {
    let now = time(ctx.now);
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let pod_ip = if host_network {
        Some(ctx.host_ip)
    } else {
        ctx.pod_ip
    };
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| time(t.0))
        .unwrap_or_else(|| now.clone());
    let init: Vec<Value> = init_containers(pod)
        .iter()
        .map(|c| {
            let state = json!({ "terminated": {
                "exitCode": 0, "reason": "Completed",
                "startedAt": now, "finishedAt": now,
                "containerID": container_id(pod, &c.name),
            }});
            container_status(pod, c, (true, false), 0, state)
        })
        .collect();
    let running: Vec<Value> = containers(pod)
        .iter()
        .map(|c| running_status(pod, c, &now, 0, Value::Null))
        .collect();
    json!({ "status": {
        "phase": "Running",
        "hostIP": ctx.host_ip.to_string(),
        "hostIPs": ip_list(Some(ctx.host_ip)),
        "podIP": pod_ip.map(|ip| ip.to_string()),
        "podIPs": ip_list(pod_ip),
        "startTime": start_time,
        "conditions": [
            condition("PodReadyToStartContainers", true, &now, None),
            condition("Initialized", true, &now, None),
            condition("Ready", true, &now, None),
            condition("ContainersReady", true, &now, None),
            condition("PodScheduled", true, &scheduled_since(pod, ctx.now), None),
        ],
        "initContainerStatuses": if init.is_empty() { Value::Null } else { Value::Array(init) },
        "containerStatuses": running,
    }})
}

/// For a running pod whose `Ready` or `ContainersReady` condition another writer turned off
/// (the node lifecycle controller's `MarkPodsNotReady` while the node's heartbeats were late):
/// the conditions with those set `True` again, as a kubelet's status manager restores what it
/// computes when the API's copy differs. `None` when they are `True`.
fn ready_again_patch(pod: &Pod, ctx: &PodContext) -> Option<Value> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let turned_off = |c: &&k8s_openapi::api::core::v1::PodCondition| {
        matches!(c.type_.as_str(), "Ready" | "ContainersReady") && c.status != "True"
    };
    if !conditions.iter().any(|c| turned_off(&c)) {
        return None;
    }
    let now = time(ctx.now);
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|c| {
            if turned_off(&c) {
                condition(&c.type_, true, &now, None)
            } else {
                serde_json::to_value(c).unwrap_or(Value::Null)
            }
        })
        .collect();
    Some(json!({ "status": { "conditions": conditions } }))
}

/// A container status; `(ready, started)` as the kubelet reports them for `state`.
fn container_status(
    pod: &Pod,
    c: &Container,
    (ready, started): (bool, bool),
    restarts: i32,
    state: Value,
) -> Value {
    json!({
        "name": c.name,
        "image": c.image.clone().unwrap_or_default(),
        "imageID": "",
        "containerID": container_id(pod, &c.name),
        "ready": ready,
        "started": started,
        "restartCount": restarts,
        "state": state,
    })
}

fn running_status(pod: &Pod, c: &Container, since: &Value, restarts: i32, last: Value) -> Value {
    let state = json!({ "running": { "startedAt": since } });
    let mut status = container_status(pod, c, (true, true), restarts, state);
    status["lastState"] = last;
    status
}

fn restart_count(pod: &Pod, name: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

fn terminated(pod: &Pod, c: &Container, code: i32, started: &Value, now: &Value) -> Value {
    json!({
        "exitCode": code,
        "reason": if code == 0 { "Completed" } else { "Error" },
        "startedAt": started,
        "finishedAt": now,
        "containerID": container_id(pod, &c.name),
    })
}

/// The containers exited with `code` under `restartPolicy: OnFailure`: they run again at once.
fn restart_patch(pod: &Pod, ctx: &PodContext, code: i32) -> Value {
    let now = time(ctx.now);
    let started = time(last_container_start(pod).unwrap_or(ctx.now));
    let statuses: Vec<Value> = containers(pod)
        .iter()
        .map(|c| {
            let last = json!({ "terminated": terminated(pod, c, code, &started, &now) });
            running_status(pod, c, &now, restart_count(pod, &c.name) + 1, last)
        })
        .collect();
    json!({ "status": { "containerStatuses": statuses } })
}

/// The containers exited with `code` and are not restarted: the pod is terminal.
fn finish_patch(pod: &Pod, ctx: &PodContext, code: i32) -> Value {
    let now = time(ctx.now);
    let started = time(last_container_start(pod).unwrap_or(ctx.now));
    let (phase, reason) = if code == 0 {
        ("Succeeded", "PodCompleted")
    } else {
        ("Failed", "PodFailed")
    };
    let statuses: Vec<Value> = containers(pod)
        .iter()
        .map(|c| {
            let state = json!({ "terminated": terminated(pod, c, code, &started, &now) });
            container_status(pod, c, (false, false), restart_count(pod, &c.name), state)
        })
        .collect();
    json!({ "status": {
        "phase": phase,
        "conditions": [
            condition("PodReadyToStartContainers", false, &now, None),
            condition("Initialized", true, &now, Some(reason)),
            condition("Ready", false, &now, Some(reason)),
            condition("ContainersReady", false, &now, Some(reason)),
            condition("PodScheduled", true, &scheduled_since(pod, ctx.now), None),
        ],
        "containerStatuses": statuses,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::merge;

    fn pod(extra: Value) -> Pod {
        let mut base = json!({
            "metadata": { "name": "p", "namespace": "default", "uid": "u1" },
            "spec": {
                "nodeName": "hollow-0",
                "containers": [{ "name": "c", "image": "nginx" }],
            },
            "status": {
                "phase": "Pending",
                "conditions": [{
                    "type": "PodScheduled", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }],
            },
        });
        merge(&mut base, extra);
        serde_json::from_value(base).unwrap()
    }

    fn ctx(now: &str) -> PodContext {
        PodContext {
            host_ip: "198.18.0.1".parse().unwrap(),
            pod_ip: Some("10.42.3.7".parse().unwrap()),
            now: now.parse().unwrap(),
            job_duration: Duration::from_secs(5),
        }
    }

    const JOB_OWNER: &str = r#"{"metadata": {"ownerReferences": [{
        "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true
    }]}}"#;

    #[test]
    fn a_running_pod_marked_not_ready_by_another_writer_is_ready_again() {
        let running = json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:01:00Z"},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
        ]}});
        let plan = plan(&pod(running), &ctx("2026-01-01T00:02:00Z"));
        let Some(PodAction::PatchStatus(patch)) = plan.action else {
            panic!("expected a status patch: {plan:?}");
        };
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        let by_type = |t: &str| conditions.iter().find(|c| c["type"] == t).unwrap().clone();
        assert_eq!(by_type("Ready")["status"], "True");
        assert_eq!(
            by_type("Ready")["lastTransitionTime"],
            "2026-01-01T00:02:00Z"
        );
        assert_eq!(
            by_type("ContainersReady")["lastTransitionTime"],
            "2026-01-01T00:00:01Z",
            "a condition that stayed True keeps its transition time"
        );
        assert_eq!(by_type("PodScheduled")["status"], "True");
        assert_eq!(conditions.len(), 3);
    }

    #[test]
    fn a_ready_running_pod_needs_nothing() {
        let running = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]}});
        assert_eq!(
            plan(&pod(running), &ctx("2026-01-01T00:02:00Z")),
            Plan::default()
        );
    }

    #[test]
    fn a_pending_pod_starts_running_and_ready() {
        let plan = plan(&pod(json!({})), &ctx("2026-01-01T00:00:10Z"));
        let t = "2026-01-01T00:00:10Z";
        let cond = |ty: &str, at: &str| json!({"type": ty, "status": "True", "lastProbeTime": null, "lastTransitionTime": at});
        assert_eq!(
            plan,
            Plan {
                action: Some(PodAction::PatchStatus(json!({ "status": {
                    "phase": "Running",
                    "hostIP": "198.18.0.1",
                    "hostIPs": [{ "ip": "198.18.0.1" }],
                    "podIP": "10.42.3.7",
                    "podIPs": [{ "ip": "10.42.3.7" }],
                    "startTime": t,
                    "conditions": [
                        cond("PodReadyToStartContainers", t),
                        cond("Initialized", t),
                        cond("Ready", t),
                        cond("ContainersReady", t),
                        cond("PodScheduled", "2026-01-01T00:00:00Z"),
                    ],
                    "initContainerStatuses": null,
                    "containerStatuses": [{
                        "name": "c", "image": "nginx", "imageID": "",
                        "containerID": "hollow://u1/c",
                        "ready": true, "started": true, "restartCount": 0,
                        "state": { "running": { "startedAt": t } },
                        "lastState": null,
                    }],
                }}))),
                requeue_after: None,
            }
        );
    }

    #[test]
    fn host_network_pods_get_the_host_ip_and_need_no_pod_ip() {
        let p = pod(json!({"spec": {"hostNetwork": true}}));
        assert!(!needs_pod_ip(&p));
        assert!(needs_pod_ip(&pod(json!({}))));
        let mut c = ctx("2026-01-01T00:00:10Z");
        c.pod_ip = None;
        let Some(PodAction::PatchStatus(patch)) = plan(&p, &c).action else {
            panic!("expected a status patch");
        };
        assert_eq!(patch["status"]["podIP"], json!("198.18.0.1"));
        assert_eq!(patch["status"]["podIPs"], json!([{ "ip": "198.18.0.1" }]));
    }

    #[test]
    fn init_containers_are_reported_completed() {
        let p = pod(json!({"spec": {"initContainers": [{ "name": "i", "image": "busybox" }]}}));
        let Some(PodAction::PatchStatus(patch)) = plan(&p, &ctx("2026-01-01T00:00:10Z")).action
        else {
            panic!("expected a status patch");
        };
        let init = &patch["status"]["initContainerStatuses"][0];
        assert_eq!(init["name"], json!("i"));
        assert_eq!(init["state"]["terminated"]["exitCode"], json!(0));
        assert_eq!(init["state"]["terminated"]["reason"], json!("Completed"));
    }

    #[test]
    fn a_running_pod_not_owned_by_a_job_is_left_alone() {
        let running = pod(json!({"status": {"phase": "Running"}}));
        assert_eq!(
            plan(&running, &ctx("2026-01-01T01:00:00Z")),
            Plan::default()
        );
        assert!(!needs_pod_ip(&running));
    }

    #[test]
    fn terminal_pods_are_left_alone() {
        for phase in ["Succeeded", "Failed"] {
            let p = pod(json!({"status": {"phase": phase}}));
            assert_eq!(plan(&p, &ctx("2026-01-01T01:00:00Z")), Plan::default());
            assert!(!needs_pod_ip(&p));
        }
    }

    #[test]
    fn a_terminating_pod_is_deleted_with_its_uid() {
        let p = pod(
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:30Z"},
            "status": {"phase": "Running"}}),
        );
        assert_eq!(
            plan(&p, &ctx("2026-01-01T00:00:10Z")),
            Plan {
                action: Some(PodAction::Delete { uid: "u1".into() }),
                requeue_after: None
            }
        );
        assert!(!needs_pod_ip(&p));
    }

    fn job_pod(extra: Value) -> Pod {
        let mut v: Value = serde_json::from_str(JOB_OWNER).unwrap();
        merge(&mut v, extra);
        pod(v)
    }

    fn running_since(at: &str) -> Value {
        json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "c", "image": "nginx", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": at}},
        }]}})
    }

    #[test]
    fn a_job_pod_starts_and_is_looked_at_again_after_the_run_time() {
        let p = plan(&job_pod(json!({})), &ctx("2026-01-01T00:00:10Z"));
        assert!(matches!(p.action, Some(PodAction::PatchStatus(_))));
        assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));
    }

    #[test]
    fn a_running_job_pod_waits_out_its_run_time() {
        let p = job_pod(running_since("2026-01-01T00:00:10Z"));
        assert_eq!(
            plan(&p, &ctx("2026-01-01T00:00:12Z")),
            Plan {
                action: None,
                requeue_after: Some(Duration::from_secs(3))
            }
        );
    }

    #[test]
    fn a_job_pod_succeeds_after_its_run_time() {
        let p = job_pod(running_since("2026-01-01T00:00:10Z"));
        let plan = plan(&p, &ctx("2026-01-01T00:00:15Z"));
        let (s, e) = ("2026-01-01T00:00:10Z", "2026-01-01T00:00:15Z");
        let cond = |ty: &str, status: &str, at: &str, reason: Option<&str>| {
            let mut c = json!({"type": ty, "status": status, "lastProbeTime": null,
                "lastTransitionTime": at});
            if let Some(r) = reason {
                c["reason"] = json!(r);
            }
            c
        };
        assert_eq!(
            plan,
            Plan {
                action: Some(PodAction::PatchStatus(json!({ "status": {
                    "phase": "Succeeded",
                    "conditions": [
                        cond("PodReadyToStartContainers", "False", e, None),
                        cond("Initialized", "True", e, Some("PodCompleted")),
                        cond("Ready", "False", e, Some("PodCompleted")),
                        cond("ContainersReady", "False", e, Some("PodCompleted")),
                        cond("PodScheduled", "True", "2026-01-01T00:00:00Z", None),
                    ],
                    "containerStatuses": [{
                        "name": "c", "image": "nginx", "imageID": "",
                        "containerID": "hollow://u1/c",
                        "ready": false, "started": false, "restartCount": 0,
                        "state": { "terminated": {
                            "exitCode": 0, "reason": "Completed",
                            "startedAt": s, "finishedAt": e,
                            "containerID": "hollow://u1/c",
                        }},
                    }],
                }}))),
                requeue_after: None,
            }
        );
    }

    #[test]
    fn a_failing_job_pod_fails_with_restart_policy_never() {
        let mut extra = running_since("2026-01-01T00:00:10Z");
        merge(
            &mut extra,
            json!({"metadata": {"annotations": {EXIT_CODE_ANNOTATION: "3"}},
                "spec": {"restartPolicy": "Never"}}),
        );
        let Some(PodAction::PatchStatus(patch)) =
            plan(&job_pod(extra), &ctx("2026-01-01T00:00:20Z")).action
        else {
            panic!("expected a status patch");
        };
        assert_eq!(patch["status"]["phase"], json!("Failed"));
        assert_eq!(
            patch["status"]["conditions"][2]["reason"],
            json!("PodFailed")
        );
        let term = &patch["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(term["exitCode"], json!(3));
        assert_eq!(term["reason"], json!("Error"));
    }

    #[test]
    fn a_failing_job_pod_restarts_with_restart_policy_on_failure() {
        let mut extra = running_since("2026-01-01T00:00:10Z");
        merge(
            &mut extra,
            json!({"metadata": {"annotations": {EXIT_CODE_ANNOTATION: "1"}},
                "spec": {"restartPolicy": "OnFailure"}}),
        );
        let plan = plan(&job_pod(extra), &ctx("2026-01-01T00:00:20Z"));
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(5)));
        let Some(PodAction::PatchStatus(patch)) = plan.action else {
            panic!("expected a status patch");
        };
        let c = &patch["status"]["containerStatuses"][0];
        assert_eq!(c["restartCount"], json!(1));
        assert_eq!(
            c["state"],
            json!({"running": {"startedAt": "2026-01-01T00:00:20Z"}})
        );
        assert_eq!(c["lastState"]["terminated"]["exitCode"], json!(1));
        assert_eq!(patch["status"].get("phase"), None);
    }
}
