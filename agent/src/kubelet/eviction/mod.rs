//! The eviction manager (upstream's `pkg/kubelet/eviction`): every [`MONITORING_INTERVAL`] it
//! observes the node's memory, the pods' memory against node allocatable, its filesystems
//! and its process IDs ([`signals`], [`cgroup_stats`]), compares them with the eviction
//! thresholds ([`threshold`], [`config`]: `--kubelet-arg=eviction-hard=…`, `eviction-soft=…`
//! with `eviction-soft-grace-period=…`, `eviction-minimum-reclaim=…`), reports
//! MemoryPressure/DiskPressure/PIDPressure ([`pressure`], held for the transition period)
//! and, once a threshold has been met for its grace period ([`round`]), reclaims: for disk,
//! first node-level (dead containers of pods that no longer run, [`reclaim`], then every
//! unused image), then by evicting one pod per round, ranked as upstream ranks them
//! ([`rank`]).
//!
//! # Guarantees
//! - An evicted pod's status is `phase: Failed`, `reason: Evicted`, upstream's message
//!   ([`message`]) and a `DisruptionTarget` condition (`TerminationByKubelet`); its running
//!   containers are then stopped with the eviction's grace period ([`round::pod_grace_period`]:
//!   1 s for a hard threshold, the pod's own capped by `eviction-max-pod-grace-period` for a
//!   soft one), and its pod worker, which sees the terminal phase, finishes the teardown. An
//!   `Evicted` Warning event goes with it.
//! - Critical pods (static, mirror, system priority) are never evicted; at most one pod is
//!   evicted per round.
//! - Memory thresholds are handled before the others.
//! - `allocatableMemory.available` is node allocatable memory (capacity less
//!   `system-reserved` and `kube-reserved` memory) less the working set of the
//!   `<cgroup root>/kubepods` cgroup; k3rs does not put that amount on the cgroup as a limit.

pub mod cgroup_stats;
pub mod config;
pub mod message;
pub mod pressure;
pub mod rank;
pub mod reclaim;
pub mod round;
pub mod signals;
pub mod threshold;
pub mod usage;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cri::{pb, RuntimeService};
use crate::kubelet::events::Recorder;
use crate::kubelet::image_gc::ImageGc;
use crate::kubelet::node_status::conditions::Pressure;
use crate::kubelet::plan::labels;
use crate::kubelet::plan::spec::api_phase_is_terminal;
use crate::kubelet::pods::api::PodApi;
use crate::report::error_chain;
use rank::{Candidate, PodUsage};
use round::RoundState;
use signals::{thresholds_met, Observations};
use threshold::{Signal, Threshold};

/// How often the node is observed (upstream's `evictionMonitoringPeriod`).
pub const MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// Upstream's default `--eviction-pressure-transition-period`.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);

/// The eviction manager's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// Every threshold: hard, soft and allocatable ([`config::thresholds`]).
    pub thresholds: Vec<Threshold>,
    /// How long a pressure condition stays after its thresholds stopped being met
    /// (`eviction-pressure-transition-period`).
    pub pressure_transition_period: Duration,
    /// The longest grace period a pod evicted for a soft threshold gets
    /// (`eviction-max-pod-grace-period`, upstream's default 0).
    pub max_pod_grace_period: Duration,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig {
            thresholds: config::thresholds(&config::EvictionFlags::default())
                .expect("the defaults parse"),
            pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
            max_pod_grace_period: Duration::ZERO,
        }
    }
}

/// The pods of the node, as the pod workers see them.
pub type PodList = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;

/// The eviction manager of one node.
pub struct Manager {
    pub config: EvictionConfig,
    pub runtime: Arc<dyn RuntimeService>,
    pub api: Arc<dyn PodApi>,
    pub events: Recorder,
    pub image_gc: Arc<ImageGc>,
    /// A directory on the node's filesystem (nodefs: the data dir).
    pub node_dir: PathBuf,
    /// A directory on the runtime's image filesystem (`None`: the node's).
    pub image_dir: Option<PathBuf>,
    /// Where pod volumes and pod logs live.
    pub pods_dir: PathBuf,
    pub pod_logs_dir: PathBuf,
    /// The cgroup the pods' `kubepods` cgroup is under (`--kubelet-arg=cgroup-root`).
    pub cgroup_root: String,
    /// Node allocatable memory for `allocatableMemory.available` (bytes; 0: not observed).
    pub allocatable_memory: u64,
    /// Where the pressure the node status reports goes.
    pub pressure: watch::Sender<Pressure>,
}

/// What a node's disk and memory protection needs besides the executor's parts: the
/// eviction manager's and the image collector's settings, where the filesystems are, and
/// where the pressure goes.
#[derive(Debug, Clone)]
pub struct NodeProtection {
    pub eviction: EvictionConfig,
    pub image_gc: crate::kubelet::image_gc::ImageGcPolicy,
    /// A directory on the node's filesystem (the data dir).
    pub node_dir: PathBuf,
    /// A directory on the runtime's image filesystem (`None`: unknown, the node's).
    pub image_dir: Option<PathBuf>,
    /// The pod sandbox image (never collected).
    pub sandbox_image: String,
    /// The cgroup root and node allocatable memory (see [`Manager`]).
    pub cgroup_root: String,
    pub allocatable_memory: u64,
    pub pressure: watch::Sender<Pressure>,
}

impl Manager {
    fn observe(&self) -> Observations {
        let mut o = Observations::observe(&self.node_dir, self.image_dir.as_deref());
        if let Some(ws) = cgroup_stats::pods_working_set(&self.cgroup_root) {
            o.insert(
                Signal::AllocatableMemoryAvailable,
                self.allocatable_memory.saturating_sub(ws),
                self.allocatable_memory,
            );
        }
        if let Some((available, capacity)) = cgroup_stats::node_pids() {
            o.insert(Signal::PidAvailable, available, capacity);
        }
        o
    }

    /// Whether the image filesystem is not the node's.
    fn dedicated_imagefs(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let dev = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        self.image_dir
            .as_deref()
            .is_some_and(|i| dev(i).is_some() && dev(i) != dev(&self.node_dir))
    }

    /// Observes and reclaims until `stop`.
    pub async fn run(self, pods: PodList, stop: CancellationToken) {
        let mut state = RoundState::default();
        let mut evicted: BTreeSet<String> = BTreeSet::new();
        let mut tick = tokio::time::interval(MONITORING_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            self.synchronize(&mut state, &mut evicted, &pods).await;
        }
    }

    /// One round (upstream's `synchronize`).
    pub async fn synchronize(
        &self,
        state: &mut RoundState,
        evicted: &mut BTreeSet<String>,
        pods: &PodList,
    ) {
        let observations = self.observe();
        let round = state.step(
            &self.config.thresholds,
            &observations,
            Instant::now(),
            self.config.pressure_transition_period,
        );
        let p = round.pressure;
        self.pressure.send_if_modified(|old| {
            let changed = *old != p;
            if changed {
                tracing::info!(
                    memory = p.memory,
                    disk = p.disk,
                    pid = p.pid,
                    "eviction manager: node pressure changed"
                );
            }
            *old = p;
            changed
        });
        let Some(&threshold) = round.reclaim.first() else {
            return;
        };
        let resource = threshold.signal.resource();
        tracing::warn!(
            signal = threshold.signal.name(),
            resource,
            "eviction manager: attempting to reclaim"
        );
        let all = pods();
        let active: Vec<&Pod> = all
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| !api_phase_is_terminal(p))
            .filter(|p| !evicted.contains(p.metadata.uid.as_deref().unwrap_or_default()))
            .collect();
        evicted.retain(|uid| all.iter().any(|p| p.metadata.uid.as_deref() == Some(uid)));
        if !threshold.signal.is_memory() && threshold.signal != Signal::PidAvailable {
            let uids = active
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            self.reclaim_disk(&uids).await;
            let after = self.observe();
            if thresholds_met(&self.config.thresholds, &after, true).is_empty() {
                tracing::info!("eviction manager: node-level reclaim relieved the pressure");
                return;
            }
        }
        let usage = self.usage(&active).await;
        let candidates: Vec<Candidate> = active
            .iter()
            .map(|p| Candidate {
                pod: p,
                usage: usage.get(p.metadata.uid.as_deref().unwrap_or_default()),
            })
            .collect();
        let ranked = rank::rank(&candidates, threshold.signal, self.dedicated_imagefs());
        let Some(victim) = ranked.first() else {
            tracing::warn!("eviction manager: no pod to evict");
            return;
        };
        let text = message::eviction_message(
            resource,
            victim.pod,
            victim.usage,
            observations.threshold_and_available(&threshold),
        );
        let grace =
            round::pod_grace_period(&threshold, victim.pod, self.config.max_pod_grace_period);
        match self.evict(victim.pod, &text, grace).await {
            Ok(()) => {
                evicted.insert(victim.pod.metadata.uid.clone().unwrap_or_default());
            }
            Err(e) => tracing::warn!("eviction manager: evicting a pod: {}", error_chain(&e)),
        }
    }

    /// Removes what pods that no longer run leave behind, then every unused image.
    async fn reclaim_disk(&self, active: &BTreeSet<String>) {
        match self.runtime.list_containers(None).await {
            Ok(containers) => {
                let removed = reclaim::unused_containers(&containers, active);
                for id in &removed {
                    if let Err(e) = self.runtime.remove_container(id.clone()).await {
                        tracing::warn!(container = %id, "eviction manager: removing a dead container: {}", error_chain(&e));
                    }
                }
                if let Ok(sandboxes) = self.runtime.list_pod_sandbox(None).await {
                    for id in reclaim::unused_sandboxes(&sandboxes, &containers, &removed, active) {
                        if let Err(e) = self.runtime.remove_pod_sandbox(id.clone()).await {
                            tracing::warn!(sandbox = %id, "eviction manager: removing a sandbox: {}", error_chain(&e));
                        }
                    }
                }
                if !removed.is_empty() {
                    tracing::info!(
                        containers = removed.len(),
                        "eviction manager: removed dead containers"
                    );
                }
            }
            Err(e) => tracing::warn!("eviction manager: listing containers: {}", error_chain(&e)),
        }
        match self.image_gc.delete_unused().await {
            Ok(freed) if freed > 0 => {
                tracing::info!(bytes = freed, "eviction manager: removed unused images")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "eviction manager: removing unused images: {}",
                error_chain(&e)
            ),
        }
    }

    /// The usage of `pods` by UID.
    async fn usage(&self, pods: &[&Pod]) -> HashMap<String, PodUsage> {
        let stats = match self.runtime.list_container_stats().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("eviction manager: container stats: {}", error_chain(&e));
                Vec::new()
            }
        };
        let mut by_uid = usage::from_container_stats(&stats);
        let keys: Vec<(String, String, String)> = pods
            .iter()
            .map(|p| {
                let m = &p.metadata;
                let s = |v: &Option<String>| v.clone().unwrap_or_default();
                (s(&m.namespace), s(&m.name), s(&m.uid))
            })
            .collect();
        let (pods_dir, logs_dir) = (self.pods_dir.clone(), self.pod_logs_dir.clone());
        let cgroup_root = self.cgroup_root.clone();
        let measured = tokio::task::spawn_blocking(move || {
            for (ns, name, uid) in &keys {
                let u = by_uid.entry(uid.clone()).or_default();
                usage::measure(u, &pods_dir, &logs_dir, (ns, name, uid));
                u.processes = cgroup_stats::pod_process_count(&cgroup_root, uid);
            }
            by_uid
        })
        .await;
        measured.unwrap_or_default()
    }

    /// Fails `pod` as upstream's eviction does and stops its running containers with
    /// `grace`; its worker then finishes the teardown.
    async fn evict(
        &self,
        pod: &Pod,
        text: &str,
        grace: Duration,
    ) -> Result<(), crate::kubelet::pods::api::Error> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let now = Time(Timestamp::now());
        let mut conditions: Vec<PodCondition> = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        conditions.retain(|c| c.type_ != "DisruptionTarget");
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("TerminationByKubelet".into()),
            message: Some(text.to_string()),
            last_transition_time: Some(now),
            ..Default::default()
        });
        let patch = json!({"status": {
            "phase": "Failed",
            "reason": message::REASON,
            "message": text,
            "conditions": conditions,
        }});
        self.api.patch_status(ns, name, uid, patch).await?;
        tracing::warn!(pod = %format!("{ns}/{name}"), "eviction manager: pod evicted: {text}");
        self.events.pod(
            pod,
            crate::kubelet::events::WARNING,
            message::REASON,
            text.to_string(),
        );
        self.stop_containers(uid, grace).await;
        Ok(())
    }

    /// Stops the running containers of the pod `uid` with `grace` (upstream's `killPodFunc`
    /// with the eviction's grace period override).
    async fn stop_containers(&self, uid: &str, grace: Duration) {
        let filter = pb::ContainerFilter {
            label_selector: [(labels::POD_UID.to_string(), uid.to_string())].into(),
            ..Default::default()
        };
        let containers = match self.runtime.list_containers(Some(filter)).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    "eviction manager: listing the pod's containers: {}",
                    error_chain(&e)
                );
                return;
            }
        };
        let running = containers
            .into_iter()
            .filter(|c| c.state == pb::ContainerState::ContainerRunning as i32);
        for c in running {
            if let Err(e) = self
                .runtime
                .stop_container(c.id.clone(), grace.as_secs() as i64)
                .await
            {
                tracing::warn!(container = %c.id, "eviction manager: stopping an evicted pod's container: {}", error_chain(&e));
            }
        }
    }
}
