//! What the init containers need (upstream's `computeInitContainerActions`, the path every
//! pod takes since sidecar containers went GA): regular init containers run one after another to
//! completion; restartable init containers (`restartPolicy: Always`, "sidecars") start in their
//! turn, count as initialized once started (startup probe passed), and are kept running — and
//! restarted — for the pod's whole life.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::actions::KillReason;
use super::lifecycle::init_failed;
use super::observed::{ContainerState, ObservedContainer, ObservedPod, ProbeResult, ProbeResults};
use super::spec::{container_hash, containers, init_containers, restarts_on_failure};

/// An init container with `restartPolicy: Always`.
pub fn is_restartable(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// A running container to stop, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ToKill<'a> {
    pub status: &'a ObservedContainer,
    pub spec: &'a Container,
    pub reason: KillReason,
    pub message: String,
}

/// The init containers' part of a plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitPlan<'a> {
    /// Init containers to start, in spec order.
    pub start: Vec<&'a Container>,
    pub kill: Vec<ToKill<'a>>,
    /// A regular init container failed under `restartPolicy: Never`: the pod is done.
    pub kill_pod: bool,
    /// Initialization is complete: the regular containers may run.
    pub initialized: bool,
}

/// Decides what the init containers need.
pub fn init_actions<'a>(
    pod: &'a Pod,
    observed: &'a ObservedPod,
    probes: &ProbeResults,
) -> InitPlan<'a> {
    let inits = init_containers(pod);
    let mut plan = InitPlan {
        initialized: inits.is_empty(),
        ..Default::default()
    };
    if inits.is_empty() {
        return plan;
    }
    // A regular container created or running means initialization happened before (the init
    // containers' records may be gone).
    plan.initialized = containers(pod).iter().any(|c| {
        observed
            .latest(&c.name)
            .is_some_and(|s| matches!(s.state, ContainerState::Created | ContainerState::Running))
    });
    let mut previously_initialized = plan.initialized;
    let restart_on_failure = restarts_on_failure(pod);
    let mut start: Vec<usize> = vec![];
    let kill = |plan: &mut InitPlan<'a>, s, c, reason, message: String| {
        plan.kill.push(ToKill {
            status: s,
            spec: c,
            reason,
            message,
        })
    };

    // From the last: the last init container with a record tells how far initialization got.
    for (i, c) in inits.iter().enumerate().rev() {
        let restartable = is_restartable(c);
        let Some(s) = observed.latest(&c.name) else {
            if previously_initialized && restartable {
                start.push(i);
            }
            continue;
        };
        if previously_initialized && !restartable {
            continue;
        }
        match s.state {
            ContainerState::Created => start.push(i),
            ContainerState::Running if restartable => 'sidecar: {
                if c.startup_probe.is_some() {
                    match probes.startup.get(&s.id) {
                        None => break 'sidecar,
                        Some(ProbeResult::Failure) => {
                            let m = format!("Init container {} failed startup probe", c.name);
                            kill(&mut plan, s, c, KillReason::StartupProbe, m);
                            start.push(i);
                            break 'sidecar;
                        }
                        Some(ProbeResult::Success) => {}
                    }
                }
                if i == inits.len() - 1 {
                    plan.initialized = true;
                } else if !previously_initialized {
                    start.push(i + 1);
                }
                if s.hash != container_hash(c) {
                    let m = format!("Init container {} definition changed", c.name);
                    kill(&mut plan, s, c, KillReason::SpecChanged, m);
                    start.push(i);
                } else if c.liveness_probe.is_some()
                    && probes.liveness.get(&s.id) == Some(&ProbeResult::Failure)
                {
                    let m = format!("Init container {} failed liveness probe", c.name);
                    kill(&mut plan, s, c, KillReason::LivenessProbe, m);
                    start.push(i);
                }
            }
            // A regular init container still running: wait for it.
            ContainerState::Running => {}
            ContainerState::Exited if restartable => start.push(i),
            ContainerState::Exited if init_failed(s) => {
                if !restart_on_failure {
                    return InitPlan {
                        kill_pod: true,
                        ..Default::default()
                    };
                }
                start.push(i);
            }
            ContainerState::Exited => {
                if i == inits.len() - 1 {
                    plan.initialized = true;
                } else {
                    start.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                if !restartable && !restart_on_failure {
                    return InitPlan {
                        kill_pod: true,
                        ..Default::default()
                    };
                }
                let m = "Init container is in \"unknown\" state, try killing it before restart";
                kill(&mut plan, s, c, KillReason::Unknown, m.into());
                start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        start.push(0);
    }
    start.sort_unstable();
    start.dedup();
    plan.start = start.into_iter().map(|i| &inits[i]).collect();
    plan
}

#[cfg(test)]
mod tests;
