//! Multi-node pod networking, flannel's host-gw backend: every node's pods are on its own
//! bridge in its `spec.podCIDR` ([`crate::cni`]); this module routes every other node's pod
//! CIDR through that node's InternalIP, so pods reach pods on other nodes directly (the nodes
//! must share a layer-2 segment, as host-gw requires).
//!
//! [`plan`] decides the routes without I/O; [`routes`] is the routing table (iproute2, or a
//! recording fake); [`run`] watches the Nodes and syncs on change (at most once per second)
//! and every 30 s, so a route someone removed comes back.
//!
//! Guarantees: IP forwarding is turned on at start; only routes with the agent's protocol number are ever changed or removed; no
//! default route is ever installed; a failed route is logged and retried, it does not stop
//! the others.

pub mod no_snat;
pub mod plan;
pub mod routes;

use std::time::Duration;

use futures::StreamExt;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::routes::Routes;
use crate::proxy::sync::Pacer;

/// How host-gw runs.
#[derive(Debug, Clone)]
pub struct HostGwConfig {
    /// This node (its own pod CIDR is on its bridge, not routed).
    pub node_name: String,
    /// `--cluster-cidr`: only pod CIDRs inside it are routed.
    pub cluster_cidr: Option<IpNet>,
}

/// Brings the table in line with `nodes` once; `false` if any change failed.
pub async fn sync_once<R: Routes>(routes: &R, cfg: &HostGwConfig, nodes: &[Node]) -> bool {
    let desired = plan::desired(&cfg.node_name, nodes, cfg.cluster_cidr.as_ref());
    let current = match routes.list().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "host-gw: listing routes failed");
            return false;
        }
    };
    let plan = plan::plan(&desired, &current);
    let mut ok = true;
    for r in plan.replace {
        match routes.replace(r).await {
            Ok(()) => tracing::info!(dst = %r.dst, via = %r.via, "host-gw: route set"),
            Err(e) => {
                tracing::warn!(error = %e, "host-gw: setting a route failed");
                ok = false;
            }
        }
    }
    for r in plan.delete {
        match routes.delete(r).await {
            Ok(()) => tracing::info!(dst = %r.dst, via = %r.via, "host-gw: stale route removed"),
            Err(e) => {
                tracing::warn!(error = %e, "host-gw: removing a route failed");
                ok = false;
            }
        }
    }
    ok
}

fn snapshot(store: &Store<Node>) -> Vec<Node> {
    store.state().iter().map(|n| (**n).clone()).collect()
}

/// Runs until `stop`, with the latest client of `clients`.
pub async fn run<R: Routes>(
    mut clients: watch::Receiver<Client>,
    routes: R,
    cfg: HostGwConfig,
    stop: CancellationToken,
) {
    let second = Duration::from_secs(1);
    let mut pacer = Pacer::new(second, Duration::from_secs(30), Duration::from_secs(5));
    if let Err(e) = routes.enable_forwarding().await {
        tracing::error!(error = %e, "host-gw: pods on other nodes will not be reachable");
    }
    'clients: loop {
        let client = clients.borrow_and_update().clone();
        let (nodes, writer) = reflector::store::<Node>();
        let events = reflector::reflector(
            writer,
            watcher(Api::<Node>::all(client), Default::default()),
        )
        .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut listed = false;
        loop {
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
                    Some(Ok(watcher::Event::InitDone)) => { listed = true; pacer.changed(); }
                    Some(Ok(_)) => pacer.changed(),
                    Some(Err(e)) => tracing::warn!(error = %e, "host-gw: node watch failed"),
                    None => break 'clients,
                },
                _ = tokio::time::sleep_until(due), if listed => {
                    let ok = sync_once(&routes, &cfg, &snapshot(&nodes)).await;
                    pacer.synced(Instant::now(), ok);
                }
            }
        }
    }
    tracing::info!("host-gw stopped");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::routes::{Call, FakeRoutes};
    use super::*;
    use plan::Route;

    fn node(name: &str, cidr: &str, ip: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"podCIDR": cidr},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
        }))
        .unwrap()
    }

    fn r(dst: &str, via: &str) -> Route {
        Route {
            dst: dst.parse().unwrap(),
            via: via.parse().unwrap(),
        }
    }

    #[tokio::test]
    async fn a_sync_routes_new_nodes_and_drops_gone_ones() {
        let fake = FakeRoutes::default();
        fake.table
            .lock()
            .unwrap()
            .push(r("10.42.9.0/24", "10.99.0.9"));
        let cfg = HostGwConfig {
            node_name: "a".into(),
            cluster_cidr: Some("10.42.0.0/16".parse().unwrap()),
        };
        let nodes = [
            node("a", "10.42.0.0/24", "10.99.0.1"),
            node("b", "10.42.1.0/24", "10.99.0.2"),
        ];
        assert!(sync_once(&fake, &cfg, &nodes).await);
        assert_eq!(
            *fake.calls.lock().unwrap(),
            [
                Call::Replace(r("10.42.1.0/24", "10.99.0.2")),
                Call::Delete(r("10.42.9.0/24", "10.99.0.9")),
            ]
        );
        fake.calls.lock().unwrap().clear();
        assert!(sync_once(&fake, &cfg, &nodes).await);
        assert!(fake.calls.lock().unwrap().is_empty(), "nothing to change");
    }
}
