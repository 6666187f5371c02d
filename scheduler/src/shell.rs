//! The scheduler's event loop: follows pods and nodes (from the process's shared informers)
//! into the [`Cache`], pops pods from the
//! [`SchedulingQueue`], decides with [`algorithm::schedule`] (and [`preemption`]), assumes
//! and binds in the background, and reports through [`report`].
//!
//! Guarantees: a pod is scheduled only after both initial lists are in; at most one decision
//! runs at a time (each sees the pods assumed by the previous ones); a failed binding puts the
//! pod back after its backoff; a relist drops what the API no longer has.

use std::collections::{HashMap, HashSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, Stream, StreamExt};
use k3rs_apimachinery::events::{EventRecorder, EventType};
use k3rs_apimachinery::informers::{Cached, SharedInformerFactory};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::algorithm;
use super::cache::{self, Cache, PodChange};
use super::filters::PodInfo;
use super::preemption;
use super::queue::SchedulingQueue;
use super::report;
use super::volume_binding::{self, PodVolumes, Storage};

/// How often the unschedulable pool is checked for pods waiting 5 minutes.
const FLUSH_CHECK: Duration = Duration::from_secs(30);
/// The same failure message is not recorded again as an Event within this time.
const EVENT_DEDUPE: Duration = Duration::from_secs(60);

/// The result of a background binding.
struct Bound {
    key: String,
    pod: Arc<Pod>,
    node: String,
    result: kube::Result<()>,
}

/// Relist bookkeeping of one watch: the keys seen since `Init`, until `InitDone`.
#[derive(Default)]
struct Relist {
    seen: Option<HashSet<String>>,
    synced: bool,
}

struct Scheduler {
    client: kube::Client,
    events: EventRecorder,
    cache: Cache,
    queue: SchedulingQueue,
    pods: Relist,
    nodes: Relist,
    tasks: JoinSet<()>,
    bound: mpsc::UnboundedSender<Bound>,
    last_failure: HashMap<String, (String, Instant)>,
    /// Where the next decision starts filtering (upstream's `nextStartNodeIndex`).
    next_start: usize,
    /// Claims, volumes and classes, for VolumeBinding.
    storage: StorageStores,
}

struct StorageStores {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
}

fn cloned<K: kube::Resource<DynamicType = ()> + Clone>(s: &Store<K>) -> Vec<K> {
    s.state().iter().map(|o| (**o).clone()).collect()
}

impl StorageStores {
    /// VolumeBinding's PreFilter for `pod` (nothing to do for a pod without claims).
    fn pre_filter(&self, pod: &Pod) -> Result<PodVolumes, volume_binding::PreFilterError> {
        if k3rs_apimachinery::volume::claims_of(pod).is_empty() {
            return Ok(PodVolumes::default());
        }
        let (claims, volumes, classes) = (
            cloned(&self.claims),
            cloned(&self.volumes),
            cloned(&self.classes),
        );
        volume_binding::pre_filter(
            pod,
            Storage {
                claims: &claims,
                volumes: &volumes,
                classes: &classes,
            },
        )
    }
}

/// The shared cache of every `K` once its first list is complete, and a stream that yields
/// once per change (for cluster events).
async fn storage_watch<K: Cached>(
    informers: &SharedInformerFactory,
) -> (Store<K>, impl Stream<Item = ()> + Send + 'static) {
    let informer = informers.informer::<K>();
    let changes = informer.subscribe().map(|_| ());
    (informer.synced_store().await, changes)
}

/// Runs the scheduler with `client` (its identity: `system:kube-scheduler`) until `stop`.
pub async fn run(client: kube::Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let pods = informers.informer::<Pod>().subscribe();
    let nodes = informers.informer::<Node>().subscribe();
    let (claims, e1) = storage_watch::<PersistentVolumeClaim>(&informers).await;
    let (volumes, e2) = storage_watch::<PersistentVolume>(&informers).await;
    let (classes, e3) = storage_watch::<StorageClass>(&informers).await;
    let host = k3rs_apimachinery::net::hostname();
    let events = EventRecorder::new(client.clone(), super::SCHEDULER_NAME, &host);
    let storage_events = futures::stream::select(futures::stream::select(e1, e2), e3);
    let mut storage_events = pin!(storage_events);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut s = Scheduler {
        storage: StorageStores {
            claims,
            volumes,
            classes,
        },
        client,
        events,
        cache: Cache::default(),
        queue: SchedulingQueue::default(),
        pods: Relist::default(),
        nodes: Relist::default(),
        tasks: JoinSet::new(),
        bound: tx,
        last_failure: HashMap::new(),
        next_start: 0,
    };
    let mut pods = pin!(pods);
    let mut nodes = pin!(nodes);
    let mut flush = tokio::time::interval(FLUSH_CHECK);
    loop {
        // Take in everything already delivered before deciding.
        drain(&mut pods, |e| s.on_pod(e));
        drain(&mut nodes, |e| s.on_node(e));
        while let Ok(b) = rx.try_recv() {
            s.on_bound(b);
        }
        while s.tasks.try_join_next().is_some() {}
        s.queue.flush_backoff(Instant::now());
        if s.pods.synced && s.nodes.synced && s.queue.has_active() {
            if let Some(key) = s.queue.pop(Instant::now()) {
                s.schedule_one(key);
            }
            tokio::task::yield_now().await;
            continue;
        }
        let wake = s
            .queue
            .next_backoff()
            .map(tokio::time::Instant::from_std)
            .unwrap_or_else(|| tokio::time::Instant::now() + FLUSH_CHECK);
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(e) = pods.next() => s.on_pod(e),
            Some(e) = nodes.next() => s.on_node(e),
            Some(b) = rx.recv() => s.on_bound(b),
            Some(()) = storage_events.next() => s.queue.cluster_event(Instant::now()),
            _ = tokio::time::sleep_until(wake) => {}
            _ = flush.tick() => s.queue.flush_unschedulable(Instant::now()),
        }
    }
    s.tasks.abort_all();
    while s.tasks.join_next().await.is_some() {}
}

fn drain<S, T>(stream: &mut std::pin::Pin<&mut S>, mut f: impl FnMut(T))
where
    S: Stream<Item = T>,
{
    while let Some(Some(item)) = stream.next().now_or_never() {
        f(item);
    }
}

/// Whether a pod's placement depends on where other pods are (so an assigned pod may help).
fn depends_on_other_pods(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.topology_spread_constraints.is_some()
            || s.affinity
                .as_ref()
                .is_some_and(|a| a.pod_affinity.is_some())
    })
}

impl Scheduler {
    fn on_pod(&mut self, event: watcher::Event<Arc<Pod>>) {
        let now = Instant::now();
        match event {
            watcher::Event::Init => self.pods.seen = Some(HashSet::new()),
            watcher::Event::InitApply(pod) | watcher::Event::Apply(pod) => {
                let key = cache::key(&pod);
                if let Some(seen) = self.pods.seen.as_mut() {
                    seen.insert(key.clone());
                }
                let priority = preemption::priority(&pod);
                match self.cache.apply_pod(pod) {
                    PodChange::Pending { spec_changed } => {
                        if !self.queue.contains(&key) {
                            self.queue.add(&key, priority);
                        } else if spec_changed {
                            self.queue.update(&key, now);
                        }
                    }
                    PodChange::Assigned => {
                        self.queue.delete(&key);
                        let cache = &self.cache;
                        self.queue.cluster_event_where(now, |k| {
                            cache.pending(k).is_some_and(|p| depends_on_other_pods(p))
                        });
                    }
                    PodChange::AssignedGone => self.queue.cluster_event(now),
                    PodChange::PendingGone => self.queue.delete(&key),
                    PodChange::Ignored => {}
                }
            }
            watcher::Event::Delete(pod) => self.on_pod_gone(&pod, now),
            watcher::Event::InitDone => {
                let seen = self.pods.seen.take().unwrap_or_default();
                for key in self.cache.pod_keys() {
                    if !seen.contains(&key) {
                        if let Some(pod) = self.cache.pod(&key).cloned() {
                            self.on_pod_gone(&pod, now);
                        }
                    }
                }
                self.pods.synced = true;
            }
        }
    }

    fn on_pod_gone(&mut self, pod: &Pod, now: Instant) {
        let key = cache::key(pod);
        self.last_failure.remove(&key);
        match self.cache.delete_pod(pod) {
            PodChange::AssignedGone => self.queue.cluster_event(now),
            _ => self.queue.delete(&key),
        }
    }

    fn on_node(&mut self, event: watcher::Event<Arc<Node>>) {
        let now = Instant::now();
        match event {
            watcher::Event::Init => self.nodes.seen = Some(HashSet::new()),
            watcher::Event::InitApply(node) | watcher::Event::Apply(node) => {
                if let Some(seen) = self.nodes.seen.as_mut() {
                    seen.insert(node.metadata.name.clone().unwrap_or_default());
                }
                if self.cache.apply_node(node) {
                    self.queue.cluster_event(now);
                }
            }
            watcher::Event::Delete(node) => {
                self.cache
                    .delete_node(node.metadata.name.as_deref().unwrap_or(""));
            }
            watcher::Event::InitDone => {
                let seen = self.nodes.seen.take().unwrap_or_default();
                for name in self.cache.node_names() {
                    if !seen.contains(&name) {
                        self.cache.delete_node(&name);
                    }
                }
                self.nodes.synced = true;
            }
        }
    }

    fn schedule_one(&mut self, key: String) {
        let Some(pod) = self.cache.pending(&key).cloned() else {
            self.queue.delete(&key);
            return;
        };
        let snapshot = self.cache.snapshot();
        let mut info = PodInfo::new(pod.clone());
        let decision = match self.storage.pre_filter(&pod) {
            Ok(volumes) => {
                info.volumes = Arc::new(volumes);
                let (decision, processed) =
                    algorithm::schedule_from(&info, snapshot, self.next_start);
                self.next_start = (self.next_start + processed) % snapshot.nodes.len().max(1);
                decision
            }
            Err(why) => {
                let n = snapshot.nodes.len();
                Err(algorithm::FitError {
                    num_nodes: n,
                    rejections: Vec::new(),
                    pre_filter: Some(why.to_string()),
                    post_filter: (n > 0).then(|| {
                        format!("0/{n} nodes are available: {n} Preemption is not helpful for scheduling")
                    }),
                })
            }
        };
        match decision {
            Ok(node) => {
                self.cache.assume(&key, &node);
                let (client, tx) = (self.client.clone(), self.bound.clone());
                let select = info.volumes.to_select();
                self.tasks.spawn(async move {
                    let result = match report::select_node(&client, &select, &node).await {
                        Ok(()) => report::bind(&client, &pod, &node).await,
                        Err(e) => Err(e),
                    };
                    let _ = tx.send(Bound {
                        key,
                        pod,
                        node,
                        result,
                    });
                });
            }
            Err(mut fit) => {
                let mut plan = None;
                if !snapshot.nodes.is_empty() && fit.pre_filter.is_none() {
                    match preemption::preempt(&info, snapshot, &fit) {
                        Ok(p) => plan = Some(p),
                        Err(msg) => fit.post_filter = Some(msg.to_string()),
                    }
                }
                self.queue.unschedulable(&key, Instant::now());
                let message = fit.message();
                tracing::debug!(pod = %key, %message, "scheduler: unschedulable");
                if self.should_record(&key, &message) {
                    report::event(
                        &self.events,
                        &pod,
                        EventType::Warning,
                        "FailedScheduling",
                        &message,
                    );
                }
                let (client, events) = (self.client.clone(), self.events.clone());
                self.tasks.spawn(async move {
                    // The nomination first: the victims' deletion lets the pod be retried.
                    let nominated = plan.as_ref().map(|p| p.node.clone());
                    if let Err(e) =
                        report::unschedulable(&client, &pod, &message, nominated.as_deref()).await
                    {
                        tracing::debug!(error = %e, "scheduler: pod status not updated");
                    }
                    if let Some(plan) = &plan {
                        for victim in &plan.victims {
                            if let Err(e) = report::preempt(&client, &events, victim, &pod, &plan.node).await {
                                tracing::warn!(error = %e, "scheduler: deleting a preemption victim");
                            }
                        }
                    }
                });
            }
        }
    }

    /// Whether a failure message is new for the pod (or was last recorded a while ago).
    fn should_record(&mut self, key: &str, message: &str) -> bool {
        let now = Instant::now();
        match self.last_failure.get(key) {
            Some((m, at)) if m == message && now.duration_since(*at) < EVENT_DEDUPE => false,
            _ => {
                self.last_failure
                    .insert(key.to_string(), (message.to_string(), now));
                true
            }
        }
    }

    fn on_bound(&mut self, b: Bound) {
        match b.result {
            Ok(()) => {
                self.queue.delete(&b.key);
                self.last_failure.remove(&b.key);
                let (ns, name) = b.key.split_once('/').unwrap_or(("", &b.key));
                let msg = format!("Successfully assigned {ns}/{name} to {}", b.node);
                report::event(&self.events, &b.pod, EventType::Normal, "Scheduled", &msg);
            }
            Err(e) => {
                tracing::debug!(pod = %b.key, error = %e, "scheduler: binding failed");
                self.cache.forget(&b.key);
                self.queue.error(&b.key, Instant::now());
                let msg = format!("running Bind plugin \"DefaultBinder\": {e}");
                report::event(
                    &self.events,
                    &b.pod,
                    EventType::Warning,
                    "FailedScheduling",
                    &msg,
                );
            }
        }
    }
}
