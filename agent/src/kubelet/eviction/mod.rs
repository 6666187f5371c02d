//! The eviction manager (upstream's `pkg/kubelet/eviction`): every [`MONITORING_INTERVAL`] it
//! observes the node's memory and filesystems ([`signals`]), compares them with the hard
//! eviction thresholds ([`threshold`], `--kubelet-arg=eviction-hard=…`), reports
//! MemoryPressure/DiskPressure ([`pressure`], held for the transition period) and, while a
//! threshold is met, reclaims: first node-level disk (dead containers of pods that no longer
//! run, [`reclaim`], then every unused image), then by evicting one pod per round, ranked as
//! upstream ranks them ([`rank`]).
//!
//! # Guarantees
//! - An evicted pod's status is `phase: Failed`, `reason: Evicted`, upstream's message
//!   ([`message`]) and a `DisruptionTarget` condition (`TerminationByKubelet`); its containers
//!   are then stopped by its pod worker, which sees the terminal phase. An `Evicted` Warning
//!   event goes with it.
//! - Critical pods (static, mirror, system priority) are never evicted; at most one pod is
//!   evicted per round.
//! - Memory thresholds are handled before disk ones.

pub mod message;
pub mod pressure;
pub mod rank;
pub mod reclaim;
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

use crate::cri::RuntimeService;
use crate::kubelet::events::Recorder;
use crate::kubelet::image_gc::ImageGc;
use crate::kubelet::node_status::conditions::Pressure;
use crate::kubelet::plan::spec::api_phase_is_terminal;
use crate::kubelet::pods::api::PodApi;
use crate::report::error_chain;
use rank::{Candidate, PodUsage};
use signals::{thresholds_met, Observations};
use threshold::{Signal, Threshold};

/// How often the node is observed (upstream's `evictionMonitoringPeriod`).
pub const MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// Upstream's default `--eviction-pressure-transition-period`.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);

/// The eviction manager's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// The hard thresholds (`eviction-hard`).
    pub thresholds: Vec<Threshold>,
    /// How long a pressure condition stays after its thresholds stopped being met
    /// (`eviction-pressure-transition-period`).
    pub pressure_transition_period: Duration,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig {
            thresholds: threshold::defaults(),
            pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
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
    pub pressure: watch::Sender<Pressure>,
}

/// Memory first, the others in their configured order (upstream's `byEvictionPriority`).
fn by_eviction_priority(met: &mut [Threshold]) {
    met.sort_by_key(|t| t.signal != Signal::MemoryAvailable);
}

impl Manager {
    fn observe(&self) -> Observations {
        Observations::observe(&self.node_dir, self.image_dir.as_deref())
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
        let mut state = pressure::PressureState::default();
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
        state: &mut pressure::PressureState,
        evicted: &mut BTreeSet<String>,
        pods: &PodList,
    ) {
        let observations = self.observe();
        let mut met = thresholds_met(&self.config.thresholds, &observations);
        let p = state.update(&met, Instant::now(), self.config.pressure_transition_period);
        self.pressure.send_if_modified(|old| {
            let changed = *old != p;
            if changed {
                tracing::info!(
                    memory = p.memory,
                    disk = p.disk,
                    "eviction manager: node pressure changed"
                );
            }
            *old = p;
            changed
        });
        if met.is_empty() {
            return;
        }
        by_eviction_priority(&mut met);
        let threshold = met[0];
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
        if threshold.signal != Signal::MemoryAvailable {
            let uids = active
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            self.reclaim_disk(&uids).await;
            let after = self.observe();
            if thresholds_met(&self.config.thresholds, &after).is_empty() {
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
        match self.evict(victim.pod, &text).await {
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
        let measured = tokio::task::spawn_blocking(move || {
            for (ns, name, uid) in &keys {
                let u = by_uid.entry(uid.clone()).or_default();
                usage::measure(u, &pods_dir, &logs_dir, (ns, name, uid));
            }
            by_uid
        })
        .await;
        measured.unwrap_or_default()
    }

    /// Fails `pod` as upstream's eviction does; its worker then stops it.
    async fn evict(&self, pod: &Pod, text: &str) -> Result<(), crate::kubelet::pods::api::Error> {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threshold::ThresholdValue;

    #[test]
    fn memory_is_reclaimed_first() {
        let t = |signal| Threshold {
            signal,
            value: ThresholdValue::Percentage(0.1),
        };
        let mut met = vec![
            t(Signal::NodeFsAvailable),
            t(Signal::ImageFsAvailable),
            t(Signal::MemoryAvailable),
        ];
        by_eviction_priority(&mut met);
        let signals: Vec<Signal> = met.iter().map(|t| t.signal).collect();
        assert_eq!(
            signals,
            [
                Signal::MemoryAvailable,
                Signal::NodeFsAvailable,
                Signal::ImageFsAvailable
            ]
        );
    }
}
