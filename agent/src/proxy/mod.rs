//! The service proxy in iptables mode (kube-proxy's default): Services and EndpointSlices
//! become DNAT rules in the node's `nat` table, so a cluster IP, NodePort, external IP or
//! load-balancer IP reaches one of the Service's ready endpoints.
//!
//! [`rules`] decides the rule set without I/O; [`sync`] applies it through the [`iptables`]
//! boundary; [`run`] watches the API and syncs on change (at most once per second) and every
//! 30 s.
//!
//! Guarantees:
//! - Only the proxy's own `KUBE-*` chains are written (whole, through `iptables-restore
//!   --noflush`); other rules of the node are never touched. The jumps into them from the
//!   built-in chains are inserted once and kept.
//! - Nothing is written before both Services and EndpointSlices have been listed, so a start
//!   never blackholes Services that exist.
//! - The proxy does not depend on the container runtime: it runs on a node whose runtime is
//!   down.
//!
//! Assumptions: IPv4 only; no topology hints, no `loadBalancerSourceRanges`, no
//! health-check NodePorts; localhost NodePorts are not served (`route_localnet` is left
//! alone, unlike upstream's default); the node's credentials may list and watch Services and
//! EndpointSlices (the server binds `system:node-proxier` to `system:nodes`).

pub mod args;
pub mod endpoints;
pub mod iptables;
pub mod names;
pub mod rules;
pub mod service_port;
pub mod sync;

use std::time::Duration;

use futures::{stream, StreamExt};
use k3rs_apimachinery::informers::Informer;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use rules::NodeContext;

use self::iptables::Iptables;
use self::sync::Pacer;
use crate::watches::{run_paced, snapshot, watch_all, Cluster, Keeper, Watches};

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The node the proxy runs on and its cluster CIDR.
    pub node: NodeContext,
    /// Upstream's `--iptables-min-sync-period` (1 s).
    pub min_sync_period: Duration,
    /// Upstream's `--iptables-sync-period` (30 s).
    pub sync_period: Duration,
}

impl ProxyConfig {
    /// Upstream's periods for `node`.
    pub fn new(node: NodeContext) -> ProxyConfig {
        ProxyConfig {
            node,
            min_sync_period: Duration::from_secs(1),
            sync_period: Duration::from_secs(30),
        }
    }
}

/// Runs the proxy until `stop`, with the latest [`Cluster`] of `clusters` (a rotated
/// certificate restarts the watches).
pub async fn run<I: Iptables>(
    clusters: watch::Receiver<Cluster>,
    ipt: I,
    cfg: ProxyConfig,
    stop: CancellationToken,
) {
    let pacer = Pacer::new(cfg.min_sync_period, cfg.sync_period, cfg.sync_period / 6);
    let mut proxy = Proxy {
        ipt,
        node: cfg.node,
        last_input: String::new(),
    };
    run_paced("proxy", clusters, pacer, &stop, &mut proxy).await;
    tracing::info!("proxy stopped");
}

/// The proxy as a [`Keeper`]: what persists across syncs.
struct Proxy<I> {
    ipt: I,
    node: NodeContext,
    last_input: String,
}

impl<I: Iptables> Keeper for Proxy<I> {
    type State = (Informer<Service>, Informer<EndpointSlice>);

    fn watch(&mut self, cluster: &Cluster) -> Watches<Self::State> {
        let (services, svc_events) = watch_all::<Service>(&cluster.informers, 0);
        let (slices, eps_events) = watch_all::<EndpointSlice>(&cluster.informers, 1);
        Watches {
            state: (services, slices),
            events: stream::select(svc_events, eps_events).boxed(),
            count: 2,
        }
    }

    async fn sync(&mut self, (services, slices): &Self::State) -> bool {
        sync_once(
            &self.ipt,
            &self.node,
            services,
            slices,
            &mut self.last_input,
        )
        .await
    }
}

async fn sync_once<I: Iptables>(
    ipt: &I,
    node: &NodeContext,
    services: &Informer<Service>,
    slices: &Informer<EndpointSlice>,
    last_input: &mut String,
) -> bool {
    let services = snapshot(services);
    let slices = snapshot(slices);
    let started = std::time::Instant::now();
    match sync::sync(ipt, node, &services, &slices).await {
        Ok(input) => {
            if input != *last_input {
                tracing::info!(
                    services = services.len(),
                    endpoint_slices = slices.len(),
                    lines = input.lines().count(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "proxy: iptables rules synced"
                );
                *last_input = input;
            }
            true
        }
        Err(e) => {
            tracing::error!(error = %e, "proxy: syncing iptables rules failed");
            false
        }
    }
}
