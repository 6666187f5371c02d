//! Chain names, as upstream kube-proxy spells them, so rules read the same as on any
//! Kubernetes node: a prefix and the first 16 characters of the base32 (RFC 4648, padded
//! alphabet) of the SHA-256 of the service port name and protocol (plus `IP:port` for an
//! endpoint). Names stay under iptables' 28-character limit.

use sha2::{Digest, Sha256};

use super::service_port::ServicePort;

/// Every top-level chain the proxy owns.
pub const SERVICES: &str = "KUBE-SERVICES";
pub const EXTERNAL_SERVICES: &str = "KUBE-EXTERNAL-SERVICES";
pub const NODE_PORTS: &str = "KUBE-NODEPORTS";
pub const POSTROUTING: &str = "KUBE-POSTROUTING";
pub const MARK_MASQ: &str = "KUBE-MARK-MASQ";
pub const FORWARD: &str = "KUBE-FORWARD";

/// Prefixes of the per-service and per-endpoint chains in `nat`; a chain with one of them that
/// the current rules do not use is stale and removed.
pub const PER_SERVICE_PREFIXES: &[&str] = &[
    "KUBE-SVC-",
    "KUBE-SVL-",
    "KUBE-EXT-",
    "KUBE-FW-",
    "KUBE-XLB-",
    "KUBE-SEP-",
];

/// The first 16 characters of the base32 of the SHA-256 of `input` (also the network
/// policy chains' suffix).
pub(crate) fn hash16(input: &str) -> String {
    let digest = Sha256::digest(input.as_bytes());
    let mut encoded = data_encoding::BASE32.encode(&digest);
    encoded.truncate(16);
    encoded
}

fn port_hash(port: &ServicePort) -> String {
    hash16(&format!("{}{}", port.name(), port.protocol.lower()))
}

/// `KUBE-SVC-…`: the port's endpoints for policy Cluster.
pub fn cluster_policy_chain(port: &ServicePort) -> String {
    format!("KUBE-SVC-{}", port_hash(port))
}

/// `KUBE-SVL-…`: the port's endpoints for policy Local.
pub fn local_policy_chain(port: &ServicePort) -> String {
    format!("KUBE-SVL-{}", port_hash(port))
}

/// `KUBE-EXT-…`: traffic to the port's external destinations (NodePort, externalIPs,
/// load-balancer IPs).
pub fn external_chain(port: &ServicePort) -> String {
    format!("KUBE-EXT-{}", port_hash(port))
}

/// `KUBE-SEP-…`: DNAT to one endpoint (`IP:port`) of the port.
pub fn endpoint_chain(port: &ServicePort, endpoint_addr: &str) -> String {
    format!(
        "KUBE-SEP-{}",
        hash16(&format!(
            "{}{}{}",
            port.name(),
            port.protocol.lower(),
            endpoint_addr
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::service_port::Protocol;

    fn port(ns: &str, svc: &str, name: &str, protocol: Protocol) -> ServicePort {
        ServicePort::for_test(ns, svc, name, protocol)
    }

    /// The names upstream kube-proxy's own tests expect for `ns1/svc1:p80` over TCP.
    #[test]
    fn names_match_upstream() {
        let p = port("ns1", "svc1", "p80", Protocol::Tcp);
        assert_eq!(cluster_policy_chain(&p), "KUBE-SVC-XPGD46QRK7WJZT7O");
        assert_eq!(local_policy_chain(&p), "KUBE-SVL-XPGD46QRK7WJZT7O");
        assert_eq!(external_chain(&p), "KUBE-EXT-XPGD46QRK7WJZT7O");
        assert_eq!(
            endpoint_chain(&p, "10.180.0.1:80"),
            "KUBE-SEP-SXIVWICOYRO3J4NJ"
        );
    }

    #[test]
    fn protocol_and_port_name_change_the_hash() {
        let tcp = cluster_policy_chain(&port("ns1", "svc1", "p80", Protocol::Tcp));
        let udp = cluster_policy_chain(&port("ns1", "svc1", "p80", Protocol::Udp));
        let unnamed = cluster_policy_chain(&port("ns1", "svc1", "", Protocol::Tcp));
        assert_ne!(tcp, udp);
        assert_ne!(tcp, unnamed);
        assert!(tcp.len() <= 28 && udp.len() <= 28);
    }
}
