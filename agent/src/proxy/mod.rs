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
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use rules::NodeContext;

use self::iptables::Iptables;
use self::sync::Pacer;

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
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

/// Which watch an event came from, and whether it completed a (re)list (also the cluster
/// DNS's, which watches the same two kinds).
pub(crate) enum Seen {
    Services { listed: bool },
    Slices { listed: bool },
    Error(String),
}

pub(crate) fn seen<K>(
    ev: Result<watcher::Event<K>, watcher::Error>,
    listed: fn(bool) -> Seen,
) -> Seen {
    match ev {
        Ok(watcher::Event::InitDone) => listed(true),
        Ok(_) => listed(false),
        Err(e) => Seen::Error(e.to_string()),
    }
}

/// Runs the proxy until `stop`, with the latest client of `clients` (a rotated certificate
/// restarts the watches).
pub async fn run<I: Iptables>(
    mut clients: watch::Receiver<Client>,
    ipt: I,
    cfg: ProxyConfig,
    stop: CancellationToken,
) {
    let mut pacer = Pacer::new(cfg.min_sync_period, cfg.sync_period, cfg.sync_period / 6);
    let mut last_input = String::new();
    'clients: loop {
        let client = clients.borrow_and_update().clone();
        let (services, svc_writer) = reflector::store::<Service>();
        let (slices, eps_writer) = reflector::store::<EndpointSlice>();
        let svc_events = reflector::reflector(
            svc_writer,
            watcher(
                Api::<Service>::all(client.clone()),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .map(|e| seen(e, |listed| Seen::Services { listed }));
        let eps_events = reflector::reflector(
            eps_writer,
            watcher(
                Api::<EndpointSlice>::all(client),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .map(|e| seen(e, |listed| Seen::Slices { listed }));
        let mut events = std::pin::pin!(stream::select(svc_events, eps_events));
        let (mut svc_listed, mut eps_listed) = (false, false);
        loop {
            let listed = svc_listed && eps_listed;
            let due = pacer.due(Instant::now());
            tokio::select! {
                _ = stop.cancelled() => break 'clients,
                changed = clients.changed() => {
                    if changed.is_err() {
                        break 'clients;
                    }
                    continue 'clients;
                }
                ev = events.next() => match ev {
                    Some(Seen::Services { listed }) => { svc_listed |= listed; pacer.changed(); }
                    Some(Seen::Slices { listed }) => { eps_listed |= listed; pacer.changed(); }
                    Some(Seen::Error(e)) => tracing::warn!(error = %e, "proxy: watch failed"),
                    None => break 'clients,
                },
                _ = tokio::time::sleep_until(due), if listed => {
                    let ok = sync_once(&ipt, &cfg.node, &services, &slices, &mut last_input).await;
                    pacer.synced(Instant::now(), ok);
                }
            }
        }
    }
    tracing::info!("proxy stopped");
}

async fn sync_once<I: Iptables>(
    ipt: &I,
    node: &NodeContext,
    services: &Store<Service>,
    slices: &Store<EndpointSlice>,
    last_input: &mut String,
) -> bool {
    let services: Vec<Service> = services.state().iter().map(|s| (**s).clone()).collect();
    let slices: Vec<EndpointSlice> = slices.state().iter().map(|s| (**s).clone()).collect();
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
