//! The endpoints of a Service port, read from its EndpointSlices (discovery.k8s.io/v1), and
//! which of them each kind of traffic may use (upstream's `CategorizeEndpoints`).
//!
//! Guarantees:
//! - A slice belongs to the Service named by its `kubernetes.io/service-name` label in the same
//!   namespace; only `IPv4` slices count; a slice port matches a Service port by name and
//!   protocol; an endpoint is its first address.
//! - Conditions as the API defines them: `ready` unset means ready, `serving` unset means
//!   `ready`, `terminating` unset means not terminating.
//! - Endpoints come out ordered by (IP, port) and without duplicates (the first occurrence of
//!   an `IP:port` wins), so the rules built from them are deterministic.
//! - Cluster traffic uses the ready endpoints, or if none is ready anywhere, the serving
//!   terminating ones; Local traffic the same, restricted to this node's endpoints.

use std::net::Ipv4Addr;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::service_port::{Protocol, ServicePort};

/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One backend of a Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The backend's (pod's) address.
    pub ip: Ipv4Addr,
    /// The target port the slice gives for this Service port.
    pub port: u16,
    /// `conditions.ready`.
    pub ready: bool,
    /// `conditions.serving`.
    pub serving: bool,
    /// `conditions.terminating`.
    pub terminating: bool,
    /// On this node (`nodeName` is the proxy's node).
    pub local: bool,
}

impl Endpoint {
    /// `IP:port`, the DNAT target and part of the endpoint chain's hash.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    fn serving_terminating(&self) -> bool {
        self.serving && self.terminating
    }
}

/// Which port of which Service [`endpoints_for`] looks up: what the EndpointSlices key
/// endpoints by (the proxy passes a [`ServicePort`]'s, the ingress a backend's).
#[derive(Debug, Clone, Copy)]
pub struct PortOf<'a> {
    /// The Service's namespace.
    pub namespace: &'a str,
    /// The Service's name.
    pub service: &'a str,
    /// The port's name (`""` for an unnamed port).
    pub port_name: &'a str,
    /// The port's protocol.
    pub protocol: Protocol,
}

impl ServicePort {
    /// The key of this port's endpoints.
    pub fn endpoints_key(&self) -> PortOf<'_> {
        PortOf {
            namespace: &self.namespace,
            service: &self.service,
            port_name: &self.port_name,
            protocol: self.protocol,
        }
    }
}

/// Every endpoint the slices give `port`, ordered by (IP, port).
pub fn endpoints_for(port: PortOf<'_>, slices: &[EndpointSlice], node_name: &str) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = Vec::new();
    let owned = slices.iter().filter(|s| {
        s.metadata.namespace.as_deref() == Some(port.namespace)
            && s.address_type == "IPv4"
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .is_some_and(|n| n == port.service)
    });
    for slice in owned {
        let matching = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == port.port_name
                && Protocol::parse(p.protocol.as_deref()) == Some(port.protocol)
        });
        let Some(number) = matching
            .and_then(|p| p.port)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
        else {
            continue;
        };
        for ep in &slice.endpoints {
            let Some(ip) = ep.addresses.first().and_then(|a| a.parse().ok()) else {
                continue;
            };
            let cond = ep.conditions.as_ref();
            let ready = cond.and_then(|c| c.ready).unwrap_or(true);
            let endpoint = Endpoint {
                ip,
                port: number,
                ready,
                serving: cond.and_then(|c| c.serving).unwrap_or(ready),
                terminating: cond.and_then(|c| c.terminating).unwrap_or(false),
                local: ep.node_name.as_deref() == Some(node_name),
            };
            if !out.iter().any(|e| e.ip == ip && e.port == number) {
                out.push(endpoint);
            }
        }
    }
    out.sort_by_key(|e| (e.ip, e.port));
    out
}

/// Which endpoints each kind of traffic of one Service port goes to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Categorized {
    /// For policy Cluster (empty if the port never uses cluster endpoints).
    pub cluster: Vec<Endpoint>,
    /// For policy Local (empty if the port never uses local endpoints).
    pub local: Vec<Endpoint>,
    /// The union, ordered by (IP, port): every endpoint that gets a chain.
    pub reachable: Vec<Endpoint>,
    /// Some endpoint is usable somewhere in the cluster.
    pub has_any: bool,
}

fn pick(eps: &[Endpoint], keep: impl Fn(&Endpoint) -> bool) -> Vec<Endpoint> {
    eps.iter().filter(|e| keep(e)).cloned().collect()
}

/// Splits `eps` (from [`endpoints_for`]) by traffic policy (no topology hints).
pub fn categorize(port: &ServicePort, eps: &[Endpoint]) -> Categorized {
    let mut out = Categorized::default();
    if port.uses_cluster_endpoints() {
        out.cluster = pick(eps, |e| e.ready);
        if out.cluster.is_empty() {
            out.cluster = pick(eps, Endpoint::serving_terminating);
        }
        out.has_any = !out.cluster.is_empty();
    }
    if !port.uses_local_endpoints() {
        out.reachable = out.cluster.clone();
        return out;
    }
    out.has_any |= eps.iter().any(|e| e.ready || e.serving_terminating());
    out.local = pick(eps, |e| e.local && e.ready);
    if out.local.is_empty() {
        out.local = pick(eps, |e| e.local && e.serving_terminating());
    }
    let mut all = out.cluster.clone();
    for e in &out.local {
        if !all.contains(e) {
            all.push(e.clone());
        }
    }
    all.sort_by_key(|e| (e.ip, e.port));
    out.reachable = all;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn port(internal_local: bool, external_local: bool, node_port: Option<u16>) -> ServicePort {
        ServicePort {
            node_port,
            internal_local,
            external_local,
            ..ServicePort::for_test("ns", "web", "http", Protocol::Tcp)
        }
    }

    fn slice(v: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(v).unwrap()
    }

    fn ep(last: u8, ready: bool, serving: bool, terminating: bool, local: bool) -> Endpoint {
        Endpoint {
            ip: Ipv4Addr::new(10, 42, 0, last),
            port: 8080,
            ready,
            serving,
            terminating,
            local,
        }
    }

    #[test]
    fn slices_give_ordered_deduplicated_endpoints_with_api_defaults() {
        let slices = vec![
            slice(json!({
                "metadata": {"name": "web-a", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                          {"name": "other", "port": 9, "protocol": "TCP"}],
                "endpoints": [
                    {"addresses": ["10.42.0.10"], "nodeName": "n1"},
                    {"addresses": ["10.42.0.9"], "conditions": {"ready": false, "serving": true, "terminating": true}},
                ]
            })),
            slice(json!({
                "metadata": {"name": "web-b", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": ["10.42.0.10"], "conditions": {"ready": false}},
                              {"addresses": ["10.42.0.2"], "conditions": {"ready": false}}]
            })),
            // Wrong namespace, wrong protocol, wrong family, other service: ignored.
            slice(json!({
                "metadata": {"name": "x", "namespace": "other",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 1}],
                "endpoints": [{"addresses": ["10.42.9.1"]}]
            })),
            slice(json!({
                "metadata": {"name": "y", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 2, "protocol": "UDP"}],
                "endpoints": [{"addresses": ["10.42.9.2"]}]
            })),
            slice(json!({
                "metadata": {"name": "z", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv6", "ports": [{"name": "http", "port": 3}],
                "endpoints": [{"addresses": ["fd00::1"]}]
            })),
            slice(json!({
                "metadata": {"name": "w", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "db"}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 4}],
                "endpoints": [{"addresses": ["10.42.9.4"]}]
            })),
        ];
        let got = endpoints_for(port(false, false, None).endpoints_key(), &slices, "n1");
        assert_eq!(
            got,
            vec![
                ep(2, false, false, false, false),
                ep(9, false, true, true, false),
                ep(10, true, true, false, true),
            ]
        );
    }

    #[test]
    fn cluster_traffic_uses_ready_endpoints() {
        let eps = vec![
            ep(1, true, true, false, false),
            ep(2, false, false, false, true),
        ];
        let c = categorize(&port(false, false, None), &eps);
        assert_eq!(c.cluster, vec![eps[0].clone()]);
        assert!(c.local.is_empty());
        assert_eq!(c.reachable, vec![eps[0].clone()]);
        assert!(c.has_any);
    }

    #[test]
    fn serving_terminating_endpoints_are_the_fallback() {
        let eps = vec![
            ep(1, false, true, true, false),
            ep(2, false, false, true, false),
        ];
        let c = categorize(&port(false, false, None), &eps);
        assert_eq!(c.cluster, vec![eps[0].clone()]);
        assert!(c.has_any);
        let none = categorize(
            &port(false, false, None),
            &[ep(3, false, false, false, false)],
        );
        assert_eq!(none, Categorized::default());
    }

    #[test]
    fn internal_local_uses_only_this_nodes_endpoints() {
        let eps = vec![
            ep(1, true, true, false, false),
            ep(2, true, true, false, true),
        ];
        let c = categorize(&port(true, false, None), &eps);
        assert!(c.cluster.is_empty());
        assert_eq!(c.local, vec![eps[1].clone()]);
        assert_eq!(c.reachable, vec![eps[1].clone()]);
        assert!(c.has_any);
        // No local endpoint: nothing reachable, but the service has endpoints elsewhere.
        let c = categorize(&port(true, false, None), &eps[..1]);
        assert!(c.local.is_empty() && c.reachable.is_empty());
        assert!(c.has_any);
    }

    #[test]
    fn external_local_keeps_cluster_endpoints_and_local_terminating_fallback() {
        let eps = vec![
            ep(1, true, true, false, false),
            ep(2, false, true, true, true),
        ];
        let c = categorize(&port(false, true, Some(30080)), &eps);
        assert_eq!(c.cluster, vec![eps[0].clone()]);
        assert_eq!(c.local, vec![eps[1].clone()]);
        assert_eq!(c.reachable, eps);
        assert!(c.has_any);
    }
}
