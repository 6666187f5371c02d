//! `compute_pod_actions`: desired pod + observed runtime state → the steps that bring the runtime
//! to the pod's spec, with upstream's kubelet semantics (`computePodActions` and `SyncPod`,
//! `syncTerminatingPod` for deleted pods, `doBackOff` and the image manager at start time).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;

use super::actions::{Action, KillReason, PodActions};
use super::backoff::{go_duration, Backoff};
use super::image::{image_step, ImageStep};
use super::init_containers::{init_actions, is_restartable, ToKill};
use super::lifecycle::{next_init_container, sandbox_changed, should_restart, succeeded};
use super::observed::{
    ContainerState, ObservedContainer, ObservedPod, ProbeResult, ProbeResults, SandboxState,
    Waiting,
};
use super::spec::{
    api_phase_is_terminal, backoff_key, container_hash, containers, deletion_grace, format_pod,
    init_containers, is_deleting, restart_policy, restarts_on_failure, uid, RestartPolicy,
    MINIMUM_GRACE,
};

/// The back-off tables the kubelet keeps across plans (one each for the whole node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backoffs {
    /// Crash-loop back-off, keyed by `name_namespace_uid_container_hash` (upstream's `getStableKey`).
    pub crash_loop: Backoff,
    /// Image-pull back-off, keyed by [`super::image::image_backoff_key`]; the executor calls
    /// `next` on it when a pull fails.
    pub image_pull: Backoff,
}

impl Backoffs {
    /// Forgets the expired entries of both tables (upstream's kubelet runs `GC` on its
    /// back-offs in its periodic pod clean-up).
    pub fn gc(&mut self, now: Timestamp) {
        self.crash_loop.gc(now);
        self.image_pull.gc(now);
    }
}

/// Upstream's `computePodActions` result, before start-time checks.
#[derive(Debug, Default)]
struct Decision<'a> {
    kill_pod: bool,
    create_sandbox: Option<u32>,
    kill: Vec<ToKill<'a>>,
    init_start: Vec<&'a Container>,
    start: Vec<&'a Container>,
}

/// Decides what to do for `pod` now. Records crash-loop back-off (`Backoffs::crash_loop.next`)
/// for every container it lets restart, so the executor must carry out a plan before asking
/// for the next one.
pub fn compute_pod_actions(
    pod: &Pod,
    observed: &ObservedPod,
    backoffs: &mut Backoffs,
    probes: &ProbeResults,
    now: Timestamp,
) -> PodActions {
    let mut out = PodActions::default();
    if is_deleting(pod) {
        stop_pod(pod, observed, Some(deletion_grace(pod)), &mut out);
        if out.actions.is_empty() {
            finish_deletion(pod, observed, &mut out);
        }
        return out;
    }
    if api_phase_is_terminal(pod) {
        stop_pod(pod, observed, None, &mut out);
        return out;
    }
    let d = decide(pod, observed, probes);
    if d.kill_pod {
        stop_pod(pod, observed, None, &mut out);
    } else {
        for k in &d.kill {
            let grace = kill_grace(pod, k.spec, k.reason);
            kill(
                k.status,
                Some(k.spec),
                grace,
                k.reason,
                k.message.clone(),
                &mut out,
            );
        }
    }
    match d.create_sandbox {
        Some(attempt) => {
            // Init containers run again in a new sandbox: forget the old ones.
            for c in init_containers(pod) {
                for s in observed.containers.iter().filter(|s| s.name == c.name) {
                    if s.state != ContainerState::Running {
                        out.actions
                            .push(Action::RemoveContainer { id: s.id.clone() });
                    }
                }
            }
            out.actions.push(Action::CreateSandbox { attempt });
        }
        None => prune_init_containers(pod, observed, &mut out),
    }
    for c in d.init_start {
        let started = start(pod, c, true, observed, backoffs, now, &mut out);
        if !started && !is_restartable(c) {
            // Initialization cannot go on before this one ran.
            return out;
        }
    }
    for c in d.start {
        start(pod, c, false, observed, backoffs, now, &mut out);
    }
    out
}

/// Upstream's `pruneInitContainersBeforeStart`: of each init container only the newest
/// exited instance stays; older ones and ones in unknown state (stopped first) are removed.
fn prune_init_containers(pod: &Pod, observed: &ObservedPod, out: &mut PodActions) {
    for c in init_containers(pod) {
        let dead = observed.containers_newest_first().into_iter().filter(|s| {
            s.name == c.name && matches!(s.state, ContainerState::Exited | ContainerState::Unknown)
        });
        for (n, s) in dead.enumerate() {
            if n == 0 && s.state == ContainerState::Exited {
                continue;
            }
            out.actions
                .push(Action::RemoveContainer { id: s.id.clone() });
        }
    }
}

fn decide<'a>(pod: &'a Pod, observed: &'a ObservedPod, probes: &ProbeResults) -> Decision<'a> {
    let sandbox = sandbox_changed(pod, observed);
    let mut d = Decision {
        kill_pod: sandbox.create,
        create_sandbox: sandbox.create.then_some(sandbox.attempt),
        ..Default::default()
    };
    if sandbox.create {
        if !restarts_on_failure(pod) && sandbox.attempt != 0 && !observed.containers.is_empty() {
            // A Never pod whose sandbox went away after its containers ran: just stop it.
            d.create_sandbox = None;
            return d;
        }
        let to_start: Vec<&Container> = containers(pod)
            .iter()
            .filter(|c| {
                !(restart_policy(pod) == RestartPolicy::OnFailure && succeeded(c, observed))
            })
            .collect();
        let initialized = if init_containers(pod).iter().any(is_restartable) {
            containers(pod).iter().any(|c| {
                observed
                    .latest(&c.name)
                    .is_some_and(|s| s.state != ContainerState::Unknown)
            })
        } else {
            next_init_container(pod, observed).done
        };
        if to_start.is_empty() && initialized {
            d.create_sandbox = None;
            return d;
        }
        match init_containers(pod).first() {
            Some(first) => d.init_start = vec![first],
            None => d.start = to_start,
        }
        return d;
    }

    let init = init_actions(pod, observed, probes);
    d.kill = init.kill;
    d.init_start = init.start;
    if init.kill_pod || !init.initialized {
        d.kill_pod = init.kill_pod;
        return d;
    }

    let mut keep = 0;
    for c in containers(pod) {
        let status = observed.latest(&c.name);
        let running = status.filter(|s| s.state == ContainerState::Running);
        let Some(s) = running else {
            if should_restart(c, pod, observed) {
                d.start.push(c);
                if let Some(s) = status.filter(|s| s.state == ContainerState::Unknown) {
                    let message =
                        "Container is in \"unknown\" state, try killing it before restart";
                    d.kill.push(ToKill {
                        status: s,
                        spec: c,
                        reason: KillReason::Unknown,
                        message: message.into(),
                    });
                }
            }
            continue;
        };
        let mut restart = restarts_on_failure(pod);
        let (reason, message) = if s.hash != container_hash(c) {
            restart = true;
            (
                KillReason::SpecChanged,
                format!("Container {} definition changed", c.name),
            )
        } else if probes.liveness.get(&s.id) == Some(&ProbeResult::Failure) {
            (
                KillReason::LivenessProbe,
                format!("Container {} failed liveness probe", c.name),
            )
        } else if probes.startup.get(&s.id) == Some(&ProbeResult::Failure) {
            (
                KillReason::StartupProbe,
                format!("Container {} failed startup probe", c.name),
            )
        } else {
            keep += 1;
            continue;
        };
        let message = if restart {
            d.start.push(c);
            format!("{message}, will be restarted")
        } else {
            message
        };
        d.kill.push(ToKill {
            status: s,
            spec: c,
            reason,
            message,
        });
    }
    if keep == 0 && d.start.is_empty() {
        // Nothing to run any more: stop, and do not let sidecars keep the pod alive.
        d.kill_pod = true;
        d.init_start.clear();
    }
    d
}

/// Upstream's `setTerminationGracePeriod` for a container stopped while the pod lives on.
fn kill_grace(pod: &Pod, c: &Container, reason: KillReason) -> Duration {
    let secs = |s: i64| Duration::from_secs(s.max(0) as u64);
    if let Some(d) = pod.metadata.deletion_grace_period_seconds {
        return secs(d);
    }
    let Some(spec) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    else {
        return MINIMUM_GRACE;
    };
    let probe = match reason {
        KillReason::LivenessProbe => c.liveness_probe.as_ref(),
        KillReason::StartupProbe => c.startup_probe.as_ref(),
        _ => None,
    };
    secs(
        probe
            .and_then(|p| p.termination_grace_period_seconds)
            .unwrap_or(spec),
    )
}

fn has_pre_stop(c: &Container) -> bool {
    c.lifecycle.as_ref().is_some_and(|l| l.pre_stop.is_some())
}

fn kill(
    s: &ObservedContainer,
    spec: Option<&Container>,
    grace: Duration,
    reason: KillReason,
    message: String,
    out: &mut PodActions,
) {
    if spec.is_some_and(has_pre_stop) && !grace.is_zero() {
        out.actions.push(Action::RunPreStop {
            id: s.id.clone(),
            name: s.name.clone(),
            timeout: grace,
        });
    }
    out.actions.push(Action::KillContainer {
        id: s.id.clone(),
        name: s.name.clone(),
        grace,
        reason,
        message,
    });
}

/// Stops every running container (`grace`: the deletion's, or per container) and every ready
/// sandbox; exited containers stay for their logs. Sidecars (restartable init containers) stop
/// last, in reverse spec order, after the containers they serve.
fn stop_pod(pod: &Pod, observed: &ObservedPod, grace: Option<Duration>, out: &mut PodActions) {
    let inits = init_containers(pod);
    let sidecar_rank = |name: &str| {
        inits
            .iter()
            .rposition(|c| c.name == name && is_restartable(c))
            .map(|i| inits.len() - i)
    };
    let mut running: Vec<&ObservedContainer> = observed
        .containers_newest_first()
        .into_iter()
        .filter(|s| s.state == ContainerState::Running)
        .collect();
    // Stable: regular containers first (newest first), then sidecars from the last.
    running.sort_by_key(|s| sidecar_rank(&s.name));
    for s in running {
        let spec = inits
            .iter()
            .chain(containers(pod))
            .find(|c| c.name == s.name);
        let grace = match (grace, spec) {
            (Some(g), _) => g,
            (None, Some(c)) => kill_grace(pod, c, KillReason::PodStopping),
            (None, None) => MINIMUM_GRACE,
        };
        let message = format!("Stopping container {}", s.name);
        kill(s, spec, grace, KillReason::PodStopping, message, out);
    }
    for s in observed.sandboxes_newest_first() {
        if s.state == SandboxState::Ready {
            out.actions.push(Action::KillSandbox { id: s.id.clone() });
        }
    }
}

/// A deleted pod whose containers and sandboxes all stopped: report, delete the API object,
/// then remove what the runtime still has of it.
/// (Only running containers hold it back, as upstream: created or unknown ones are removed.)
fn finish_deletion(pod: &Pod, observed: &ObservedPod, out: &mut PodActions) {
    out.actions.push(Action::FinishDeletion {
        uid: uid(pod).to_string(),
    });
    for c in observed.containers_newest_first() {
        out.actions
            .push(Action::RemoveContainer { id: c.id.clone() });
    }
    for s in observed.sandboxes_newest_first() {
        out.actions.push(Action::RemoveSandbox { id: s.id.clone() });
    }
}

/// Starts `c` unless it is in crash-loop back-off or its image cannot be had now (`false`).
fn start(
    pod: &Pod,
    c: &Container,
    init: bool,
    observed: &ObservedPod,
    backoffs: &mut Backoffs,
    now: Timestamp,
    out: &mut PodActions,
) -> bool {
    if let Some(exited) = observed.latest_exited(&c.name) {
        let key = backoff_key(pod, c);
        let finished = exited.finished_at.unwrap_or(exited.created_at);
        if backoffs.crash_loop.is_in_backoff_since(&key, finished, now) {
            let message = format!(
                "back-off {} restarting failed container={} pod={}",
                go_duration(backoffs.crash_loop.get(&key)),
                c.name,
                format_pod(pod)
            );
            out.waiting
                .insert(c.name.clone(), Waiting::new("CrashLoopBackOff", message));
            return false;
        }
        backoffs.crash_loop.next(&key, finished, now);
    }
    match image_step(pod, c, observed, &backoffs.image_pull, now) {
        ImageStep::Wait(w) => {
            out.waiting.insert(c.name.clone(), w);
            return false;
        }
        ImageStep::Pull => out.actions.push(Action::PullImage {
            container: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
        }),
        ImageStep::Present => {}
    }
    let attempt = observed
        .latest(&c.name)
        .map(|s| (s.restart_count + 1).max(0) as u32)
        .unwrap_or(0);
    out.actions.push(Action::StartContainer {
        name: c.name.clone(),
        init,
        attempt,
    });
    if c.lifecycle.as_ref().is_some_and(|l| l.post_start.is_some()) {
        out.actions.push(Action::RunPostStart {
            name: c.name.clone(),
        });
    }
    true
}

#[cfg(test)]
mod tests;
