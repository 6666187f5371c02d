//! One pod's sync (upstream's `SyncPod` / `SyncTerminatingPod` for one worker): read what the
//! runtime has of the pod, ask the planner what to do, carry the steps out through CRI, and
//! write the pod's status when it changed. Deleted pods end with the final status and the
//! delete with grace period 0; pods the API no longer has are torn down ([`Executor::clean_up`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, Service};
use k8s_openapi::jiff::Timestamp;

use super::api::{same_status, status_patch, PodApi};
use super::cgroups;
use super::cri_config::{cgroup_parent, sandbox_config};
use super::observe::observe;
use super::volumes;
use crate::cri::{pb, ImageService, RuntimeService};
use crate::kubelet::plan::labels::POD_LOGS_ROOT;
use crate::kubelet::plan::spec::{
    api_phase_is_terminal, containers, init_containers, is_deleting, uid,
};
use crate::kubelet::plan::{
    compute_pod_actions, garbage, image_backoff_key, pod_status, sandbox_spec, terminated_status,
    Action, Allocatable, Backoffs, NodeDns, ObservedPod, Reasons, SandboxState, StatusInputs,
    Waiting,
};
use crate::kubelet::static_pods::status_target;

/// What the executor knows of its node.
#[derive(Debug, Clone)]
pub struct NodeContext {
    pub host_ips: Vec<IpAddr>,
    pub dns: NodeDns,
    pub allocatable: Allocatable,
    /// Bytes of memory (the limit of containers without one).
    pub memory_capacity: i64,
    /// `--cgroup-root`: the pods' cgroups go under `<root>/kubepods`.
    pub cgroup_root: String,
    /// Where pod volumes live: `<dir>/<pod uid>/volumes/…` (`<data-dir>/agent/pods`).
    pub pods_dir: PathBuf,
    /// Where the pods' log directories go (upstream's `podLogsDir`, `/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// The air-gap image import pass: a pull waits for it ([`Executor::imported_meanwhile`]).
    pub image_imports: crate::images::background::ImportsDone,
}

/// The executor's shared parts; one per node.
pub struct Executor {
    pub runtime: Arc<dyn RuntimeService>,
    pub images: Arc<dyn ImageService>,
    pub api: Arc<dyn PodApi>,
    pub node: NodeContext,
    pub backoffs: Mutex<Backoffs>,
    /// The Services the node knows (for the service environment variables).
    pub services: Box<dyn Fn() -> Vec<Service> + Send + Sync>,
    /// The probe workers and their results.
    pub probes: Arc<crate::kubelet::prober::Manager>,
    /// Where the kubelet's Events go.
    pub events: crate::kubelet::events::Recorder,
    /// Slots for pods creating sandboxes and starting containers ([`start_concurrency`]).
    pub starts: tokio::sync::Semaphore,
}

/// How many pods may create sandboxes and start containers at once on a node with `cpus`
/// CPUs: eight per CPU, at least 16. The work is the runtime's (shim, runc, CNI plugins): a
/// burst of 100 pods started all at once shares the CPUs a hundred ways and every pod
/// finishes late (RunPodSandbox took 9 s on average on 2 CPUs); in slots, pods finish in the
/// order they came. The runtime's steps also wait (process starts, fsyncs): 2 slots per CPU,
/// and still 4, left the 2-CPU benchmark node idle part of the time (docs/scale.md, session
/// 38: 16 slots against 8 gave the 100-pod burst a p99 about 1 s lower in 4 of 5 pairs).
/// Pulls and hooks hold no slot. Never more than a semaphore can hold.
pub fn start_concurrency(cpus: usize) -> usize {
    cpus.saturating_mul(8)
        .clamp(16, tokio::sync::Semaphore::MAX_PERMITS)
}

/// What a pod's worker keeps between syncs.
#[derive(Debug, Default)]
pub struct PodState {
    /// Why containers wait (image pull and start failures, back-offs).
    pub reasons: Reasons,
    /// The status last written and the UID of the API pod it went to (the informer's copy
    /// may lag behind).
    pub written: Option<(String, k8s_openapi::api::core::v1::PodStatus)>,
    last_gc: Option<Instant>,
    /// When the pod's volumes were last set up.
    volumes_at: Option<Instant>,
}

/// How a sync went: whether containers wait on something (a back-off, a failed pull), so the
/// worker should look again soon; whether the pod is finished (deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Synced {
    pub waiting: bool,
    pub deleted: bool,
}

/// How often a running pod's file volumes are rewritten from their sources.
const VOLUME_RESYNC: Duration = Duration::from_secs(60);

/// How often dead containers are collected.
const GC_PERIOD: Duration = Duration::from_secs(60);

/// Why a sync step failed (logged; the worker retries on its next sync).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Listing the pod's containers and sandboxes failed.
    #[error("{0}")]
    Observe(#[source] crate::cri::error::Error),
    /// A container could not be stopped.
    #[error("stopping container {name}: {source}")]
    StopContainer {
        /// The container.
        name: String,
        /// The runtime's error.
        #[source]
        source: crate::cri::error::Error,
    },
    /// A sandbox could not be stopped.
    #[error("stopping sandbox {id}: {source}")]
    StopSandbox {
        /// The sandbox.
        id: String,
        /// The runtime's error.
        #[source]
        source: crate::cri::error::Error,
    },
    /// The runtime did not create the sandbox.
    #[error("creating the pod sandbox: {0}")]
    CreateSandbox(#[source] crate::cri::error::Error),
    /// The new sandbox's status could not be read.
    #[error("reading the new sandbox: {0}")]
    ReadSandbox(#[source] crate::cri::error::Error),
    /// A status patch or the final delete failed.
    #[error(transparent)]
    Api(#[from] super::api::Error),
}

/// The sandbox the plan's containers go into.
pub(super) struct Sandbox {
    pub id: String,
    pub config: pb::PodSandboxConfig,
    pub ips: Vec<String>,
}

pub(super) fn find_container<'a>(pod: &'a Pod, name: &str, init: bool) -> Option<&'a Container> {
    let list = if init {
        init_containers(pod)
    } else {
        containers(pod)
    };
    list.iter().find(|c| c.name == name)
}

impl Executor {
    pub(super) fn namespace(pod: &Pod) -> &str {
        pod.metadata.namespace.as_deref().unwrap_or_default()
    }

    fn sandbox_config_for(&self, pod: &Pod, attempt: u32) -> pb::PodSandboxConfig {
        let mut spec = sandbox_spec(pod, attempt, &self.node.dns);
        if let Some(rest) = spec.log_directory.strip_prefix(POD_LOGS_ROOT) {
            spec.log_directory = format!("{}{rest}", self.node.pod_logs_dir.display());
        }
        sandbox_config(&spec, &cgroup_parent(&self.node.cgroup_root, pod))
    }

    /// The newest ready sandbox, as the plan found it.
    fn current_sandbox(&self, pod: &Pod, observed: &ObservedPod) -> Option<Sandbox> {
        let s = observed
            .sandboxes_newest_first()
            .into_iter()
            .find(|s| s.state == SandboxState::Ready)?;
        Some(Sandbox {
            id: s.id.clone(),
            config: self.sandbox_config_for(pod, s.attempt),
            ips: s
                .ip
                .iter()
                .chain(&s.additional_ips)
                .map(|ip| ip.to_string())
                .collect(),
        })
    }

    /// Syncs `pod` once.
    pub async fn sync_pod(&self, pod: &Pod, state: &mut PodState) -> Result<Synced, StepError> {
        let pod_uid = uid(pod).to_string();
        let probes = self.probes.results();
        let started = Instant::now();
        let observed = observe(&*self.runtime, &*self.images, &pod_uid, Some(pod))
            .await
            .map_err(StepError::Observe)?;
        tracing::debug!(pod = %pod_uid, took = ?started.elapsed(), "observed");
        let now = Timestamp::now();
        let plan = {
            let mut backoffs = self.backoffs.lock().unwrap_or_else(|e| e.into_inner());
            // A few entries at most: cheap enough per sync, and keeps the tables bounded by
            // the containers that failed in the last 10 minutes.
            backoffs.gc(now);
            compute_pod_actions(pod, &observed, &mut backoffs, &probes, now)
        };
        let mut sandbox = self.current_sandbox(pod, &observed);
        let mut skip: BTreeSet<String> = BTreeSet::new();
        let mut last_started: Option<String> = None;
        let mut pre_stop_took: BTreeMap<String, Duration> = BTreeMap::new();
        let mut deleted = false;
        let mut volumes_ready = false;
        let mut mount_failed = false;
        let mut pulled: BTreeSet<String> = BTreeSet::new();
        // Held from the first sandbox creation or container start to the end of the actions,
        // except while pulling or running a postStart hook.
        let mut slot = None;
        for action in &plan.actions {
            match action {
                Action::RunPreStop { id, name, timeout } => {
                    let started = Instant::now();
                    let handler = find_container(pod, name, false)
                        .or_else(|| find_container(pod, name, true))
                        .and_then(|c| c.lifecycle.as_ref())
                        .and_then(|l| l.pre_stop.as_ref());
                    let ip = pod_ip(pod, sandbox.as_ref());
                    if let Err(e) = self.hook(pod, name, id, &ip, handler, *timeout).await {
                        tracing::warn!(pod = %pod_uid, container = %name, "preStop hook: {e}");
                        // Upstream keeps the message out of the event (it may hold secrets).
                        self.warn(pod, name, "FailedPreStopHook", "PreStopHook failed".into());
                    }
                    pre_stop_took.insert(id.clone(), started.elapsed());
                }
                Action::KillContainer {
                    id,
                    name,
                    grace,
                    message,
                    ..
                } => {
                    let took = pre_stop_took.get(id).copied().unwrap_or_default();
                    let timeout = stop_timeout(*grace, took);
                    tracing::info!(pod = %pod_uid, container = %name, "Killing: {message}");
                    self.killing(pod, name, message);
                    if let Err(e) = self.runtime.stop_container(id.clone(), timeout).await {
                        if !e.is_not_found() {
                            return Err(StepError::StopContainer {
                                name: name.clone(),
                                source: e,
                            });
                        }
                    }
                }
                Action::KillSandbox { id } => {
                    if let Err(e) = self.runtime.stop_pod_sandbox(id.clone()).await {
                        return Err(StepError::StopSandbox {
                            id: id.clone(),
                            source: e,
                        });
                    }
                    if sandbox.as_ref().is_some_and(|s| s.id == *id) {
                        sandbox = None;
                    }
                }
                Action::CreateSandbox { attempt } => {
                    if slot.is_none() {
                        slot = self.starts.acquire().await.ok();
                    }
                    self.sandbox_changed(pod, *attempt);
                    let config = self.sandbox_config_for(pod, *attempt);
                    if let Err(e) = std::fs::create_dir_all(&config.log_directory) {
                        tracing::warn!("creating {}: {e}", config.log_directory);
                    }
                    let started = Instant::now();
                    let id = self
                        .runtime
                        .run_pod_sandbox(config.clone(), String::new())
                        .await
                        .map_err(|e| self.sandbox_failed(pod, e))?;
                    tracing::debug!(pod = %pod_uid, took = ?started.elapsed(), "RunPodSandbox");
                    let status = self
                        .runtime
                        .pod_sandbox_status(id.clone(), false)
                        .await
                        .map_err(StepError::ReadSandbox)?;
                    let ips = status
                        .status
                        .and_then(|s| s.network)
                        .map(|n| {
                            std::iter::once(n.ip)
                                .chain(n.additional_ips.into_iter().map(|p| p.ip))
                                .filter(|ip| !ip.is_empty())
                                .collect()
                        })
                        .unwrap_or_default();
                    sandbox = Some(Sandbox { id, config, ips });
                }
                Action::PullImage { container, image } => {
                    slot = None;
                    if self.imported_meanwhile(pod, container, image).await {
                        continue;
                    }
                    let sandbox_config = sandbox.as_ref().map(|s| s.config.clone());
                    pulled.insert(container.clone());
                    let pulling = self.pulling(pod, container, image);
                    let result = self.pull(pod, image, sandbox_config).await;
                    self.pull_done(pod, container, image, pulling, &result);
                    if let Err(e) = result {
                        let mut backoffs = self.backoffs.lock().unwrap_or_else(|e| e.into_inner());
                        let key = image_backoff_key(pod, image);
                        backoffs.image_pull.next(&key, now, now);
                        state.reasons.insert(
                            container.clone(),
                            Waiting::new("ErrImagePull", e.to_string()),
                        );
                        skip.insert(container.clone());
                    }
                }
                Action::StartContainer {
                    name,
                    init,
                    attempt,
                } => {
                    if skip.contains(name) {
                        continue;
                    }
                    let Some(c) = find_container(pod, name, *init) else {
                        continue;
                    };
                    if slot.is_none() {
                        slot = self.starts.acquire().await.ok();
                    }
                    if !volumes_ready {
                        let started = Instant::now();
                        let set_up = self.set_up_volumes(pod, sandbox.as_ref()).await;
                        tracing::debug!(pod = %pod_uid, took = ?started.elapsed(), "volumes set up");
                        if let Err(e) = set_up {
                            tracing::warn!(pod = %pod_uid, "FailedMount: {e}");
                            mount_failed = true;
                            break;
                        }
                        volumes_ready = true;
                        state.volumes_at = Some(Instant::now());
                    }
                    let started = Instant::now();
                    let result = match &sandbox {
                        Some(s) => self.start_container(pod, c, *attempt, s).await,
                        None => Err(Waiting::new(
                            "CreateContainerError",
                            "the pod has no ready sandbox",
                        )),
                    };
                    tracing::debug!(pod = %pod_uid, container = %name, took = ?started.elapsed(), "container started");
                    self.started(pod, c, pulled.contains(name), &result);
                    match result {
                        Ok(()) => {
                            state.reasons.remove(name);
                            last_started = Some(name.clone());
                        }
                        Err(w) => {
                            tracing::warn!(pod = %pod_uid, container = %name, "{}: {}", w.reason, w.message);
                            state.reasons.insert(name.clone(), w);
                            skip.insert(name.clone());
                            let restartable = c.restart_policy.as_deref() == Some("Always");
                            if *init && !restartable {
                                break;
                            }
                        }
                    }
                }
                Action::RunPostStart { name } => {
                    if last_started.as_deref() != Some(name.as_str()) {
                        continue;
                    }
                    slot = None;
                    let fresh = observe(&*self.runtime, &*self.images, &pod_uid, None)
                        .await
                        .map_err(StepError::Observe)?;
                    let Some(id) = fresh.latest(name).map(|c| c.id.clone()) else {
                        continue;
                    };
                    let handler = find_container(pod, name, false)
                        .or_else(|| find_container(pod, name, true))
                        .and_then(|c| c.lifecycle.as_ref())
                        .and_then(|l| l.post_start.as_ref());
                    let ip = pod_ip(pod, sandbox.as_ref());
                    let timeout = Duration::from_secs(30);
                    if let Err(e) = self.hook(pod, name, &id, &ip, handler, timeout).await {
                        tracing::warn!(pod = %pod_uid, container = %name, "FailedPostStartHook: {e}");
                        self.warn(
                            pod,
                            name,
                            "FailedPostStartHook",
                            "PostStartHook failed".into(),
                        );
                        self.killing(pod, name, "FailedPostStartHook");
                        let grace = crate::kubelet::plan::spec::deletion_grace(pod);
                        let _ = self
                            .runtime
                            .stop_container(id, grace.as_secs() as i64)
                            .await;
                    }
                }
                Action::RemoveContainer { id } => {
                    if let Err(e) = self.runtime.remove_container(id.clone()).await {
                        tracing::warn!(pod = %pod_uid, "removing container {id}: {e}");
                    }
                }
                Action::RemoveSandbox { id } => {
                    if let Err(e) = self.runtime.remove_pod_sandbox(id.clone()).await {
                        tracing::warn!(pod = %pod_uid, "removing sandbox {id}: {e}");
                    }
                }
                Action::FinishDeletion { uid } => {
                    let inputs = StatusInputs {
                        pod,
                        observed: &observed,
                        probes: &probes,
                        reasons: &state.reasons,
                    };
                    let status =
                        terminated_status(pod, pod_status(inputs, &self.node.host_ips, now));
                    let ns = Self::namespace(pod);
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    if let Some(patch) = status_patch(pod.status.as_ref(), &status, uid) {
                        self.api.patch_status(ns, name, uid, patch).await?;
                    }
                    self.api.delete(ns, name, uid).await?;
                    deleted = true;
                }
            }
        }
        for (name, w) in &plan.waiting {
            self.waiting(pod, name, w);
            state.reasons.insert(name.clone(), w.clone());
        }
        if deleted {
            self.probes.remove_pod(&pod_uid);
            volumes::remove_pod_dir(&self.node.pods_dir, &pod_uid);
            remove_pod_logs(&self.node.pod_logs_dir, &pod_uid);
            cgroups::remove_pod_cgroups(&self.node.cgroup_root, &pod_uid);
            return Ok(Synced {
                waiting: false,
                deleted: true,
            });
        }
        let after = if plan.actions.is_empty() {
            observed
        } else {
            observe(&*self.runtime, &*self.images, &pod_uid, Some(pod))
                .await
                .map_err(StepError::Observe)?
        };
        let running = !mount_failed && !is_deleting(pod) && !api_phase_is_terminal(pod);
        if running
            && state
                .volumes_at
                .is_some_and(|t| t.elapsed() >= VOLUME_RESYNC)
        {
            // ConfigMap and Secret changes and fresh tokens reach running pods.
            let current = self.current_sandbox(pod, &after);
            match self.set_up_volumes(pod, current.as_ref()).await {
                Ok(()) => state.volumes_at = Some(Instant::now()),
                Err(e) => tracing::warn!(pod = %pod_uid, "refreshing volumes: {e}"),
            }
        }
        if state.last_gc.is_none_or(|t| t.elapsed() >= GC_PERIOD) {
            state.last_gc = Some(Instant::now());
            for a in garbage(&after) {
                if let Action::RemoveContainer { id } = a {
                    let _ = self.runtime.remove_container(id).await;
                }
            }
        }
        let inputs = StatusInputs {
            pod,
            observed: &after,
            probes: &probes,
            reasons: &state.reasons,
        };
        let status = pod_status(inputs, &self.node.host_ips, Timestamp::now());
        self.probes.update(pod, &status);
        // The informer's copy may lag behind what was written: neither needs a write.
        // A static pod's status goes to its mirror pod (none yet: nowhere, for now).
        let target = status_target(pod);
        let written = state
            .written
            .as_ref()
            .is_some_and(|(t, w)| Some(t) == target.as_ref() && same_status(w, &status));
        if let (false, Some(target)) = (written, target) {
            if let Some(patch) = status_patch(pod.status.as_ref(), &status, &target) {
                let ns = Self::namespace(pod);
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let started = Instant::now();
                self.api.patch_status(ns, name, &target, patch).await?;
                tracing::debug!(pod = %pod_uid, took = ?started.elapsed(), "status written");
                state.written = Some((target, status));
            }
        }
        Ok(Synced {
            waiting: mount_failed || !plan.waiting.is_empty() || !state.reasons.is_empty(),
            deleted: false,
        })
    }

    /// Tears down what the runtime still has of a pod the API no longer has (or never bound
    /// here): stops and removes its containers and sandboxes, then its volumes and logs.
    /// `true` when nothing is left.
    pub async fn clean_up(&self, pod_uid: &str) -> Result<bool, StepError> {
        self.probes.remove_pod(pod_uid);
        let observed = observe(&*self.runtime, &*self.images, pod_uid, None)
            .await
            .map_err(StepError::Observe)?;
        if observed.containers.is_empty() && observed.sandboxes.is_empty() {
            volumes::remove_pod_dir(&self.node.pods_dir, pod_uid);
            remove_pod_logs(&self.node.pod_logs_dir, pod_uid);
            cgroups::remove_pod_cgroups(&self.node.cgroup_root, pod_uid);
            return Ok(true);
        }
        tracing::info!(pod = %pod_uid, "removing the containers and sandboxes of an orphaned pod");
        for c in &observed.containers {
            if let Err(e) = self.runtime.stop_container(c.id.clone(), 2).await {
                tracing::warn!(pod = %pod_uid, "stopping orphaned container {}: {e}", c.id);
            }
            let _ = self.runtime.remove_container(c.id.clone()).await;
        }
        for s in &observed.sandboxes {
            let _ = self.runtime.stop_pod_sandbox(s.id.clone()).await;
            let _ = self.runtime.remove_pod_sandbox(s.id.clone()).await;
        }
        let left = observe(&*self.runtime, &*self.images, pod_uid, None)
            .await
            .map_err(StepError::Observe)?;
        let gone = left.containers.is_empty() && left.sandboxes.is_empty();
        if gone {
            volumes::remove_pod_dir(&self.node.pods_dir, pod_uid);
            remove_pod_logs(&self.node.pod_logs_dir, pod_uid);
            cgroups::remove_pod_cgroups(&self.node.cgroup_root, pod_uid);
        }
        Ok(gone)
    }
}

/// The pod's IP: the sandbox's, else the status's (the default host of httpGet hooks).
fn pod_ip(pod: &Pod, sandbox: Option<&Sandbox>) -> String {
    sandbox
        .and_then(|s| s.ips.first().cloned())
        .or_else(|| pod.status.as_ref().and_then(|s| s.pod_ip.clone()))
        .unwrap_or_default()
}

/// Removes a gone pod's log directory (`<pod logs dir>/<namespace>_<name>_<uid>`).
fn remove_pod_logs(root: &std::path::Path, pod_uid: &str) {
    let suffix = format!("_{pod_uid}");
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if !pod_uid.is_empty() && e.file_name().to_string_lossy().ends_with(&suffix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// CRI `StopContainer`'s timeout: the grace period less what the preStop hook took, but at
/// least 2 s unless the grace period itself is shorter (upstream's `killContainer`).
pub fn stop_timeout(grace: Duration, pre_stop: Duration) -> i64 {
    let min = Duration::from_secs(2).min(grace);
    grace.saturating_sub(pre_stop).max(min).as_secs() as i64
}

#[cfg(test)]
mod tests;
