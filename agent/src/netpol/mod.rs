//! NetworkPolicy enforcement on the node (k3s runs kube-router's controller for this): the
//! `networking.k8s.io/v1` policies of the cluster become `filter` rules that drop what they do
//! not allow to and from this node's pods.
//!
//! [`plan`] decides the rules without I/O; [`sync`] applies them through the
//! [`Iptables`] boundary; [`run`] watches NetworkPolicies, Pods and Namespaces and syncs on
//! change (at most once per second) and every 30 s, and takes every rule away when stopped.
//!
//! Why plain iptables (no ipsets, no nftables): the whole rule set is one
//! `iptables-restore --noflush` transaction, so a policy change is atomic without keeping a
//! second kernel object set (ipsets) consistent with the rules that name it, and nodes need
//! nothing beyond the `iptables` the service proxy already uses. Peers are expanded to one
//! rule per pod address (an `ipBlock` with `except` to the CIDRs left), which is linear in
//! the number of peers: fine for the clusters k3rs targets, and the first thing to move to
//! ipsets if a node ever enforces thousands of peer pods.
//!
//! Guarantees:
//! - Nothing is written before policies, pods and namespaces have all been listed.
//! - Only the enforcer's chains (`KUBE-NWPLCY`, `KUBE-NP-*`) and its two jumps (from
//!   `FORWARD` and `INPUT`) are written; when [`run`] is stopped they are removed, so a
//!   stopped or disabled enforcer filters nothing.
//! - What a policy asks that the node cannot enforce (SCTP without kernel SCTP, an invalid
//!   `ipBlock`) stays denied and is reported once per policy version: a Warning Event on the
//!   policy and one on the Node, and a log line.
//!
//! Assumptions: IPv4 only; the node's credentials may list and watch pods, namespaces and
//! network policies (the server binds `k3rs:network-policy` to `system:nodes`).

pub(crate) mod cidr;
pub(crate) mod plan;
pub(crate) mod sync;

use std::time::Duration;

use futures::{stream, StreamExt};
use k3rs_apimachinery::events::{EventRecorder, EventType};
use k3rs_apimachinery::informers::Informer;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::proxy::iptables::Iptables;
use crate::proxy::sync::Pacer;
use crate::watches::{run_paced, snapshot, watch_all, Cluster, Keeper, OncePerVersion, Watches};

/// How the enforcer runs.
#[derive(Debug, Clone)]
pub struct NetworkPolicyConfig {
    /// This node: the pods isolated are the ones on it, and its Events name it as their source
    /// host.
    pub node_name: String,
    /// Whether the kernel has SCTP (see [`kernel_has_sctp`]).
    pub sctp: bool,
    /// The least time between two syncs of the rules (kube-proxy's
    /// `--iptables-min-sync-period`, 1 s).
    pub min_sync_period: Duration,
    /// The rules are synced at least this often, changes or not (kube-proxy's
    /// `--iptables-sync-period`, 30 s); a failed sync is retried after a sixth of it.
    pub sync_period: Duration,
}

impl NetworkPolicyConfig {
    /// kube-proxy's periods (1 s, 30 s) for `node_name`, SCTP as the running kernel has it.
    pub fn new(node_name: &str) -> NetworkPolicyConfig {
        NetworkPolicyConfig {
            node_name: node_name.to_string(),
            sctp: kernel_has_sctp(),
            min_sync_period: Duration::from_secs(1),
            sync_period: Duration::from_secs(30),
        }
    }
}

/// Whether the running kernel has SCTP: loaded (`/proc/net/protocols` lists it, or its
/// sysctls exist). A kernel where it is a module not yet loaded counts as without it.
pub fn kernel_has_sctp() -> bool {
    std::path::Path::new("/proc/sys/net/sctp").exists()
        || std::fs::read_to_string("/proc/net/protocols")
            .is_ok_and(|p| p.lines().any(|l| l.starts_with("SCTP")))
}

/// The three informers a sync reads.
struct Stores {
    policies: Informer<NetworkPolicy>,
    pods: Informer<Pod>,
    namespaces: Informer<Namespace>,
}

/// Runs the enforcer until `stop`, with the latest [`Cluster`] of `clusters` (a rotated
/// certificate restarts the watches); then removes its rules.
pub async fn run<I: Iptables>(
    clusters: watch::Receiver<Cluster>,
    ipt: I,
    cfg: NetworkPolicyConfig,
    stop: CancellationToken,
) {
    let pacer = Pacer::new(cfg.min_sync_period, cfg.sync_period, cfg.sync_period / 6);
    let mut enforcer = Enforcer {
        ipt,
        cfg,
        reporter: Reporter::default(),
        last_input: String::new(),
    };
    run_paced("network policy", clusters, pacer, &stop, &mut enforcer).await;
    match sync::remove(&enforcer.ipt).await {
        Ok(()) => tracing::info!("network policy: stopped, rules removed"),
        Err(e) => tracing::error!(error = %e, "network policy: removing the rules failed"),
    }
}

/// The enforcer as a [`Keeper`]: what persists across syncs.
struct Enforcer<I> {
    ipt: I,
    cfg: NetworkPolicyConfig,
    reporter: Reporter,
    last_input: String,
}

impl<I: Iptables> Keeper for Enforcer<I> {
    type State = (Stores, EventRecorder);

    fn watch(&mut self, cluster: &Cluster) -> Watches<Self::State> {
        // Every pod of the cluster is cached: without managedFields, as the controllers'.
        let (policies, pol_events) = watch_all::<NetworkPolicy>(&cluster.informers, 0);
        let (pods, pod_events) = watch_all::<Pod>(&cluster.informers, 1);
        let (namespaces, ns_events) = watch_all::<Namespace>(&cluster.informers, 2);
        let stores = Stores {
            policies,
            pods,
            namespaces,
        };
        let recorder = EventRecorder::new(cluster.client.clone(), COMPONENT, &self.cfg.node_name);
        Watches {
            state: (stores, recorder),
            events: stream::select_all([pol_events, pod_events, ns_events]).boxed(),
            count: 3,
        }
    }

    async fn sync(&mut self, (stores, recorder): &Self::State) -> bool {
        sync_once(
            &self.ipt,
            &self.cfg,
            stores,
            &mut self.last_input,
            &mut self.reporter,
            recorder,
        )
        .await
    }
}

/// The Events' `source.component`.
const COMPONENT: &str = "k3rs-network-policy";

async fn sync_once<I: Iptables>(
    ipt: &I,
    cfg: &NetworkPolicyConfig,
    stores: &Stores,
    last_input: &mut String,
    reporter: &mut Reporter,
    recorder: &EventRecorder,
) -> bool {
    let policies = snapshot(&stores.policies);
    let pods = snapshot(&stores.pods);
    let namespaces = snapshot(&stores.namespaces);
    let plan = plan::plan(&plan::Input {
        node_name: &cfg.node_name,
        policies: &policies,
        pods: &pods,
        namespaces: &namespaces,
        sctp: cfg.sctp,
    });
    reporter
        .report(&plan.warnings, &policies, &cfg.node_name, recorder)
        .await;
    match sync::apply(ipt, &plan).await {
        Ok(input) => {
            if input != *last_input {
                tracing::info!(
                    policies = policies.len(),
                    chains = plan.chains.len(),
                    lines = input.lines().count(),
                    "network policy: rules synced"
                );
                *last_input = input;
            }
            true
        }
        Err(e) => {
            tracing::error!(error = %e, "network policy: syncing rules failed");
            false
        }
    }
}

/// Reports each warning once per policy version.
#[derive(Default)]
struct Reporter {
    reported: OncePerVersion<plan::Warning>,
}

impl Reporter {
    async fn report(
        &mut self,
        warnings: &[plan::Warning],
        policies: &[NetworkPolicy],
        node: &str,
        recorder: &EventRecorder,
    ) {
        for w in warnings {
            let Some(policy) = policies.iter().find(|p| {
                p.metadata.namespace.as_deref() == Some(&w.namespace)
                    && p.metadata.name.as_deref() == Some(&w.policy)
            }) else {
                continue;
            };
            if !self.reported.first(&policy.metadata, w.clone()) {
                continue;
            }
            tracing::warn!(namespace = %w.namespace, policy = %w.policy, reason = w.reason, "network policy: {}", w.message);
            let regarding = ObjectReference {
                api_version: Some("networking.k8s.io/v1".into()),
                kind: Some("NetworkPolicy".into()),
                namespace: Some(w.namespace.clone()),
                name: Some(w.policy.clone()),
                uid: policy.metadata.uid.clone(),
                ..ObjectReference::default()
            };
            let message = format!("node {node}: {}", w.message);
            recorder.publish(&regarding, EventType::Warning, w.reason, &message);
            let node_ref = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.to_string()),
                uid: Some(node.to_string()),
                ..ObjectReference::default()
            };
            let message = format!("NetworkPolicy {}/{}: {}", w.namespace, w.policy, w.message);
            recorder.publish(&node_ref, EventType::Warning, w.reason, &message);
        }
    }
}

#[cfg(test)]
mod plan_tests;
