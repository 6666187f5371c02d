//! The kubelet-owned pod conditions (upstream's `status/generate.go`): `PodReadyToStartContainers`,
//! `Initialized`, `Ready` (with readiness gates), `ContainersReady` and `PodScheduled`, with
//! `lastTransitionTime` kept from the previous status while a condition's status is unchanged.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::init_containers::is_restartable;
use super::spec::{containers, init_containers};

/// The condition types the kubelet sets; the pod's other conditions are kept as they are.
pub const KUBELET_OWNED: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

fn cond(type_: &str, ok: bool, reason: &str, message: String) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: (!reason.is_empty()).then(|| reason.to_string()),
        message: (!message.is_empty()).then_some(message),
        ..Default::default()
    }
}

/// Go's `%s` of a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// `Initialized`: all init containers succeeded (`all`: init and regular statuses).
pub fn initialized(pod: &Pod, all: &[ContainerStatus], phase: &str) -> PodCondition {
    let mut unknown = vec![];
    let mut incomplete = vec![];
    for c in init_containers(pod) {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            // A sidecar counts once started, a regular init container once it succeeded.
            Some(s) if is_restartable(c) && s.started != Some(true) => {
                incomplete.push(c.name.as_str())
            }
            Some(s) if !is_restartable(c) && !s.ready => incomplete.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return cond("Initialized", true, "PodCompleted", String::new());
    }
    let regular_started = containers(pod).iter().any(|c| {
        find(all, &c.name)
            .and_then(|s| s.state.as_ref())
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    });
    if regular_started {
        return cond("Initialized", true, "", String::new());
    }
    let mut messages = vec![];
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        return cond("Initialized", true, "", String::new());
    }
    cond(
        "Initialized",
        false,
        "ContainersNotInitialized",
        messages.join(", "),
    )
}

/// `ContainersReady`: every sidecar and regular container is ready.
pub fn containers_ready(pod: &Pod, all: &[ContainerStatus], phase: &str) -> PodCondition {
    let mut unknown = vec![];
    let mut unready = vec![];
    let sidecars = init_containers(pod).iter().filter(|c| is_restartable(c));
    for c in sidecars.chain(containers(pod)) {
        match find(all, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return cond("ContainersReady", false, "PodCompleted", String::new());
    }
    if phase == "Failed" {
        return cond("ContainersReady", false, "PodFailed", String::new());
    }
    let mut messages = vec![];
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        return cond("ContainersReady", true, "", String::new());
    }
    cond(
        "ContainersReady",
        false,
        "ContainersNotReady",
        messages.join(", "),
    )
}

/// `Ready`: `ContainersReady` and every readiness gate's condition `True` (`conditions`: the
/// pod's conditions so far, where the gates' conditions are).
pub fn ready(
    pod: &Pod,
    conditions: &[PodCondition],
    all: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let c = containers_ready(pod, all, phase);
    if c.status != "True" {
        return PodCondition {
            type_: "Ready".into(),
            ..c
        };
    }
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or_default();
    let messages: Vec<String> = gates
        .iter()
        .filter_map(
            |g| match conditions.iter().find(|c| c.type_ == g.condition_type) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate \"{}\" does not exist.",
                    g.condition_type
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                    g.condition_type, c.status
                )),
                Some(_) => None,
            },
        )
        .collect();
    if messages.is_empty() {
        return cond("Ready", true, "", String::new());
    }
    cond(
        "Ready",
        false,
        "ReadinessGatesNotReady",
        messages.join(", "),
    )
}

/// `PodReadyToStartContainers`: the pod has a ready sandbox with its network.
pub fn ready_to_start_containers(sandbox_ready: bool) -> PodCondition {
    cond(
        "PodReadyToStartContainers",
        sandbox_ready,
        "",
        String::new(),
    )
}

/// `PodScheduled`: the pod is on this node.
pub fn scheduled() -> PodCondition {
    cond("PodScheduled", true, "", String::new())
}

/// Sets `lastTransitionTime`: the previous one while the status is unchanged, else `now`.
pub fn stamp(mut c: PodCondition, old: &[PodCondition], now: Timestamp) -> PodCondition {
    let previous = old
        .iter()
        .find(|o| o.type_ == c.type_ && o.status == c.status);
    c.last_transition_time = previous
        .and_then(|o| o.last_transition_time.clone())
        .or(Some(Time(now)));
    c
}

#[cfg(test)]
mod tests;
