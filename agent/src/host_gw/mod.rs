//! Multi-node pod networking, flannel's host-gw backend (`--flannel-backend=host-gw`): every
//! node's pods are on its own bridge in its `spec.podCIDR` ([`crate::cni`]); this module routes
//! every other node's pod CIDR through that node's InternalIP, so pods reach pods on other
//! nodes directly (the nodes must share a layer-2 segment, as host-gw requires; across routers
//! use [`crate::vxlan`]).
//!
//! [`plan`] decides the routes without I/O; [`routes`] is the routing table (iproute2, or a
//! recording fake); [`run`] watches the Nodes and syncs on change (at most once per second)
//! and every 30 s, so a route someone removed comes back ([`crate::pod_network::watch`]).
//!
//! Guarantees: IP forwarding is turned on at start; only routes with the agent's protocol
//! number are ever changed or removed; no default route is ever installed; a failed route is
//! logged and retried, it does not stop the others; a peer whose InternalIP is on no subnet
//! this node is directly connected to gets no route (it would black-hole, and the kernel
//! refuses it): that is logged and reported once as a Warning Event
//! ([`REFUSED_REASON`]) on this node's Node. The Node carries flannel's annotations with
//! `backend-type: host-gw` ([`crate::pod_network::annotations`]).

pub mod plan;
pub mod routes;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::IpNet;
use k3rs_apimachinery::events::{EventRecorder, EventType};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::routes::Routes;
use crate::pod_network::annotations;
use crate::pod_network::watch::NodeSync;
use crate::watches::Cluster;

/// How host-gw runs.
#[derive(Debug, Clone)]
pub struct HostGwConfig {
    /// This node (its own pod CIDR is on its bridge, not routed).
    pub node_name: String,
    /// `--cluster-cidr`: only pod CIDRs inside it are routed.
    pub cluster_cidr: Option<IpNet>,
    /// The node's IPv4 address, published as flannel's `public-ip`.
    pub node_ip: Option<Ipv4Addr>,
}

/// flannel's `backend-type` annotation of a host-gw node (`backend-data` is `null`).
pub const BACKEND_TYPE: &str = "host-gw";

/// The reason of the Event about a peer host-gw cannot route.
pub const REFUSED_REASON: &str = "HostGwRouteRefused";

/// The Events' `source.component`.
const COMPONENT: &str = "k3rs-host-gw";

/// What one sync did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// Every change succeeded.
    pub ok: bool,
    /// The peers' routes refused (their gateways are not on a connected subnet).
    pub refused: Vec<plan::Refused>,
}

/// Brings the table in line with `nodes` once.
pub async fn sync_once<R: Routes>(routes: &R, cfg: &HostGwConfig, nodes: &[Node]) -> Synced {
    let connected = match routes.connected().await {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(error = %e, "host-gw: listing the connected subnets failed");
            None
        }
    };
    let desired = plan::desired(
        &cfg.node_name,
        nodes,
        cfg.cluster_cidr.as_ref(),
        connected.as_deref(),
    );
    let refused = desired.refused;
    let current = match routes.list().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "host-gw: listing routes failed");
            return Synced { ok: false, refused };
        }
    };
    let plan = plan::plan(&desired.routes, &current);
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
    Synced { ok, refused }
}

/// Why `refused` gets no route, for the log and the Event.
pub fn refused_message(refused: &plan::Refused) -> String {
    let plan::Refused { node, route } = refused;
    format!(
        "host-gw cannot route node {node}'s pod CIDR {}: its address {} is on no subnet this \
         node is directly connected to (the nodes do not share a layer-2 network); use \
         --flannel-backend=vxlan",
        route.dst, route.via
    )
}

/// Reports each refused route once per run: a log line and a Warning Event on this node.
#[derive(Default)]
struct Reporter {
    reported: BTreeSet<plan::Refused>,
}

impl Reporter {
    async fn report(&mut self, refused: &[plan::Refused], me: &str, recorder: &EventRecorder) {
        for r in refused {
            if !self.reported.insert(r.clone()) {
                continue;
            }
            let message = refused_message(r);
            tracing::warn!(peer = %r.node, "{message}");
            let node = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(me.to_string()),
                uid: Some(me.to_string()),
                ..ObjectReference::default()
            };
            recorder.publish(&node, EventType::Warning, REFUSED_REASON, &message);
        }
    }
}

/// host-gw as a [`NodeSync`].
struct HostGw<R> {
    routes: R,
    cfg: HostGwConfig,
    reporter: Reporter,
}

impl<R: Routes> NodeSync for HostGw<R> {
    async fn sync(&mut self, client: &Client, nodes: Vec<Node>) -> bool {
        let synced = sync_once(&self.routes, &self.cfg, &nodes).await;
        let name = &self.cfg.node_name;
        let me = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
        let wanted = annotations::wanted(BACKEND_TYPE, "null".into(), self.cfg.node_ip);
        let published = annotations::publish(client, me, name, &wanted, "host-gw").await;
        let recorder = EventRecorder::new(client.clone(), COMPONENT, &self.cfg.node_name);
        self.reporter
            .report(&synced.refused, &self.cfg.node_name, &recorder)
            .await;
        synced.ok && published
    }
}

/// Runs until `stop`, with the latest [`Cluster`] of `clusters`.
pub async fn run<R: Routes>(
    clusters: watch::Receiver<Cluster>,
    routes: R,
    cfg: HostGwConfig,
    stop: CancellationToken,
) {
    if let Err(e) = routes.enable_forwarding().await {
        tracing::error!(error = %e, "host-gw: pods on other nodes will not be reachable");
    }
    let backend = HostGw {
        routes,
        cfg,
        reporter: Reporter::default(),
    };
    crate::pod_network::watch::run(clusters, backend, "host-gw", stop).await;
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
        *fake.connected.lock().unwrap() = vec!["10.99.0.0/24".parse().unwrap()];
        let cfg = HostGwConfig {
            node_name: "a".into(),
            cluster_cidr: Some("10.42.0.0/16".parse().unwrap()),
            node_ip: None,
        };
        let nodes = [
            node("a", "10.42.0.0/24", "10.99.0.1"),
            node("b", "10.42.1.0/24", "10.99.0.2"),
        ];
        assert!(sync_once(&fake, &cfg, &nodes).await.ok);
        assert_eq!(
            *fake.calls.lock().unwrap(),
            [
                Call::Replace(r("10.42.1.0/24", "10.99.0.2")),
                Call::Delete(r("10.42.9.0/24", "10.99.0.9")),
            ]
        );
        fake.calls.lock().unwrap().clear();
        assert!(sync_once(&fake, &cfg, &nodes).await.ok);
        assert!(fake.calls.lock().unwrap().is_empty(), "nothing to change");
    }

    #[tokio::test]
    async fn a_peer_behind_a_router_is_refused_and_its_old_route_removed() {
        let fake = FakeRoutes::default();
        fake.table
            .lock()
            .unwrap()
            .push(r("10.42.1.0/24", "10.98.0.2"));
        *fake.connected.lock().unwrap() = vec!["10.99.0.0/24".parse().unwrap()];
        let cfg = HostGwConfig {
            node_name: "a".into(),
            cluster_cidr: None,
            node_ip: None,
        };
        let nodes = [
            node("a", "10.42.0.0/24", "10.99.0.1"),
            node("b", "10.42.1.0/24", "10.98.0.2"),
        ];
        let synced = sync_once(&fake, &cfg, &nodes).await;
        let refused = plan::Refused {
            node: "b".into(),
            route: r("10.42.1.0/24", "10.98.0.2"),
        };
        assert_eq!(
            synced,
            Synced {
                ok: true,
                refused: vec![refused.clone()]
            }
        );
        assert_eq!(
            *fake.calls.lock().unwrap(),
            [Call::Delete(r("10.42.1.0/24", "10.98.0.2"))]
        );
        assert_eq!(
            refused_message(&refused),
            "host-gw cannot route node b's pod CIDR 10.42.1.0/24: its address 10.98.0.2 is on \
             no subnet this node is directly connected to (the nodes do not share a layer-2 \
             network); use --flannel-backend=vxlan"
        );
    }
}
