//! The last status of a pod the kubelet finished (upstream's status manager `TerminatePod`):
//! no container is left looking as if it might still run, and the phase is terminal.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
};

use super::init_containers::is_restartable;
use super::spec::init_containers;

fn unknown_end() -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("ContainerStatusUnknown".into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref()?.terminated.as_ref()
}

fn waiting(s: &ContainerStatus) -> bool {
    s.state.as_ref().is_some_and(|st| st.waiting.is_some())
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref()?.terminated.as_ref()
}

/// Whether the pod got through initialization, judged from `status`.
fn initialized(pod: &Pod, status: &PodStatus) -> bool {
    let inits = init_containers(pod);
    if inits.is_empty() {
        return true;
    }
    let ran = status
        .container_statuses
        .iter()
        .flatten()
        .any(|s| last_terminated(s).is_some() || !waiting(s));
    if ran {
        return true;
    }
    let statuses = status
        .init_container_statuses
        .as_deref()
        .unwrap_or_default();
    let (Some(last), Some(spec)) = (statuses.last(), inits.get(statuses.len().wrapping_sub(1)))
    else {
        return false;
    };
    if spec.name != last.name {
        return false;
    }
    if is_restartable(spec) {
        return last.state.as_ref().is_some_and(|s| s.running.is_some())
            && last.started == Some(true);
    }
    last_terminated(last).is_some_and(|t| t.exit_code == 0)
        || terminated(last).is_some_and(|t| t.exit_code == 0)
}

/// `status` (from [`super::pod_status()`]) made final: once initialized, every container not
/// terminated is reported terminated with `ContainerStatusUnknown` (exit code 137); so is
/// every init container up to the last one that tried to start; and a phase other than
/// `Succeeded` becomes `Failed` (static pods keep theirs).
pub fn terminated_status(pod: &Pod, mut status: PodStatus) -> PodStatus {
    if initialized(pod, &status) {
        for s in status.container_statuses.iter_mut().flatten() {
            if terminated(s).is_none() {
                s.state = Some(unknown_end());
            }
        }
    }
    if let Some(inits) = status.init_container_statuses.as_mut() {
        // All but the trailing init containers that never left waiting (at least the first).
        let tried = inits
            .iter()
            .rposition(|s| !waiting(s) || last_terminated(s).is_some())
            .map(|i| i + 1)
            .unwrap_or(1.min(inits.len()));
        for s in inits.iter_mut().take(tried) {
            if terminated(s).is_none() {
                s.state = Some(unknown_end());
            }
        }
    }
    let static_pod = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubernetes.io/config.source"))
        .is_some_and(|s| s != "api");
    if !static_pod && !matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        status.phase = Some("Failed".into());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::{json, Value};

    fn st(name: &str, state: Value) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state})
    }

    fn status(v: Value) -> PodStatus {
        serde_json::from_value(v).unwrap()
    }

    fn unknown() -> Value {
        json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated"}})
    }

    #[test]
    fn running_and_waiting_containers_end_unknown_and_the_pod_fails() {
        let p = pod(json!({"spec": {"containers": [
            {"name": "a", "image": "i"}, {"name": "b", "image": "i"}, {"name": "c", "image": "i"}]}}));
        let s = status(json!({"phase": "Running", "containerStatuses": [
            st("a", json!({"running": {}})),
            st("b", json!({"waiting": {"reason": "CrashLoopBackOff"}})),
            st("c", json!({"terminated": {"exitCode": 0}})),
        ]}));
        let out = serde_json::to_value(terminated_status(&p, s)).unwrap();
        assert_eq!(out["phase"], json!("Failed"));
        assert_eq!(out["containerStatuses"][0]["state"], unknown());
        assert_eq!(out["containerStatuses"][1]["state"], unknown());
        assert_eq!(
            out["containerStatuses"][2]["state"],
            json!({"terminated": {"exitCode": 0}})
        );
    }

    #[test]
    fn terminal_phases_stay() {
        let p = pod(json!({}));
        for phase in ["Succeeded", "Failed"] {
            let s = status(json!({"phase": phase, "containerStatuses": [
                st("c", json!({"terminated": {"exitCode": 0}}))]}));
            assert_eq!(terminated_status(&p, s).phase.as_deref(), Some(phase));
        }
        let static_pod =
            pod(json!({"metadata": {"annotations": {"kubernetes.io/config.source": "file"}}}));
        let s = status(json!({"phase": "Running"}));
        assert_eq!(
            terminated_status(&static_pod, s).phase.as_deref(),
            Some("Running")
        );
    }

    #[test]
    fn an_uninitialized_pod_keeps_its_waiting_containers() {
        let p = pod(json!({"spec": {"initContainers": [
            {"name": "i1", "image": "i"}, {"name": "i2", "image": "i"}, {"name": "i3", "image": "i"}]}}));
        let s = status(json!({"phase": "Pending",
            "initContainerStatuses": [
                st("i1", json!({"terminated": {"exitCode": 0}})),
                st("i2", json!({"running": {}})),
                st("i3", json!({"waiting": {"reason": "PodInitializing"}})),
            ],
            "containerStatuses": [st("c", json!({"waiting": {"reason": "PodInitializing"}}))]}));
        let out = serde_json::to_value(terminated_status(&p, s)).unwrap();
        assert_eq!(out["phase"], json!("Failed"));
        assert_eq!(out["initContainerStatuses"][1]["state"], unknown());
        assert_eq!(
            out["initContainerStatuses"][2]["state"],
            json!({"waiting": {"reason": "PodInitializing"}})
        );
        assert_eq!(
            out["containerStatuses"][0]["state"],
            json!({"waiting": {"reason": "PodInitializing"}})
        );
        // Nothing ever started: the first init container still ends unknown.
        let s = status(json!({"phase": "Pending", "initContainerStatuses": [
            st("i1", json!({"waiting": {}})), st("i2", json!({"waiting": {}}))]}));
        let out = serde_json::to_value(terminated_status(&p, s)).unwrap();
        assert_eq!(out["initContainerStatuses"][0]["state"], unknown());
        assert_eq!(
            out["initContainerStatuses"][1]["state"],
            json!({"waiting": {}})
        );
    }

    #[test]
    fn a_pod_whose_last_init_container_succeeded_is_initialized() {
        let p = pod(json!({"spec": {"initContainers": [{"name": "i1", "image": "i"}]}}));
        let s = status(json!({"phase": "Pending",
            "initContainerStatuses": [st("i1", json!({"terminated": {"exitCode": 0}}))],
            "containerStatuses": [st("c", json!({"waiting": {"reason": "ContainerCreating"}}))]}));
        let out = serde_json::to_value(terminated_status(&p, s)).unwrap();
        assert_eq!(out["containerStatuses"][0]["state"], unknown());
    }
}
