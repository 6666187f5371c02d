//! Auto-approval of kubelet serving certificates (k3s signs them for its agents without an
//! administrator; upstream leaves them to one): a request for `kubernetes.io/kubelet-serving`
//! is approved when the node asks for itself (requester = subject `system:node:<name>`, in
//! `system:nodes`) and every name and address it asks for is one its Node object has (its
//! name, `Hostname`/`InternalDNS`/`ExternalDNS` addresses, `InternalIP`/`ExternalIP`
//! addresses).

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

/// Whether every SAN of `req` is among `node`'s name and addresses (`Err`: the first that
/// is not).
pub fn sans_match(req: &Request, node: &Node) -> Result<(), String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let addresses = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let dns_ok = |d: &str| {
        d == name
            || addresses.iter().any(|a| {
                matches!(a.type_.as_str(), "Hostname" | "InternalDNS" | "ExternalDNS")
                    && a.address == d
            })
    };
    let ip_ok = |ip: &str| {
        let Some(want) = request_ip(ip) else {
            return false;
        };
        addresses.iter().any(|a| {
            matches!(a.type_.as_str(), "InternalIP" | "ExternalIP")
                && a.address.parse::<std::net::IpAddr>().ok() == Some(want)
        })
    };
    if let Some(d) = req.dns_names.iter().find(|d| !dns_ok(d)) {
        return Err(format!("DNS name {d:?} is not the node's"));
    }
    if let Some(ip) = req.ip_addresses.iter().find(|ip| !ip_ok(ip)) {
        let shown = request_ip(ip).map_or_else(|| ip.clone(), |i| i.to_string());
        return Err(format!("IP address {shown} is not the node's"));
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

    #[test]
    fn only_the_nodes_own_names_and_addresses_match() {
        assert_eq!(
            sans_match(&req(&["n1", "n1.lan"], &["10.0.0.5"]), &node()),
            Ok(())
        );
        assert_eq!(
            sans_match(&req(&["n1"], &["fd00::1"]), &node()),
            Err("IP address fd00::1 is not the node's".into())
        );
        assert_eq!(
            sans_match(&req(&["n2"], &[]), &node()),
            Err("DNS name \"n2\" is not the node's".into())
        );
        assert_eq!(
            sans_match(&req(&["n1"], &["10.0.0.6"]), &node()),
            Err("IP address 10.0.0.6 is not the node's".into())
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
