//! Which pod-network routes a node should have (flannel's host-gw backend), without I/O:
//! one route per other node's pod CIDR via that node's InternalIP of the same family, and
//! what to change from the routes the agent installed before.
//!
//! Guarantees: only routes to pod CIDRs inside the cluster CIDR (when known) are ever
//! desired, never one with a zero-length prefix (a default route); a route the agent did not
//! install (another protocol) is never in `current`, so never deleted; a route whose gateway
//! is on no subnet the node is directly connected to (when those are known) is refused, not
//! desired: host-gw cannot cross a router, and the kernel would refuse it anyway.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;

/// A route to `dst` through the gateway `via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    pub dst: IpNet,
    pub via: IpAddr,
}

/// A peer's pod CIDR host-gw cannot route: its node address is not on a connected subnet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Refused {
    /// The peer node.
    pub node: String,
    pub route: Route,
}

/// The routes to have, and the ones refused.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Desired {
    pub routes: BTreeSet<Route>,
    pub refused: Vec<Refused>,
}

/// What to change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Routes to add or replace (`ip route replace`).
    pub replace: Vec<Route>,
    /// Routes to remove.
    pub delete: Vec<Route>,
}

fn pod_cidrs(node: &Node) -> Vec<IpNet> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    let list: Vec<&String> = match &spec.pod_cidrs {
        Some(l) if !l.is_empty() => l.iter().collect(),
        _ => spec.pod_cidr.iter().collect(),
    };
    list.iter().filter_map(|c| c.parse().ok()).collect()
}

fn internal_ips(node: &Node) -> Vec<IpAddr> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect()
}

/// The routes node `me` should have to the other `nodes`' pod CIDRs; with `connected` (the
/// subnets the node reaches directly), the ones whose gateway is outside them are refused.
pub fn desired<'a>(
    me: &str,
    nodes: impl IntoIterator<Item = &'a Node>,
    cluster_cidr: Option<&IpNet>,
    connected: Option<&[IpNet]>,
) -> Desired {
    let mut out = Desired::default();
    for node in nodes {
        if node.metadata.name.as_deref() == Some(me) {
            continue;
        }
        let ips = internal_ips(node);
        for dst in pod_cidrs(node) {
            if dst.prefix_len() == 0 || cluster_cidr.is_some_and(|c| !c.contains(&dst)) {
                continue;
            }
            let via = ips
                .iter()
                .find(|ip| ip.is_ipv4() == matches!(dst, IpNet::V4(_)));
            let Some(via) = via else { continue };
            let route = Route { dst, via: *via };
            if connected.is_some_and(|c| !c.iter().any(|net| net.contains(via))) {
                out.refused.push(Refused {
                    node: node.metadata.name.clone().unwrap_or_default(),
                    route,
                });
            } else {
                out.routes.insert(route);
            }
        }
    }
    out
}

/// The changes that turn `current` (the routes the agent installed) into `desired`.
pub fn plan(desired: &BTreeSet<Route>, current: &[Route]) -> Plan {
    let current_by_dst: BTreeMap<IpNet, &Route> = current.iter().map(|r| (r.dst, r)).collect();
    let wanted_dsts: BTreeSet<IpNet> = desired.iter().map(|r| r.dst).collect();
    Plan {
        replace: desired
            .iter()
            .filter(|r| current_by_dst.get(&r.dst) != Some(r))
            .copied()
            .collect(),
        delete: current
            .iter()
            .filter(|r| !wanted_dsts.contains(&r.dst))
            .copied()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, cidrs: &[&str], ips: &[&str]) -> Node {
        let addresses: Vec<_> = ips
            .iter()
            .map(|ip| json!({"type": "InternalIP", "address": ip}))
            .chain([json!({"type": "Hostname", "address": name})])
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs},
            "status": {"addresses": addresses},
        }))
        .unwrap()
    }

    fn r(dst: &str, via: &str) -> Route {
        Route {
            dst: dst.parse().unwrap(),
            via: via.parse().unwrap(),
        }
    }

    #[test]
    fn one_route_per_other_node_and_family() {
        let nodes = [
            node("me", &["10.42.0.0/24"], &["10.99.0.1"]),
            node(
                "b",
                &["10.42.1.0/24", "fd42:0:0:1::/64"],
                &["10.99.0.2", "fd99::2"],
            ),
            node("c", &["10.42.2.0/24"], &["10.99.0.3"]),
            node("no-cidr", &[], &["10.99.0.4"]),
            node("no-ip", &["10.42.5.0/24"], &[]),
            node("v4-only", &["fd42:0:0:6::/64"], &["10.99.0.6"]),
        ];
        let want: BTreeSet<Route> = [
            r("10.42.1.0/24", "10.99.0.2"),
            r("fd42:0:0:1::/64", "fd99::2"),
            r("10.42.2.0/24", "10.99.0.3"),
        ]
        .into();
        assert_eq!(desired("me", &nodes, None, None).routes, want);
    }

    #[test]
    fn a_gateway_on_no_connected_subnet_is_refused() {
        let nodes = [
            node("near", &["10.42.1.0/24"], &["10.99.0.2"]),
            node("far", &["10.42.2.0/24"], &["10.98.0.2"]),
        ];
        let connected: Vec<IpNet> = vec!["10.99.0.0/24".parse().unwrap()];
        assert_eq!(
            desired("me", &nodes, None, Some(&connected)),
            Desired {
                routes: [r("10.42.1.0/24", "10.99.0.2")].into(),
                refused: vec![Refused {
                    node: "far".into(),
                    route: r("10.42.2.0/24", "10.98.0.2"),
                }],
            }
        );
        // Unknown connected subnets: nothing is refused.
        assert_eq!(desired("me", &nodes, None, None).routes.len(), 2);
    }

    #[test]
    fn only_pod_cidrs_inside_the_cluster_cidr_and_never_a_default_route() {
        let nodes = [
            node("b", &["10.42.1.0/24"], &["10.99.0.2"]),
            node("rogue", &["0.0.0.0/0"], &["10.99.0.7"]),
            node("outside", &["192.168.0.0/24"], &["10.99.0.8"]),
        ];
        let cluster: IpNet = "10.42.0.0/16".parse().unwrap();
        let want: BTreeSet<Route> = [r("10.42.1.0/24", "10.99.0.2")].into();
        assert_eq!(desired("me", &nodes, Some(&cluster), None).routes, want);
        let all = desired("me", &nodes, None, None).routes;
        assert!(!all.iter().any(|r| r.dst.prefix_len() == 0), "{all:?}");
    }

    #[test]
    fn the_plan_adds_moves_and_removes() {
        let want: BTreeSet<Route> = [
            r("10.42.1.0/24", "10.99.0.2"),
            r("10.42.2.0/24", "10.99.0.30"),
            r("10.42.3.0/24", "10.99.0.4"),
        ]
        .into();
        let current = [
            r("10.42.1.0/24", "10.99.0.2"),
            r("10.42.2.0/24", "10.99.0.3"),
            r("10.42.9.0/24", "10.99.0.9"),
        ];
        assert_eq!(
            plan(&want, &current),
            Plan {
                replace: vec![
                    r("10.42.2.0/24", "10.99.0.30"),
                    r("10.42.3.0/24", "10.99.0.4")
                ],
                delete: vec![r("10.42.9.0/24", "10.99.0.9")],
            }
        );
        let current: Vec<Route> = want.iter().copied().collect();
        assert_eq!(plan(&want, &current), Plan::default());
    }
}
