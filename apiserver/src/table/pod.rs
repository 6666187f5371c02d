//! Pods as `kubectl get pods` shows them: READY, STATUS and RESTARTS follow kube's
//! `printPod` (phase or reason, init container progress, container waiting/terminated
//! reasons, restartable init containers (sidecars), Terminating, restarts with the age of the
//! last one).

use serde_json::{json, Value};

use super::age;
use super::printers::{int_of, name, str_of, Column, AGE, NAME};

pub const COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    Column::new(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
    ),
    Column::new(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    Column::new("IP", "string", "The pod's IP address (status.podIPs[0]).").wide(),
    Column::new("Node", "string", "The node the pod is bound to (spec.nodeName).").wide(),
    Column::new(
        "Nominated Node",
        "string",
        "The node the scheduler nominated for the pod while it preempts others (status.nominatedNodeName).",
    )
    .wide(),
    Column::new(
        "Readiness Gates",
        "string",
        "How many of the pod's readiness gates have a True condition.",
    )
    .wide(),
];

fn is_restartable_init(spec: &Value, container: &str) -> bool {
    spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["name"] == container && c["restartPolicy"] == "Always")
}

fn condition_true(status: &Value, kind: &str) -> bool {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The time a container last terminated, when it restarted.
fn last_termination(cs: &Value) -> Option<i64> {
    age::parse_time(&cs["lastState"]["terminated"]["finishedAt"])
}

/// `Signal:9`, `ExitCode:1` for a terminated state without a reason.
fn exit_reason(t: &Value) -> String {
    match int_of(&t["signal"]) {
        0 => format!("ExitCode:{}", int_of(&t["exitCode"])),
        s => format!("Signal:{s}"),
    }
}

/// The READY, STATUS and RESTARTS cells.
pub fn status_cells(pod: &Value, now: i64) -> (String, String, String) {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let phase = str_of(&status["phase"]);
    let mut reason = match str_of(&status["reason"]) {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    if status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let init_specs = spec["initContainers"].as_array().map_or(0, Vec::len);
    let total = spec["containers"].as_array().map_or(0, Vec::len)
        + spec["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart: Option<i64> = None;
    let mut sidecar_restarts = 0;
    let mut last_sidecar_restart: Option<i64> = None;
    let mut initializing = false;
    let init_statuses = status["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, cs) in init_statuses.iter().enumerate() {
        restarts += int_of(&cs["restartCount"]);
        last_restart = last_restart.max(last_termination(cs));
        let sidecar = is_restartable_init(spec, str_of(&cs["name"]));
        if sidecar {
            sidecar_restarts += int_of(&cs["restartCount"]);
            last_sidecar_restart = last_sidecar_restart.max(last_termination(cs));
        }
        let terminated = &cs["state"]["terminated"];
        let waiting_reason = str_of(&cs["state"]["waiting"]["reason"]);
        if terminated.is_object() && int_of(&terminated["exitCode"]) == 0 {
            continue;
        }
        if sidecar && cs["started"] == Value::Bool(true) {
            if cs["ready"] == Value::Bool(true) {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            match str_of(&terminated["reason"]) {
                "" => format!("Init:{}", exit_reason(terminated)),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{init_specs}")
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true(status, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        let statuses = status["containerStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for cs in statuses.iter().rev() {
            restarts += int_of(&cs["restartCount"]);
            last_restart = last_restart.max(last_termination(cs));
            let waiting = str_of(&cs["state"]["waiting"]["reason"]);
            let terminated = &cs["state"]["terminated"];
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if terminated.is_object() {
                reason = match str_of(&terminated["reason"]) {
                    "" => exit_reason(terminated),
                    r => r.to_string(),
                };
            } else if cs["ready"] == Value::Bool(true) && cs["state"]["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(status, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
    if deleting && str_of(&status["reason"]) == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => {
            format!("{restarts} ({} ago)", age::human_duration(now - t))
        }
        _ => restarts.to_string(),
    };
    (format!("{ready}/{total}"), reason, restarts_cell)
}

fn readiness_gates(pod: &Value) -> String {
    let Some(gates) = pod["spec"]["readinessGates"]
        .as_array()
        .filter(|g| !g.is_empty())
    else {
        return "<none>".to_string();
    };
    let conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let true_count = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .find(|c| c["type"] == g["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    format!("{true_count}/{}", gates.len())
}

/// The cells of [`COLUMNS`].
pub fn cells(pod: &Value, now: i64) -> Vec<Value> {
    let (ready, reason, restarts) = status_cells(pod, now);
    let none = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    vec![
        name(pod),
        json!(ready),
        json!(reason),
        json!(restarts),
        super::printers::age(pod, now),
        json!(none(str_of(&pod["status"]["podIPs"][0]["ip"]))),
        json!(none(str_of(&pod["spec"]["nodeName"]))),
        json!(none(str_of(&pod["status"]["nominatedNodeName"]))),
        json!(readiness_gates(pod)),
    ]
}

/// kube marks finished pods' rows with a `Completed` condition.
pub fn row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_of(&pod["status"]["phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{ "type": "Completed", "status": "True", "reason": reason, "message": message }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        age::parse_time(&json!(T0)).unwrap() + 300
    }

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p", "creationTimestamp": T0}, "spec": spec, "status": status})
    }

    fn two_containers() -> Value {
        json!({"containers": [{"name": "a"}, {"name": "b"}]})
    }

    #[test]
    fn pending_pod_without_statuses() {
        let p = pod(two_containers(), json!({"phase": "Pending"}));
        assert_eq!(
            cells(&p, now()),
            vec![
                json!("p"),
                json!("0/2"),
                json!("Pending"),
                json!("0"),
                json!("5m"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn running_pod_with_a_restart() {
        let status = json!({
            "phase": "Running",
            "podIPs": [{"ip": "10.42.0.5"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-01-01T00:04:00Z"}}},
            ],
        });
        let mut spec = two_containers();
        spec["nodeName"] = json!("n1");
        let c = cells(&pod(spec, status), now());
        assert_eq!(c[1], "2/2");
        assert_eq!(c[2], "Running");
        assert_eq!(c[3], "2 (60s ago)");
        assert_eq!(c[5], "10.42.0.5");
        assert_eq!(c[6], "n1");
    }

    #[test]
    fn crash_loop_and_exit_codes() {
        let status = json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 5,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]});
        let p = pod(json!({"containers": [{"name": "a"}]}), status);
        assert_eq!(
            status_cells(&p, now()),
            ("0/1".into(), "CrashLoopBackOff".into(), "5".into())
        );
        let status = json!({"phase": "Failed", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}},
        ]});
        let p = pod(json!({"containers": [{"name": "a"}]}), status);
        assert_eq!(status_cells(&p, now()).1, "Signal:9");
        assert!(row_conditions(&p).is_some());
        let status = json!({"phase": "Failed", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 3}}},
        ]});
        let p = pod(json!({"containers": [{"name": "a"}]}), status);
        assert_eq!(status_cells(&p, now()).1, "ExitCode:3");
    }

    #[test]
    fn init_containers() {
        let spec = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]});
        let status = json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "i2", "state": {"running": {}}},
        ]});
        assert_eq!(
            status_cells(&pod(spec.clone(), status), now()).1,
            "Init:1/2"
        );
        let status = json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]});
        assert_eq!(
            status_cells(&pod(spec.clone(), status), now()),
            ("0/1".into(), "Init:CrashLoopBackOff".into(), "3".into())
        );
        let status = json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "state": {"terminated": {"exitCode": 2}}},
        ]});
        assert_eq!(status_cells(&pod(spec, status), now()).1, "Init:ExitCode:2");
    }

    #[test]
    fn sidecars_count_as_containers() {
        let spec = json!({"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]});
        let status = json!({"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [{"name": "s", "started": true, "ready": true, "restartCount": 1, "state": {"running": {}}}],
            "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]});
        assert_eq!(
            status_cells(&pod(spec, status), now()),
            ("2/2".into(), "Running".into(), "1".into())
        );
    }

    #[test]
    fn terminating_and_completed_with_running_sidecar() {
        let mut p = pod(two_containers(), json!({"phase": "Running"}));
        p["metadata"]["deletionTimestamp"] = json!(T0);
        assert_eq!(status_cells(&p, now()).1, "Terminating");
        let status = json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "state": {"running": {}}},
            {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        ]});
        assert_eq!(
            status_cells(&pod(two_containers(), status), now()).1,
            "NotReady"
        );
    }

    #[test]
    fn readiness_gates_and_scheduling_gates() {
        let spec = json!({"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]});
        let status = json!({"phase": "Pending", "conditions": [
            {"type": "x", "status": "True"},
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
        ]});
        let c = cells(&pod(spec, status), now());
        assert_eq!(c[8], "1/2");
        assert_eq!(c[2], "SchedulingGated");
    }
}
