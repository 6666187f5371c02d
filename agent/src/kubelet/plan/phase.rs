//! The pod phase from its container statuses (upstream's `getPhase`), for pods without
//! restartable init containers.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::init_containers::is_restartable;
use super::spec::{containers, init_containers, restart_policy, RestartPolicy};

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

fn last_terminated_code(s: &ContainerStatus) -> Option<i32> {
    s.last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .map(|t| t.exit_code)
}

/// The phase: `Failed` when an init container failed under `restartPolicy: Never`; `Pending`
/// while init containers are pending (sidecars: not started, before any container ran) or a container waits for its first start; `Running`
/// while a container runs (or all stopped under `Always`, or `OnFailure` restarting a failure);
/// `Succeeded`/`Failed` when all stopped for good (`terminal`: the pod was stopped, e.g.
/// deleted, and nothing will restart).
pub fn phase(
    pod: &Pod,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    terminal: bool,
) -> &'static str {
    let mut pending_init = 0;
    let mut pending_sidecars = 0;
    let mut failed_init = 0;
    for c in init_containers(pod) {
        if is_restartable(c) {
            // A sidecar is pending until it started.
            if find(init, &c.name).is_none_or(|s| s.started != Some(true)) {
                pending_sidecars += 1;
            }
            continue;
        }
        let Some(s) = find(init, &c.name) else {
            pending_init += 1;
            continue;
        };
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = &state.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if state.waiting.is_some() {
            match last_terminated_code(s) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }

    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in containers(pod) {
        let Some(s) = find(regular, &c.name) else {
            unknown += 1;
            continue;
        };
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = &state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if last_terminated_code(s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }

    let policy = restart_policy(pod);
    if failed_init > 0 && policy == RestartPolicy::Never {
        return "Failed";
    }
    let regular_started = containers(pod).iter().any(|c| {
        find(regular, &c.name)
            .and_then(|s| s.state.as_ref())
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    });
    if pending_init > 0 || (pending_sidecars > 0 && !regular_started) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        return match policy {
            RestartPolicy::Always => "Running",
            _ if stopped == succeeded => "Succeeded",
            RestartPolicy::Never => "Failed",
            RestartPolicy::OnFailure => "Running",
        };
    }
    "Pending"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::{json, Value};

    fn statuses(v: Value) -> Vec<ContainerStatus> {
        serde_json::from_value(v).unwrap()
    }

    fn st(name: &str, state: Value) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state})
    }

    fn running(name: &str) -> Value {
        st(name, json!({"running": {}}))
    }

    fn exited(name: &str, code: i32) -> Value {
        st(name, json!({"terminated": {"exitCode": code}}))
    }

    fn waiting(name: &str) -> Value {
        st(name, json!({"waiting": {"reason": "ContainerCreating"}}))
    }

    fn crash_looping(name: &str, code: i32) -> Value {
        let mut s = st(name, json!({"waiting": {"reason": "CrashLoopBackOff"}}));
        s["lastState"] = json!({"terminated": {"exitCode": code}});
        s
    }

    fn two(policy: &str) -> Pod {
        pod(json!({"spec": {"restartPolicy": policy, "containers": [
            {"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}}))
    }

    #[test]
    fn regular_containers() {
        let table = [
            ("Always", json!([]), false, "Pending"),
            (
                "Always",
                json!([waiting("a"), running("b")]),
                false,
                "Pending",
            ),
            (
                "Always",
                json!([running("a"), running("b")]),
                false,
                "Running",
            ),
            ("Always", json!([running("a")]), false, "Pending"),
            (
                "Always",
                json!([running("a"), exited("b", 0)]),
                false,
                "Running",
            ),
            (
                "Always",
                json!([exited("a", 0), exited("b", 1)]),
                false,
                "Running",
            ),
            (
                "Always",
                json!([exited("a", 0), crash_looping("b", 1)]),
                false,
                "Running",
            ),
            (
                "Always",
                json!([exited("a", 0), exited("b", 0)]),
                true,
                "Succeeded",
            ),
            (
                "Always",
                json!([exited("a", 0), exited("b", 137)]),
                true,
                "Failed",
            ),
            (
                "OnFailure",
                json!([exited("a", 0), exited("b", 0)]),
                false,
                "Succeeded",
            ),
            (
                "OnFailure",
                json!([exited("a", 0), crash_looping("b", 1)]),
                false,
                "Running",
            ),
            (
                "Never",
                json!([exited("a", 0), exited("b", 0)]),
                false,
                "Succeeded",
            ),
            (
                "Never",
                json!([exited("a", 0), exited("b", 2)]),
                false,
                "Failed",
            ),
            (
                "Never",
                json!([running("a"), exited("b", 2)]),
                false,
                "Running",
            ),
        ];
        for (i, (policy, s, terminal, want)) in table.into_iter().enumerate() {
            assert_eq!(
                phase(&two(policy), &[], &statuses(s), terminal),
                want,
                "row {i}"
            );
        }
    }

    #[test]
    fn init_containers() {
        let p = |policy: &str| {
            pod(json!({"spec": {"restartPolicy": policy,
                "initContainers": [{"name": "i", "image": "i"}]}}))
        };
        let r = |s: Value| statuses(json!([s]));
        let none: Vec<ContainerStatus> = vec![];
        let waiting_c = r(st("c", json!({"waiting": {"reason": "PodInitializing"}})));
        assert_eq!(phase(&p("Always"), &none, &waiting_c, false), "Pending");
        assert_eq!(
            phase(&p("Always"), &r(running("i")), &waiting_c, false),
            "Pending"
        );
        assert_eq!(
            phase(&p("Always"), &r(exited("i", 0)), &waiting_c, false),
            "Pending"
        );
        assert_eq!(
            phase(&p("Always"), &r(exited("i", 0)), &r(running("c")), false),
            "Running"
        );
        // A failed init container fails a Never pod, and keeps others pending.
        assert_eq!(
            phase(&p("Never"), &r(exited("i", 1)), &waiting_c, false),
            "Failed"
        );
        assert_eq!(
            phase(&p("Never"), &r(crash_looping("i", 1)), &waiting_c, false),
            "Failed"
        );
        assert_eq!(
            phase(
                &p("OnFailure"),
                &r(crash_looping("i", 1)),
                &waiting_c,
                false
            ),
            "Pending"
        );
        assert_eq!(
            phase(&p("Always"), &r(exited("i", 1)), &waiting_c, false),
            "Pending"
        );
    }
}
