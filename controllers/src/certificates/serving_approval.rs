//! Auto-approval of kubelet serving certificates (k3s signs them for its agents without an
//! administrator; upstream leaves them to one): a request for `kubernetes.io/kubelet-serving`
//! is approved when the node asks for itself (requester = subject `system:node:<name>`, in
//! `system:nodes`) and every name and address it asks for is one its Node object has (its
//! name, `Hostname`/`InternalDNS`/`ExternalDNS` addresses, `InternalIP`/`ExternalIP`
//! addresses).
//!
//! # Guarantees
//! A node writes its own Node status, so what it lists there is not trusted alone: a request
//! stays pending (never approved here) when any of its names or addresses
//! - is another Node's name or one of another Node's addresses (one node cannot get a
//!   certificate for a peer it put in its own status);
//! - is a wildcard, `localhost` or one of the API server's in-cluster names (`kubernetes`,
//!   `kubernetes.default`, `kubernetes.default.svc[.<domain>]`: the kubelet-serving signer is
//!   the API server's CA), or an unspecified or multicast address.
//!
//! A loopback address reaches only the machine it is used on, so nodes may share one (test
//! clusters run every node at 127.0.0.1): it is never another node's.

use std::net::IpAddr;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;

use super::request::{self, Request, KUBELET_SERVING};

/// The Approved condition's message.
pub const MESSAGE: &str =
    "Auto approving kubelet serving certificate for the node's own names and addresses.";

/// Whether the request is a node's serving request for itself: the node's name, or `None`.
pub fn own_node(csr: &CertificateSigningRequest, req: &Request) -> Option<String> {
    let spec = &csr.spec;
    let usages = spec.usages.clone().unwrap_or_default();
    if spec.signer_name != KUBELET_SERVING || request::kubelet_serving(req, &usages).is_err() {
        return None;
    }
    let in_nodes = spec.groups.iter().flatten().any(|g| g == "system:nodes");
    if spec.username.as_deref() != Some(req.common_name.as_str()) || !in_nodes {
        return None;
    }
    req.common_name
        .strip_prefix("system:node:")
        .map(str::to_string)
}

/// Names only the API server answers to (any cluster domain).
fn reserved_name(d: &str) -> bool {
    let d = d.trim_end_matches('.').to_ascii_lowercase();
    d.contains('*')
        || d == "localhost"
        || d.ends_with(".localhost")
        || d == "kubernetes"
        || d == "kubernetes.default"
        || d == "kubernetes.default.svc"
        || d.starts_with("kubernetes.default.svc.")
}

fn reserved_ip(ip: IpAddr) -> bool {
    ip.is_unspecified() || ip.is_multicast()
}

/// A Node's DNS names (its name and DNS-type addresses) and IP addresses.
struct NodeNames {
    node: String,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
}

impl NodeNames {
    fn of(node: &Node) -> NodeNames {
        let name = node.metadata.name.clone().unwrap_or_default();
        let addresses = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        let mut dns = vec![name.clone()];
        let mut ips = Vec::new();
        for a in addresses {
            match a.type_.as_str() {
                "Hostname" | "InternalDNS" | "ExternalDNS" => dns.push(a.address),
                "InternalIP" | "ExternalIP" => ips.extend(a.address.parse::<IpAddr>().ok()),
                _ => {}
            }
        }
        NodeNames {
            node: name,
            dns,
            ips,
        }
    }

    fn has_dns(&self, d: &str) -> bool {
        self.dns.iter().any(|o| o.eq_ignore_ascii_case(d))
    }
}

/// The first SAN of a serving request that fails, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanRefusal {
    /// A reserved DNS name (`kubernetes`, `localhost`, …).
    #[error("DNS name {0:?} is reserved")]
    ReservedName(String),
    /// A DNS name that is not the node's.
    #[error("DNS name {0:?} is not the node's")]
    NotNodesName(String),
    /// A DNS name another Node holds.
    #[error("DNS name {name:?} is node {node:?}'s")]
    OtherNodesName {
        /// The name.
        name: String,
        /// The Node holding it.
        node: String,
    },
    /// An IP address that is not the node's (or not an address).
    #[error("IP address {0} is not the node's")]
    NotNodesAddress(String),
    /// A reserved IP address (unspecified, the API server's, …).
    #[error("IP address {0} is reserved")]
    ReservedAddress(IpAddr),
    /// An IP address another Node holds.
    #[error("IP address {ip} is node {node:?}'s")]
    OtherNodesAddress {
        /// The address.
        ip: IpAddr,
        /// The Node holding it.
        node: String,
    },
}

/// Whether every SAN of `req` is among `node`'s name and addresses, is not reserved and is
/// no other Node's in `nodes` (`Err`: the first SAN that fails, and why).
pub fn sans_match(req: &Request, node: &Node, nodes: &[Node]) -> Result<(), SanRefusal> {
    let own = NodeNames::of(node);
    let others: Vec<NodeNames> = nodes
        .iter()
        .map(NodeNames::of)
        .filter(|n| n.node != own.node)
        .collect();
    for d in &req.dns_names {
        if reserved_name(d) {
            return Err(SanRefusal::ReservedName(d.clone()));
        }
        if !own.has_dns(d) {
            return Err(SanRefusal::NotNodesName(d.clone()));
        }
        if let Some(other) = others.iter().find(|o| o.has_dns(d)) {
            return Err(SanRefusal::OtherNodesName {
                name: d.clone(),
                node: other.node.clone(),
            });
        }
    }
    for ip in &req.ip_addresses {
        let Some(want) = request_ip(ip) else {
            return Err(SanRefusal::NotNodesAddress(ip.clone()));
        };
        if reserved_ip(want) {
            return Err(SanRefusal::ReservedAddress(want));
        }
        if !own.ips.contains(&want) {
            return Err(SanRefusal::NotNodesAddress(want.to_string()));
        }
        let shared = |o: &&NodeNames| !want.is_loopback() && o.ips.contains(&want);
        if let Some(other) = others.iter().find(shared) {
            return Err(SanRefusal::OtherNodesAddress {
                ip: want,
                node: other.node.clone(),
            });
        }
    }
    Ok(())
}

/// An IP SAN of a parsed request (hex of its 4 or 16 bytes).
fn request_ip(hex_bytes: &str) -> Option<std::net::IpAddr> {
    let b = hex::decode(hex_bytes).ok()?;
    match b.len() {
        4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(std::net::IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "Hostname", "address": "n1.lan"}
            ]}
        }))
        .unwrap()
    }

    fn req(dns: &[&str], ips: &[&str]) -> Request {
        Request {
            common_name: "system:node:n1".into(),
            organizations: vec!["system:nodes".into()],
            dns_names: dns.iter().map(|s| s.to_string()).collect(),
            ip_addresses: ips
                .iter()
                .map(|s| match s.parse::<std::net::IpAddr>().unwrap() {
                    std::net::IpAddr::V4(v) => hex::encode(v.octets()),
                    std::net::IpAddr::V6(v) => hex::encode(v.octets()),
                })
                .collect(),
            ..Request::default()
        }
    }

    fn csr(username: &str, signer: &str) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "spec": {"request": "", "signerName": signer,
                "usages": ["digital signature", "key encipherment", "server auth"],
                "username": username, "groups": ["system:nodes", "system:authenticated"]}
        }))
        .unwrap()
    }

    fn alone(r: &Request) -> Result<(), String> {
        sans_match(r, &node(), &[node()]).map_err(|e| e.to_string())
    }

    #[test]
    fn only_the_nodes_own_names_and_addresses_match() {
        assert_eq!(alone(&req(&["n1", "N1.lan"], &["10.0.0.5"])), Ok(()));
        assert_eq!(
            alone(&req(&["n1"], &["fd00::1"])),
            Err("IP address fd00::1 is not the node's".into())
        );
        assert_eq!(
            alone(&req(&["n2"], &[])),
            Err("DNS name \"n2\" is not the node's".into())
        );
        assert_eq!(
            alone(&req(&["n1"], &["10.0.0.6"])),
            Err("IP address 10.0.0.6 is not the node's".into())
        );
    }

    #[test]
    fn what_a_node_lists_of_a_peer_or_the_api_server_is_not_its_own() {
        let peer: Node = serde_json::from_value(json!({
            "metadata": {"name": "n2"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.6"},
                {"type": "Hostname", "address": "n2.lan"}]}
        }))
        .unwrap();
        // n1 lists n2's name and address in its own status.
        let greedy: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "InternalIP", "address": "10.0.0.6"},
                {"type": "InternalIP", "address": "0.0.0.0"},
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": "n2"},
                {"type": "Hostname", "address": "*.lan"},
                {"type": "InternalDNS", "address": "kubernetes.default.svc.cluster.local"}]}
        }))
        .unwrap();
        let nodes = [greedy.clone(), peer];
        let check = |dns: &[&str], ips: &[&str]| sans_match(&req(dns, ips), &greedy, &nodes);
        assert_eq!(check(&["n1"], &["10.0.0.5"]), Ok(()));
        assert_eq!(
            check(&["n1"], &["10.0.0.6"]).map_err(|e| e.to_string()),
            Err("IP address 10.0.0.6 is node \"n2\"'s".into())
        );
        assert_eq!(
            check(&["n2"], &[]).map_err(|e| e.to_string()),
            Err("DNS name \"n2\" is node \"n2\"'s".into())
        );
        assert_eq!(
            check(&["*.lan"], &[]).map_err(|e| e.to_string()),
            Err("DNS name \"*.lan\" is reserved".into())
        );
        assert_eq!(
            check(&["kubernetes.default.svc.cluster.local"], &[]).map_err(|e| e.to_string()),
            Err("DNS name \"kubernetes.default.svc.cluster.local\" is reserved".into())
        );
        assert_eq!(
            check(&[], &["0.0.0.0"]).map_err(|e| e.to_string()),
            Err("IP address 0.0.0.0 is reserved".into())
        );
        // Loopback is every node's own.
        let mut peer_on_loopback = nodes[1].clone();
        peer_on_loopback
            .status
            .as_mut()
            .unwrap()
            .addresses
            .as_mut()
            .unwrap()[0]
            .address = "127.0.0.1".into();
        let nodes = [greedy.clone(), peer_on_loopback];
        assert_eq!(
            sans_match(&req(&["n1"], &["127.0.0.1"]), &greedy, &nodes),
            Ok(())
        );
    }

    #[test]
    fn only_a_node_asking_for_itself_qualifies() {
        let r = req(&["n1"], &["10.0.0.5"]);
        assert_eq!(
            own_node(&csr("system:node:n1", KUBELET_SERVING), &r),
            Some("n1".into())
        );
        assert_eq!(own_node(&csr("system:node:n2", KUBELET_SERVING), &r), None);
        assert_eq!(
            own_node(&csr("system:node:n1", request::KUBELET_CLIENT), &r),
            None
        );
    }
}
