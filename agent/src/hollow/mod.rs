//! Hollow nodes: simulated kubelets, like kubemark's hollow nodes or kwok, that register Nodes,
//! keep them alive through Leases and run the pods bound to them on paper.
//!
//! All nodes of one agent share one process and one `kube::Client`:
//! - one task per node ([`heartbeat`]): registers the Node, renews its Lease in
//!   `kube-node-lease` every `lease_renew_interval`, reports the node status every
//!   `status_report_frequency` or at once when the stored node is not `Ready`;
//! - one pod watch for all nodes ([`pod_worker`]): pods with a `spec.nodeName`, filtered to this
//!   agent's nodes in memory, each handed to the pure [`pod_plan`] and the resulting status
//!   patch or delete carried out, at most one request in flight per pod;
//! - one node watch (label `node.kubernetes.io/instance-type=hollow`) for the nodes' pod CIDRs
//!   and for noticing that a node was marked not Ready.
//!
//! Guarantees: at most `max_in_flight` requests are outstanding at any time; after `stop` is
//! cancelled no request is started, and [`run`] returns once every task has ended.

pub mod heartbeat;
pub mod node_spec;
pub mod pod_ips;
pub mod pod_plan;
pub mod pod_worker;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use node_spec::{HollowNode, NodeShape};

/// How an agent's hollow nodes behave.
#[derive(Debug, Clone)]
pub struct HollowConfig {
    /// How many nodes (named `<name_prefix><index>`, index from 0).
    pub count: usize,
    /// The nodes' names before their index.
    pub name_prefix: String,
    /// What each node reports as capacity and allocatable.
    pub shape: NodeShape,
    /// The Lease's `leaseDurationSeconds` (upstream kubelet: 40 s).
    pub lease_duration: Duration,
    /// How often the Lease is renewed (upstream: a quarter of the duration, 10 s).
    pub lease_renew_interval: Duration,
    /// How often the node status is reported when nothing changed (upstream: 5 min).
    pub status_report_frequency: Duration,
    /// How long the containers of a Job's pod run before they exit.
    pub job_pod_duration: Duration,
    /// Requests outstanding at most, over all nodes.
    pub max_in_flight: usize,
}

impl Default for HollowConfig {
    fn default() -> Self {
        HollowConfig {
            count: 1,
            name_prefix: "hollow-".into(),
            shape: NodeShape::default(),
            lease_duration: Duration::from_secs(40),
            lease_renew_interval: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            job_pod_duration: Duration::from_secs(2),
            max_in_flight: 64,
        }
    }
}

impl HollowConfig {
    /// The agent's nodes, in index order.
    pub fn nodes(&self) -> Vec<HollowNode> {
        (0..self.count)
            .map(|index| HollowNode {
                name: format!("{}{index}", self.name_prefix),
                index,
                ip: node_spec::node_ip(index),
            })
            .collect()
    }
}

/// What the tasks share.
#[derive(Clone)]
pub(crate) struct Shared {
    pub client: kube::Client,
    pub cfg: Arc<HollowConfig>,
    /// One permit per outstanding request.
    pub permits: Arc<Semaphore>,
    /// The hollow nodes as stored (pod CIDRs, conditions set by others).
    pub nodes: reflector::Store<Node>,
}

/// Runs the hollow nodes until `stop` is cancelled.
pub async fn run(client: kube::Client, cfg: HollowConfig, stop: CancellationToken) {
    let (store, writer) = reflector::store();
    let (label, value) = node_spec::HOLLOW_LABEL;
    let node_watch = watcher(
        Api::<Node>::all(client.clone()),
        watcher::Config::default().labels(&format!("{label}={value}")),
    )
    .default_backoff()
    .reflect(writer)
    .for_each(|_| futures::future::ready(()));
    let shared = Shared {
        client,
        permits: Arc::new(Semaphore::new(cfg.max_in_flight.max(1))),
        cfg: Arc::new(cfg),
        nodes: store,
    };
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn({
        let stop = stop.clone();
        async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = node_watch => {}
            }
        }
    });
    let nodes = shared.cfg.nodes();
    tasks.spawn(pod_worker::run(shared.clone(), nodes.clone(), stop.clone()));
    for node in nodes {
        tasks.spawn(heartbeat::run(shared.clone(), node, stop.clone()));
    }
    tracing::info!(
        nodes = shared.cfg.count,
        prefix = %shared.cfg.name_prefix,
        "hollow nodes started"
    );
    while tasks.join_next().await.is_some() {}
    tracing::info!("hollow nodes stopped");
}
