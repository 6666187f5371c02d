//! What `status.loadBalancer.ingress` an Ingress should have: for one served by the built-in
//! controller ([`ingress_class::is_ours`]), one `ip` entry per address load balancers get
//! ([`node_addresses`](crate::servicelb::plan::node_addresses): the Ready, non-excluded
//! nodes' ExternalIP, else InternalIP, sorted), as k3s's traefik publishes its servicelb
//! addresses. Ingresses of other classes are left alone.

use k3rs_apimachinery::ingress_class;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};

/// The ingress IPs `ing` has now.
fn current(ing: &Ingress) -> Vec<String> {
    ing.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// The addresses to write to `ing`, or `None` if its status is right already or it is not
/// ours.
pub fn desired(
    ing: &Ingress,
    classes: &[IngressClass],
    addresses: &[String],
) -> Option<Vec<String>> {
    if !ingress_class::is_ours(ing, classes) {
        return None;
    }
    (current(ing) != addresses).then(|| addresses.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(class: Option<&str>, ips: &[&str]) -> Ingress {
        let ingress: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": "i", "namespace": "ns"},
            "spec": {"ingressClassName": class},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
        .unwrap()
    }

    #[test]
    fn ours_get_the_node_addresses_once() {
        let classes = [ingress_class::ingress_class()];
        let addrs = vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()];
        assert_eq!(
            desired(&ingress(None, &[]), &classes, &addrs),
            Some(addrs.clone())
        );
        assert_eq!(
            desired(&ingress(Some("k3rs"), &["10.0.0.1"]), &classes, &addrs),
            Some(addrs.clone())
        );
        assert_eq!(
            desired(&ingress(None, &["10.0.0.1", "10.0.0.2"]), &classes, &addrs),
            None
        );
        assert_eq!(
            desired(&ingress(None, &["10.0.0.1"]), &classes, &[]),
            Some(vec![])
        );
    }

    #[test]
    fn other_classes_are_left_alone() {
        let classes = [ingress_class::ingress_class()];
        let addrs = vec!["10.0.0.1".to_string()];
        assert_eq!(
            desired(&ingress(Some("nginx"), &[]), &classes, &addrs),
            None
        );
        assert_eq!(desired(&ingress(None, &[]), &[], &addrs), None);
    }
}
