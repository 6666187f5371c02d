//! `containerStatuses` / `initContainerStatuses` from the runtime's containers (upstream's
//! `convertToAPIContainerStatuses` with the probe manager's `ready`/`started`): the newest
//! instance gives `state`, the one before `lastState`; containers that will be (re)started
//! and have a recorded reason show it as `waiting`; containers never seen wait in
//! `ContainerCreating` (`PodInitializing` when the pod has init containers).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::lifecycle::should_restart;
use super::observed::{
    ContainerState, ObservedContainer, ObservedPod, ProbeResult, ProbeResults, Reasons,
};
use super::spec::{init_containers, is_deleting};

/// The runtime prefix of `containerID`s.
pub const RUNTIME: &str = "containerd";

/// `containerd://<id>`.
pub fn container_id(id: &str) -> String {
    format!("{RUNTIME}://{id}")
}

fn waiting(reason: &str, message: &str) -> ApiState {
    ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            message: (!message.is_empty()).then(|| message.to_string()),
        }),
        ..Default::default()
    }
}

fn terminated_unknown(message: &str) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: 137,
        reason: Some("ContainerStatusUnknown".into()),
        message: Some(message.into()),
        ..Default::default()
    }
}

/// One runtime container as an API status (`old`: the status the API has for that name).
fn convert(c: &ObservedContainer, old: Option<&ContainerStatus>) -> ContainerStatus {
    let cid = container_id(&c.id);
    let mut status = ContainerStatus {
        name: c.name.clone(),
        restart_count: c.restart_count,
        image: c.image.clone(),
        image_id: c.image_ref.clone(),
        container_id: Some(cid.clone()),
        last_state: Some(ApiState::default()),
        ..Default::default()
    };
    let old_running = old
        .and_then(|o| o.state.as_ref())
        .is_some_and(|s| s.running.is_some());
    status.state = Some(match c.state {
        ContainerState::Running => ApiState {
            running: Some(ContainerStateRunning {
                started_at: c.started_at.map(Time),
            }),
            ..Default::default()
        },
        ContainerState::Exited => ApiState {
            terminated: Some(ContainerStateTerminated {
                exit_code: c.exit_code,
                reason: (!c.reason.is_empty()).then(|| c.reason.clone()),
                message: (!c.message.is_empty()).then(|| c.message.clone()),
                started_at: c.started_at.map(Time),
                finished_at: c.finished_at.map(Time),
                container_id: Some(cid),
                ..Default::default()
            }),
            ..Default::default()
        },
        ContainerState::Unknown if old_running => {
            status.restart_count = old.map(|o| o.restart_count).unwrap_or_default() + 1;
            ApiState {
                terminated: Some(terminated_unknown(
                    "The container could not be located when the pod was terminated",
                )),
                ..Default::default()
            }
        }
        ContainerState::Created | ContainerState::Unknown => ApiState {
            waiting: Some(ContainerStateWaiting::default()),
            ..Default::default()
        },
    });
    status
}

/// What the status builders read besides the pod spec.
#[derive(Debug, Clone, Copy)]
pub struct StatusInputs<'a> {
    pub pod: &'a Pod,
    pub observed: &'a ObservedPod,
    pub probes: &'a ProbeResults,
    pub reasons: &'a Reasons,
}

/// The statuses of `specs` (the pod's `initContainers` when `init`, else its `containers`):
/// init containers in spec order, containers sorted by name (upstream's order).
pub fn container_statuses(
    inputs: StatusInputs<'_>,
    specs: &[Container],
    init: bool,
) -> Vec<ContainerStatus> {
    let StatusInputs {
        pod,
        observed,
        probes,
        reasons,
    } = inputs;
    let old_list = pod.status.as_ref().and_then(|s| {
        if init {
            s.init_container_statuses.as_ref()
        } else {
            s.container_statuses.as_ref()
        }
    });
    let old: BTreeMap<&str, &ContainerStatus> = old_list
        .into_iter()
        .flatten()
        .map(|s| (s.name.as_str(), s))
        .collect();
    let has_inits = !init_containers(pod).is_empty();
    let default_reason = if has_inits {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };

    let mut statuses: BTreeMap<&str, ContainerStatus> = BTreeMap::new();
    for c in specs {
        let mut s = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(default_reason, "")),
            last_state: Some(ApiState::default()),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if o.state.as_ref().is_some_and(|st| st.terminated.is_some()) {
                s = (*o).clone();
            } else {
                s.restart_count = o.restart_count;
                s.last_state = o.last_state.clone();
            }
        }
        statuses.insert(&c.name, s);
    }

    // A container that ran and vanished from the runtime: show it stopped, not waiting.
    for c in specs {
        if observed.containers.iter().any(|o| o.name == c.name) {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else {
            continue;
        };
        let old_state = o.state.clone().unwrap_or_default();
        if old_state.terminated.is_some() || old_state.running.is_none() {
            continue;
        }
        let Some(s) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        let default_waiting = s
            .state
            .as_ref()
            .and_then(|st| st.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        let has_last = s
            .last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some());
        if !default_waiting || has_last {
            continue;
        }
        s.last_state = Some(ApiState {
            terminated: Some(terminated_unknown(
                "The container could not be located when the pod was deleted.  The container used to be Running",
            )),
            ..Default::default()
        });
        if !is_deleting(pod) {
            s.restart_count += 1;
        }
    }

    // The newest instance is the state, the one before it the last state.
    let mut seen: BTreeMap<&str, u8> = BTreeMap::new();
    for c in observed.containers_newest_first() {
        let Some(s) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        let n = seen.entry(&c.name).or_default();
        match *n {
            0 => *s = convert(c, old.get(c.name.as_str()).copied()),
            1 => s.last_state = convert(c, None).state,
            _ => continue,
        }
        *n += 1;
    }

    // Containers about to be (re)started show why they are not running.
    for c in specs {
        if init
            && observed
                .latest(&c.name)
                .is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
        {
            continue;
        }
        if !should_restart(c, pod, observed) {
            continue;
        }
        let Some(reason) = reasons.get(&c.name) else {
            continue;
        };
        let Some(s) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        if s.state.as_ref().is_some_and(|st| st.terminated.is_some()) {
            s.last_state = s.state.take();
        }
        s.state = Some(waiting(&reason.reason, &reason.message));
    }

    let mut out: Vec<ContainerStatus> = if init {
        specs
            .iter()
            .filter_map(|c| statuses.remove(c.name.as_str()))
            .collect()
    } else {
        statuses.into_values().collect()
    };
    for (s, spec) in out.iter_mut().filter_map(|s| {
        let spec = specs.iter().find(|c| c.name == s.name)?;
        Some((s, spec))
    }) {
        set_readiness(s, spec, init, probes);
    }
    out
}

/// `started` and `ready` as the probe manager sets them: a regular init container is ready once
/// it succeeded; other containers once started (startup probe passed) and ready by their
/// readiness probe (or without one).
fn set_readiness(s: &mut ContainerStatus, spec: &Container, init: bool, probes: &ProbeResults) {
    let state = s.state.clone().unwrap_or_default();
    let id = s
        .container_id
        .as_deref()
        .and_then(|c| c.split_once("://"))
        .map(|(_, id)| id.to_string())
        .unwrap_or_default();
    let started = state.running.is_some()
        && match probes.startup.get(&id) {
            Some(r) => *r == ProbeResult::Success,
            None => spec.startup_probe.is_none(),
        };
    s.started = Some(started);
    s.ready = if init && !super::init_containers::is_restartable(spec) {
        state.terminated.as_ref().is_some_and(|t| t.exit_code == 0)
    } else {
        started
            && match probes.readiness.get(&id) {
                Some(r) => *r == ProbeResult::Success,
                None => spec.readiness_probe.is_none(),
            }
    };
}

#[cfg(test)]
mod tests;
