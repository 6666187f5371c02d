//! Who may ask: the embedded DNS listens on the node's addresses, which may face networks far
//! beyond the cluster, so it is not an open resolver. It answers only pods (the cluster CIDR),
//! the node itself (loopback and its own addresses) and the other nodes that serve the
//! `kube-dns` Service (hostNetwork pods and masqueraded traffic arrive from node addresses);
//! everyone else gets REFUSED, which is never larger than the question. Each source also has a
//! bound on the queries in flight, so that one busy or hostile client cannot use up the
//! upstream relay for all.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ipnet::IpNet;

use super::index::Index;

/// Queries one source may have in flight at once (more are dropped, as a busy server would).
pub const PER_SOURCE: usize = 64;

/// Queries in flight from all sources at once.
pub const TOTAL: usize = 4096;

/// The networks and addresses that may always ask.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// The pod networks (`--cluster-cidr`).
    pub nets: Vec<IpNet>,
    /// The node's own addresses.
    pub local: Vec<IpAddr>,
}

/// Whether `source` may ask: a pod, the node itself, or a node serving cluster DNS.
pub fn may_ask(source: IpAddr, allowed: &Allowed, index: Option<&Index>) -> bool {
    let source = canonical(source);
    source.is_loopback()
        || allowed.local.iter().any(|a| canonical(*a) == source)
        || allowed.nets.iter().any(|n| n.contains(&source))
        || index.is_some_and(|i| i.is_dns_node(source))
}

/// An IPv4 address that arrived on a dual-stack socket as `::ffff:a.b.c.d` is `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Counts the queries in flight per source.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One query in flight; dropping it frees its place.
#[derive(Debug)]
pub struct Slot {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    source: IpAddr,
}

impl InFlight {
    /// A place for one more query from `source`, unless it (or everyone together) has too many.
    pub fn admit(&self, source: IpAddr) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = counts.values().sum();
        let mine = counts.entry(source).or_default();
        if *mine >= PER_SOURCE || total >= TOTAL {
            return None;
        }
        *mine += 1;
        Some(Slot {
            counts: self.counts.clone(),
            source,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn pods_the_node_and_dns_nodes_may_ask_others_may_not() {
        let allowed = Allowed {
            nets: vec!["10.42.0.0/16".parse().unwrap()],
            local: vec![ip("192.168.1.5")],
        };
        let slice: k8s_openapi::api::discovery::v1::EndpointSlice =
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": "kube-system", "name": "kube-dns-x",
                             "labels": {"kubernetes.io/service-name": "kube-dns"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["192.168.1.6"]}],
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}))
            .unwrap();
        let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "kube-system", "name": "kube-dns"},
            "spec": {"clusterIP": "10.43.0.10", "ports": [{"name": "dns", "port": 53,
                                                          "protocol": "UDP"}]}}))
        .unwrap();
        let index = super::super::index::build(&[svc], &[slice], 1);
        for (source, may) in [
            ("10.42.3.4", true),
            ("127.0.0.1", true),
            ("::1", true),
            ("192.168.1.5", true),
            ("::ffff:10.42.0.9", true),
            ("192.168.1.6", true),
            ("192.168.1.7", false),
            ("8.8.8.8", false),
            ("10.43.0.1", false),
        ] {
            assert_eq!(may_ask(ip(source), &allowed, Some(&index)), may, "{source}");
        }
        assert!(!may_ask(ip("192.168.1.6"), &allowed, None));
    }

    #[test]
    fn each_source_has_a_bounded_number_of_queries_in_flight() {
        let f = InFlight::default();
        let slots: Vec<_> = (0..PER_SOURCE)
            .map(|_| f.admit(ip("10.42.0.1")).unwrap())
            .collect();
        assert!(f.admit(ip("10.42.0.1")).is_none());
        let other = f
            .admit(ip("10.42.0.2"))
            .expect("another source still gets in");
        drop(slots);
        assert!(f.admit(ip("10.42.0.1")).is_some());
        drop(other);
        assert!(f.counts.lock().unwrap().is_empty());
    }
}
