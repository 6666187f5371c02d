//! The pod side of all hollow nodes: one watch of bound pods, the pure planner per pod, and the
//! planned requests carried out.
//!
//! Guarantees:
//! - at most one request per pod is in flight; an event arriving meanwhile is planned again
//!   once the request is done (client-go's workqueue "dirty" rule);
//! - the cached pod never goes back to an older `resourceVersion` (a successful patch's answer
//!   is cached at once, a late watch event from before it is ignored);
//! - after the watch's initial list, pods no longer listed are forgotten, and nothing is
//!   planned until the list is complete (pod IPs already in use are reserved first).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::node_spec::HollowNode;
use super::pod_ips::{self, PodIps};
use super::pod_plan::{self, PodAction, PodContext};
use super::Shared;

/// Wait before planning a pod again after a failed request.
const RETRY: Duration = Duration::from_secs(1);

type Key = (String, String);

fn key(pod: &Pod) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

fn revision(pod: &Pod) -> Option<u64> {
    pod.metadata.resource_version.as_deref()?.parse().ok()
}

/// The outcome of one request: the pod as the server answered (if it still exists), or retry.
enum Done {
    Updated(Box<Pod>),
    Gone,
    Failed,
}

struct Worker {
    shared: Shared,
    nodes: HashMap<String, HollowNode>,
    pods: HashMap<Key, Pod>,
    ips: PodIps,
    in_flight: HashSet<Key>,
    dirty: HashSet<Key>,
    /// When each pod is to be planned again; the heap may hold stale entries.
    next_check: HashMap<Key, Instant>,
    timers: BinaryHeap<Reverse<(Instant, Key)>>,
    /// Keys seen since the watch (re)started listing; `Some` while the list runs.
    listing: Option<HashSet<Key>>,
}

/// Watches the pods bound to `nodes` and plays their kubelet until `stop`.
pub(crate) async fn run(shared: Shared, nodes: Vec<HollowNode>, stop: CancellationToken) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let mut events = watcher(api, watcher::Config::default().fields("spec.nodeName!="))
        .default_backoff()
        .boxed();
    let mut w = Worker {
        shared,
        nodes: nodes.into_iter().map(|n| (n.name.clone(), n)).collect(),
        pods: HashMap::new(),
        ips: PodIps::default(),
        in_flight: HashSet::new(),
        dirty: HashSet::new(),
        next_check: HashMap::new(),
        timers: BinaryHeap::new(),
        listing: None,
    };
    let mut requests: JoinSet<(Key, Done)> = JoinSet::new();
    loop {
        let next_timer = w.timers.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            _ = stop.cancelled() => break,
            event = events.next() => match event {
                Some(Ok(event)) => w.on_event(event, &mut requests),
                Some(Err(e)) => tracing::warn!(error = %e, "pod watch"),
                None => break,
            },
            Some(done) = requests.join_next(), if !requests.is_empty() => {
                if let Ok((key, done)) = done {
                    w.on_done(key, done, &mut requests);
                }
            }
            _ = sleep_until(next_timer), if next_timer.is_some() => w.on_timer(&mut requests),
        }
    }
    requests.abort_all();
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

impl Worker {
    fn on_event(&mut self, event: watcher::Event<Pod>, requests: &mut JoinSet<(Key, Done)>) {
        match event {
            watcher::Event::Init => self.listing = Some(HashSet::new()),
            watcher::Event::InitApply(pod) => {
                let k = key(&pod);
                if self.observe(pod) {
                    if let Some(seen) = self.listing.as_mut() {
                        seen.insert(k);
                    }
                }
            }
            watcher::Event::InitDone => {
                let seen = self.listing.take().unwrap_or_default();
                let gone: Vec<Key> = self
                    .pods
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    self.forget(&k);
                }
                let all: Vec<Key> = self.pods.keys().cloned().collect();
                for k in all {
                    self.plan(k, requests);
                }
            }
            watcher::Event::Apply(pod) => {
                let k = key(&pod);
                if self.observe(pod) && self.listing.is_none() {
                    self.plan(k, requests);
                }
            }
            watcher::Event::Delete(pod) => self.forget(&key(&pod)),
        }
    }

    /// Caches `pod` if it is bound to one of our nodes and not older than the cached one;
    /// true if it was cached.
    fn observe(&mut self, pod: Pod) -> bool {
        let Some(node) = node_of(&pod).filter(|n| self.nodes.contains_key(*n)) else {
            return false;
        };
        let node = node.to_string();
        let k = key(&pod);
        if let Some(old) = self.pods.get(&k) {
            let same_pod = old.metadata.uid == pod.metadata.uid;
            if same_pod
                && revision(old)
                    .zip(revision(&pod))
                    .is_some_and(|(o, n)| n < o)
            {
                return false;
            }
            if !same_pod {
                let uid = old.metadata.uid.clone().unwrap_or_default();
                self.ips.release(&node, &uid);
            }
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        if pod_plan::is_terminal(&pod) {
            self.ips.release(&node, &uid);
        } else if let (Some(ip), false) = (ip.and_then(|ip| ip.parse().ok()), host_network) {
            self.ips.reserve(&node, &uid, ip);
        }
        self.pods.insert(k, pod);
        true
    }

    fn forget(&mut self, k: &Key) {
        if let Some(pod) = self.pods.remove(k) {
            if let Some(node) = node_of(&pod) {
                self.ips
                    .release(node, pod.metadata.uid.as_deref().unwrap_or_default());
            }
        }
        self.next_check.remove(k);
        self.dirty.remove(k);
    }

    /// Plans pod `k` and starts its request, unless one is in flight (then it is planned again
    /// when that one is done).
    fn plan(&mut self, k: Key, requests: &mut JoinSet<(Key, Done)>) {
        if self.in_flight.contains(&k) {
            self.dirty.insert(k);
            return;
        }
        let Some(pod) = self.pods.get(&k) else { return };
        let Some(node) = node_of(pod).and_then(|n| self.nodes.get(n)) else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let pod_ip = if pod_plan::needs_pod_ip(pod) {
            let cidr = self.pod_cidr(node);
            self.ips.allocate(&node.name, &uid, cidr)
        } else {
            None
        };
        let ctx = PodContext {
            host_ip: node.ip,
            pod_ip,
            now: Timestamp::now(),
            job_duration: self.shared.cfg.job_pod_duration,
        };
        let plan = pod_plan::plan(pod, &ctx);
        if let Some(after) = plan.requeue_after {
            self.schedule(k.clone(), after);
        }
        if let Some(action) = plan.action {
            self.in_flight.insert(k.clone());
            requests.spawn(execute(self.shared.clone(), k, action));
        }
    }

    /// The node's `spec.podCIDR` (first of `podCIDRs`) as stored, else its fallback range.
    fn pod_cidr(&self, node: &HollowNode) -> ipnet::IpNet {
        let stored: Option<Arc<Node>> = self.shared.nodes.get(&ObjectRef::new(&node.name));
        stored
            .as_ref()
            .and_then(|n| n.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok())
            .unwrap_or_else(|| pod_ips::fallback_cidr(node.index))
    }

    fn schedule(&mut self, k: Key, after: Duration) {
        let at = Instant::now() + after;
        match self.next_check.get(&k) {
            Some(existing) if *existing <= at && *existing > Instant::now() => {}
            _ => {
                self.next_check.insert(k.clone(), at);
                self.timers.push(Reverse((at, k)));
            }
        }
    }

    fn on_timer(&mut self, requests: &mut JoinSet<(Key, Done)>) {
        let now = Instant::now();
        while let Some(Reverse((at, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, k))) = self.timers.pop() else {
                break;
            };
            if self.next_check.get(&k) == Some(&at) {
                self.next_check.remove(&k);
                self.plan(k, requests);
            }
        }
    }

    fn on_done(&mut self, k: Key, done: Done, requests: &mut JoinSet<(Key, Done)>) {
        self.in_flight.remove(&k);
        match done {
            Done::Updated(pod) => {
                self.observe(*pod);
            }
            Done::Gone => {}
            Done::Failed => self.schedule(k.clone(), RETRY),
        }
        if self.dirty.remove(&k) {
            self.plan(k, requests);
        }
    }
}

/// Carries out one planned action for pod `k`.
async fn execute(shared: Shared, k: Key, action: PodAction) -> (Key, Done) {
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), &k.0);
    let _permit = shared.permits.acquire().await;
    let done = match action {
        PodAction::PatchStatus(patch) => {
            match api
                .patch_status(&k.1, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(pod) => Done::Updated(Box::new(pod)),
                Err(kube::Error::Api(s)) if s.code == 404 => Done::Gone,
                Err(e) => {
                    tracing::warn!(pod = %format!("{}/{}", k.0, k.1), error = %e, "updating pod status");
                    Done::Failed
                }
            }
        }
        PodAction::Delete { uid } => {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&k.1, &params).await {
                Ok(_) => Done::Gone,
                // Gone already, or another pod of that name by now.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Done::Gone,
                Err(e) => {
                    tracing::warn!(pod = %format!("{}/{}", k.0, k.1), error = %e, "deleting pod");
                    Done::Failed
                }
            }
        }
    };
    (k, done)
}
