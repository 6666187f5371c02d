//! What `status.loadBalancer.ingress` a Service should have (k3s's servicelb, minimal): for a
//! Service of type LoadBalancer without a `loadBalancerClass`, one entry per Ready node that
//! is not excluded from external load balancers, with the node's ExternalIP if it has one,
//! else its InternalIP; sorted and without duplicates. A Service that is no longer of type
//! LoadBalancer loses the ingress it had (as upstream's service controller clears it).

use k8s_openapi::api::core::v1::{Node, Service};

/// Nodes with this label never serve load balancers (upstream's well-known label).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Whether the node's Ready condition is True.
pub fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn address(node: &Node) -> Option<String> {
    let addrs = node.status.as_ref()?.addresses.as_ref()?;
    let of = |t: &str| {
        addrs
            .iter()
            .find(|a| a.type_ == t)
            .map(|a| a.address.clone())
    };
    of("ExternalIP").or_else(|| of("InternalIP"))
}

/// The addresses load balancers get: one per Ready, non-excluded node, sorted.
pub fn node_addresses<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Vec<String> {
    let mut out: Vec<String> = nodes.into_iter().filter_map(lb_address).collect();
    out.sort();
    out.dedup();
    out
}

/// The address `node` lends to load balancers: a Ready node not excluded by label, at its
/// address; all this controller reads of a node.
pub fn lb_address(node: &Node) -> Option<String> {
    let excluded = (node.metadata.labels.as_ref()).is_some_and(|l| l.contains_key(EXCLUDE_LABEL));
    if excluded || !ready(node) {
        return None;
    }
    address(node)
}

/// The ingress IPs `svc` has now.
fn current(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// The ingress IPs to write to `svc`, or `None` if its status is right already (or it is not
/// ours to manage).
pub fn desired(svc: &Service, addresses: &[String]) -> Option<Vec<String>> {
    let spec = svc.spec.as_ref()?;
    let load_balancer = spec.type_.as_deref() == Some("LoadBalancer");
    if load_balancer && spec.load_balancer_class.is_some() {
        return None;
    }
    let want = if load_balancer {
        addresses.to_vec()
    } else {
        Vec::new()
    };
    (current(svc) != want).then_some(want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, ready: &str, addrs: serde_json::Value, excluded: bool) -> Node {
        let mut v = json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "addresses": addrs}
        });
        if excluded {
            v["metadata"]["labels"] = json!({EXCLUDE_LABEL: ""});
        }
        serde_json::from_value(v).unwrap()
    }

    fn svc(spec: serde_json::Value, ingress: &[&str]) -> Service {
        let ingress: Vec<_> = ingress.iter().map(|ip| json!({"ip": ip})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": spec,
            "status": {"loadBalancer": {"ingress": ingress}}
        }))
        .unwrap()
    }

    #[test]
    fn ready_nodes_give_their_external_or_internal_ip_sorted() {
        let nodes = [
            node(
                "b",
                "True",
                json!([{"type": "InternalIP", "address": "10.0.0.2"}]),
                false,
            ),
            node(
                "a",
                "True",
                json!([{"type": "InternalIP", "address": "10.0.0.9"},
                       {"type": "ExternalIP", "address": "192.0.2.1"}]),
                false,
            ),
            node(
                "c",
                "False",
                json!([{"type": "InternalIP", "address": "10.0.0.3"}]),
                false,
            ),
            node(
                "d",
                "True",
                json!([{"type": "InternalIP", "address": "10.0.0.4"}]),
                true,
            ),
            node(
                "e",
                "True",
                json!([{"type": "Hostname", "address": "e"}]),
                false,
            ),
        ];
        assert_eq!(node_addresses(&nodes), vec!["10.0.0.2", "192.0.2.1"]);
    }

    #[test]
    fn load_balancers_get_the_addresses_once() {
        let addrs = vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()];
        let lb = json!({"type": "LoadBalancer"});
        assert_eq!(desired(&svc(lb.clone(), &[]), &addrs), Some(addrs.clone()));
        assert_eq!(
            desired(&svc(lb.clone(), &["10.0.0.1"]), &addrs),
            Some(addrs.clone())
        );
        assert_eq!(
            desired(&svc(lb.clone(), &["10.0.0.1", "10.0.0.2"]), &addrs),
            None
        );
        assert_eq!(desired(&svc(lb, &["10.0.0.1"]), &[]), Some(vec![]));
    }

    #[test]
    fn other_types_lose_ingress_and_other_classes_are_left_alone() {
        let addrs = vec!["10.0.0.1".to_string()];
        let cluster_ip = json!({"type": "ClusterIP"});
        assert_eq!(
            desired(&svc(cluster_ip.clone(), &["10.0.0.1"]), &addrs),
            Some(vec![])
        );
        assert_eq!(desired(&svc(cluster_ip, &[]), &addrs), None);
        let other = json!({"type": "LoadBalancer", "loadBalancerClass": "example.com/lb"});
        assert_eq!(desired(&svc(other, &[]), &addrs), None);
    }
}
