//! Which endpoints `kube-system/kube-dns` should have, without I/O: every Ready node labelled
//! [`CLUSTER_DNS_PORT_LABEL`] with a valid port, at its first InternalIP (IPv4 first), grouped
//! by port (an EndpointSlice has one port list), sorted by node name.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k3rs_apimachinery::labels::CLUSTER_DNS_PORT_LABEL;
use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};

use crate::servicelb::plan::ready;

/// The Service the endpoints belong to.
pub const NAMESPACE: &str = "kube-system";
pub const SERVICE: &str = "kube-dns";
/// `endpointslice.kubernetes.io/managed-by` of the slices this controller writes.
pub const MANAGED_BY: &str = "cluster-dns.k3rs.io";

/// One node answering DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsNode {
    pub name: String,
    pub ip: IpAddr,
}

fn internal_ip(node: &Node) -> Option<IpAddr> {
    let mut ips: Vec<IpAddr> = node
        .status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect();
    ips.sort_by_key(|ip| !ip.is_ipv4());
    ips.first().copied()
}

/// The port and address on which `node` answers DNS, if it does (Ready, labelled with a
/// valid port, with an InternalIP): all this controller reads of a node.
pub fn answering(node: &Node) -> Option<(u16, DnsNode)> {
    let port = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_DNS_PORT_LABEL))
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)?;
    let ip = internal_ip(node)?;
    ready(node).then(|| {
        let name = node.metadata.name.clone().unwrap_or_default();
        (port, DnsNode { name, ip })
    })
}

/// The answering nodes by port.
pub fn desired<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> BTreeMap<u16, Vec<DnsNode>> {
    let mut out: BTreeMap<u16, Vec<DnsNode>> = BTreeMap::new();
    for (port, node) in nodes.into_iter().filter_map(answering) {
        out.entry(port).or_default().push(node);
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

fn ports(port: u16) -> Value {
    json!([
        {"name": "dns", "port": port, "protocol": "UDP"},
        {"name": "dns-tcp", "port": port, "protocol": "TCP"},
    ])
}

/// The EndpointSlice name for `port`.
pub fn slice_name(port: u16) -> String {
    format!("{SERVICE}-{port}")
}

/// The EndpointSlice of the nodes answering on `port` (IPv4 ones only: one address type).
pub fn slice(port: u16, nodes: &[DnsNode], owner: &Value) -> Value {
    let endpoints: Vec<Value> = nodes
        .iter()
        .filter(|n| n.ip.is_ipv4())
        .map(|n| {
            json!({"addresses": [n.ip.to_string()], "nodeName": n.name,
                "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name(port), "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": SERVICE,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [owner]},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports(port),
    })
}

/// The `kube-dns` Endpoints: one subset per port.
pub fn endpoints(by_port: &BTreeMap<u16, Vec<DnsNode>>) -> Value {
    let subsets: Vec<Value> = by_port
        .iter()
        .map(|(port, nodes)| {
            let addresses: Vec<Value> = nodes
                .iter()
                .map(|n| json!({"ip": n.ip.to_string(), "nodeName": n.name}))
                .collect();
            json!({"addresses": addresses, "ports": ports(*port)})
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE,
            "labels": {"k8s-app": "kube-dns"}},
        "subsets": subsets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ip: &str, ready: &str, port: Option<&str>) -> Node {
        let labels = port.map(|p| json!({CLUSTER_DNS_PORT_LABEL: p}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": ready}],
                "addresses": [{"type": "Hostname", "address": name},
                              {"type": "InternalIP", "address": ip}]},
        }))
        .unwrap()
    }

    fn dn(name: &str, ip: &str) -> DnsNode {
        DnsNode {
            name: name.into(),
            ip: ip.parse().unwrap(),
        }
    }

    #[test]
    fn ready_labelled_nodes_by_port() {
        let nodes = [
            node("b", "10.0.0.2", "True", Some("53")),
            node("a", "10.0.0.1", "True", Some("53")),
            node("c", "10.0.0.3", "False", Some("53")),
            node("hollow", "10.0.0.4", "True", None),
            node("alt", "10.0.0.5", "True", Some("5353")),
            node("bad", "10.0.0.6", "True", Some("dns")),
            node("zero", "10.0.0.7", "True", Some("0")),
        ];
        let want: BTreeMap<u16, Vec<DnsNode>> = [
            (53, vec![dn("a", "10.0.0.1"), dn("b", "10.0.0.2")]),
            (5353, vec![dn("alt", "10.0.0.5")]),
        ]
        .into();
        assert_eq!(desired(&nodes), want);
    }

    #[test]
    fn the_slice_and_endpoints_carry_both_protocols() {
        let owner = json!({"apiVersion": "v1", "kind": "Service", "name": "kube-dns", "uid": "u"});
        let s = slice(53, &[dn("a", "10.0.0.1")], &owner);
        assert_eq!(s["metadata"]["name"], "kube-dns-53");
        assert_eq!(
            s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            MANAGED_BY
        );
        assert_eq!(
            s["endpoints"],
            json!([{"addresses": ["10.0.0.1"], "nodeName": "a",
                "conditions": {"ready": true, "serving": true, "terminating": false}}])
        );
        assert_eq!(
            s["ports"],
            json!([{"name": "dns", "port": 53, "protocol": "UDP"},
                   {"name": "dns-tcp", "port": 53, "protocol": "TCP"}])
        );
        let e = endpoints(&[(53, vec![dn("a", "10.0.0.1")])].into());
        assert_eq!(
            e["subsets"],
            json!([{"addresses": [{"ip": "10.0.0.1", "nodeName": "a"}], "ports": s["ports"]}])
        );
        assert_eq!(endpoints(&BTreeMap::new())["subsets"], json!([]));
    }
}
