//! The prober manager (upstream's `prober.Manager`): one worker task per container and probe,
//! started when a sync first sees the container's pod and stopped when the pod is gone or
//! terminal. Workers read the container's state from the pod status the last sync computed,
//! run their probe every `periodSeconds` ([`check`]), record `Unhealthy` events for failures,
//! and store results ([`state`]) in the map the planner reads. A stored result that changes
//! marks the pod so its worker syncs it at once (not at the next relist).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus, Probe};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::check::{self, Outcome, Subject};
use super::state::{ContainerView, Next, PodFacts, ProbeKind, Settings, Update, Worker};
use crate::cri::RuntimeService;
use crate::kubelet::events::{Recorder, WARNING};
use crate::kubelet::plan::spec::{containers, init_containers, uid};
use crate::kubelet::plan::{ProbeResult, ProbeResults};

struct WorkerHandle {
    trigger: Arc<Notify>,
    stop: CancellationToken,
}

#[derive(Default)]
struct PodEntry {
    pod: Arc<Pod>,
    facts: PodFacts,
    pod_ip: String,
    containers: HashMap<String, ContainerView>,
    workers: HashMap<(String, ProbeKind), WorkerHandle>,
}

/// The probe workers of one node and their results.
pub struct Manager {
    runtime: Arc<dyn RuntimeService>,
    events: Recorder,
    /// Woken when a result changed (the pod workers' loop then wakes the pods in `woken`).
    changed: Arc<Notify>,
    results: Mutex<ProbeResults>,
    woken: Mutex<BTreeSet<String>>,
    pods: Mutex<HashMap<String, PodEntry>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn probe_of(c: &k8s_openapi::api::core::v1::Container, kind: ProbeKind) -> Option<&Probe> {
    match kind {
        ProbeKind::Liveness => c.liveness_probe.as_ref(),
        ProbeKind::Readiness => c.readiness_probe.as_ref(),
        ProbeKind::Startup => c.startup_probe.as_ref(),
    }
}

fn view(s: &ContainerStatus) -> ContainerView {
    let state = s.state.clone().unwrap_or_default();
    ContainerView {
        id: s
            .container_id
            .as_deref()
            .and_then(|c| c.split_once("://"))
            .map(|(_, id)| id.to_string())
            .unwrap_or_default(),
        running_since: state.running.and_then(|r| r.started_at).map(|t| t.0),
        terminated: state.terminated.is_some(),
        started: s.started.unwrap_or(false),
    }
}

impl Manager {
    pub fn new(runtime: Arc<dyn RuntimeService>, events: Recorder, changed: Arc<Notify>) -> Self {
        Manager {
            runtime,
            events,
            changed,
            results: Mutex::default(),
            woken: Mutex::default(),
            pods: Mutex::default(),
        }
    }

    /// The latest results, for the planner.
    pub fn results(&self) -> ProbeResults {
        lock(&self.results).clone()
    }

    /// The pods whose results changed since the last call.
    pub fn take_woken(&self) -> BTreeSet<String> {
        std::mem::take(&mut *lock(&self.woken))
    }

    /// Tells the workers of `pod` its latest status; starts the workers it lacks.
    pub fn update(self: &Arc<Self>, pod: &Pod, status: &PodStatus) {
        let pod_uid = uid(pod).to_string();
        let phase = status.phase.as_deref().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            self.remove_pod(&pod_uid);
            return;
        }
        let spec = pod.spec.as_ref();
        let facts = PodFacts {
            deleting: pod.metadata.deletion_timestamp.is_some(),
            terminal: false,
            restart_never: spec.and_then(|s| s.restart_policy.as_deref()) == Some("Never"),
        };
        let results = self.results();
        let mut pods = lock(&self.pods);
        let entry = pods.entry(pod_uid.clone()).or_default();
        entry.pod = Arc::new(pod.clone());
        entry.facts = facts;
        entry.pod_ip = status.pod_ip.clone().unwrap_or_default();
        entry.containers = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
            .map(|s| (s.name.clone(), view(s)))
            .collect();
        let sidecars = init_containers(pod)
            .iter()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        for c in containers(pod).iter().chain(sidecars) {
            for kind in ProbeKind::ALL {
                let Some(probe) = probe_of(c, kind) else {
                    continue;
                };
                let key = (c.name.clone(), kind);
                if let Some(w) = entry.workers.get(&key) {
                    // Upstream probes readiness at once while a container is not ready.
                    let id = entry.containers.get(&c.name).map(|v| v.id.clone());
                    let ready = id.and_then(|id| results.readiness.get(&id).copied());
                    if kind == ProbeKind::Readiness && ready != Some(ProbeResult::Success) {
                        w.trigger.notify_one();
                    }
                    continue;
                }
                let handle = WorkerHandle {
                    trigger: Arc::new(Notify::new()),
                    stop: CancellationToken::new(),
                };
                tokio::spawn(work(
                    self.clone(),
                    pod_uid.clone(),
                    c.name.clone(),
                    kind,
                    probe.clone(),
                    handle.trigger.clone(),
                    handle.stop.clone(),
                ));
                entry.workers.insert(key, handle);
            }
        }
    }

    /// Stops the workers of a pod that is gone or finished.
    pub fn remove_pod(&self, pod_uid: &str) {
        if let Some(entry) = lock(&self.pods).remove(pod_uid) {
            for w in entry.workers.values() {
                w.stop.cancel();
            }
        }
    }

    fn apply(&self, pod_uid: &str, kind: ProbeKind, updates: Vec<Update>) {
        if updates.is_empty() {
            return;
        }
        let mut changed = false;
        {
            let mut results = lock(&self.results);
            let map = match kind {
                ProbeKind::Liveness => &mut results.liveness,
                ProbeKind::Readiness => &mut results.readiness,
                ProbeKind::Startup => &mut results.startup,
            };
            for u in updates {
                changed |= match u {
                    Update::Set(id, r) => map.insert(id, r) != Some(r),
                    Update::Remove(id) => map.remove(&id).is_some(),
                };
            }
        }
        if changed {
            lock(&self.woken).insert(pod_uid.to_string());
            self.changed.notify_one();
        }
    }

    /// The pod, its facts, the container's view and the pod IP; `None` once the pod is gone.
    fn look(
        &self,
        pod_uid: &str,
        name: &str,
    ) -> Option<(Arc<Pod>, PodFacts, Option<ContainerView>, String)> {
        let pods = lock(&self.pods);
        let e = pods.get(pod_uid)?;
        Some((
            e.pod.clone(),
            e.facts,
            e.containers.get(name).cloned(),
            e.pod_ip.clone(),
        ))
    }
}

async fn work(
    mgr: Arc<Manager>,
    pod_uid: String,
    name: String,
    kind: ProbeKind,
    probe: Probe,
    trigger: Arc<Notify>,
    stop: CancellationToken,
) {
    let settings = Settings::of(&probe, kind);
    let mut w = Worker::default();
    while let Some((pod, facts, container, pod_ip)) = mgr.look(&pod_uid, &name) {
        let (next, updates) =
            w.before_probe(kind, &settings, facts, container.as_ref(), Timestamp::now());
        mgr.apply(&pod_uid, kind, updates);
        match next {
            Next::Stop => break,
            Next::Wait => {}
            Next::Probe => {
                let spec = containers(&pod)
                    .iter()
                    .chain(init_containers(&pod))
                    .find(|c| c.name == name);
                let (Some(spec), Some(id)) = (spec, w.container_id.clone()) else {
                    break;
                };
                let subject = Subject {
                    container: spec,
                    container_id: &id,
                    pod_ip: &pod_ip,
                };
                let outcome = tokio::select! {
                    _ = stop.cancelled() => break,
                    o = check::run(&*mgr.runtime, &probe, &subject) => o,
                };
                let result = match outcome {
                    Outcome::Success => Some(ProbeResult::Success),
                    Outcome::Failure(output) => {
                        let message = format!("{} probe failed: {output}", kind.label());
                        mgr.events
                            .container(&pod, &name, WARNING, "Unhealthy", message);
                        Some(ProbeResult::Failure)
                    }
                    Outcome::Error(e) => {
                        let message = format!("{} probe errored: {e}", kind.label());
                        mgr.events
                            .container(&pod, &name, WARNING, "Unhealthy", message);
                        None
                    }
                };
                if let Some(u) = w.after_probe(kind, &settings, result) {
                    mgr.apply(&pod_uid, kind, vec![u]);
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = trigger.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(settings.period_secs)) => {}
        }
    }
    if let Some(id) = w.container_id {
        mgr.apply(&pod_uid, kind, vec![Update::Remove(id)]);
    }
}
