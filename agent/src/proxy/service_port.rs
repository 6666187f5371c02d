//! What the proxy needs of one port of a Service (upstream's `ServicePort`): read from the
//! Service object without I/O.
//!
//! Guarantees:
//! - Services the proxy must leave alone give no ports: headless (`clusterIP: None`) or without
//!   a cluster IP, `ExternalName`, and those labelled `service.kubernetes.io/service-proxy-name`
//!   (another proxy owns them).
//! - Only IPv4 addresses are kept (this proxy programs `iptables`, not `ip6tables`); external
//!   and load-balancer IPs that do not parse as IPv4 are skipped.
//! - Load-balancer ingress IPs with `ipMode: Proxy` are not captured (the load balancer
//!   rewrites the destination itself), and only Services of type LoadBalancer have them.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;

/// The label that hands a Service to another proxy implementation.
pub const SERVICE_PROXY_NAME_LABEL: &str = "service.kubernetes.io/service-proxy-name";

/// The default stickiness of `sessionAffinity: ClientIP` (3 hours, the API default).
pub const DEFAULT_AFFINITY_SECONDS: i32 = 10800;

/// A Service port's L4 protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// `TCP` (the default).
    Tcp,
    /// `UDP`.
    Udp,
    /// `SCTP`.
    Sctp,
}

impl Protocol {
    /// The API spelling (`TCP`); `None` for a protocol the API does not know.
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The iptables spelling (`tcp`), used in `-p`/`-m` and in chain-name hashes.
    pub fn lower(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// One port of one Service, as the proxy programs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The port's name ("" for an unnamed port).
    pub port_name: String,
    /// The port's protocol.
    pub protocol: Protocol,
    /// `spec.clusterIP`.
    pub cluster_ip: Ipv4Addr,
    /// The port on the cluster IP (and external and load-balancer IPs).
    pub port: u16,
    /// The NodePort (types NodePort and LoadBalancer).
    pub node_port: Option<u16>,
    /// `spec.externalIPs` (IPv4).
    pub external_ips: Vec<Ipv4Addr>,
    /// `status.loadBalancer.ingress[].ip` (IPv4).
    pub load_balancer_ips: Vec<Ipv4Addr>,
    /// `Some(timeout seconds)` for `sessionAffinity: ClientIP`.
    pub affinity_seconds: Option<i32>,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// `externalTrafficPolicy: Local` on an externally reachable Service.
    pub external_local: bool,
}

impl ServicePort {
    /// Upstream's `ServicePortName` string: `namespace/name:port`, or `namespace/name` for an
    /// unnamed port. It names the port in comments and (with the protocol) in chain hashes.
    pub fn name(&self) -> String {
        if self.port_name.is_empty() {
            format!("{}/{}", self.namespace, self.service)
        } else {
            format!("{}/{}:{}", self.namespace, self.service, self.port_name)
        }
    }

    /// Reachable from outside the cluster: a NodePort, a load-balancer IP or an external IP.
    pub fn externally_accessible(&self) -> bool {
        self.node_port.is_some()
            || !self.load_balancer_ips.is_empty()
            || !self.external_ips.is_empty()
    }

    /// Whether traffic uses endpoints on any node (internal policy Cluster, or any external
    /// traffic: even with external policy Local, pods and the node itself use all endpoints).
    pub fn uses_cluster_endpoints(&self) -> bool {
        !self.internal_local || self.externally_accessible()
    }

    /// Whether some traffic uses only this node's endpoints.
    pub fn uses_local_endpoints(&self) -> bool {
        self.internal_local || (self.external_local && self.externally_accessible())
    }
}

impl ServicePort {
    /// A plain ClusterIP TCP port `ns/name:port_name` on `10.43.0.5:80`, for tests.
    #[cfg(test)]
    pub(crate) fn for_test(ns: &str, name: &str, port_name: &str, protocol: Protocol) -> Self {
        ServicePort {
            namespace: ns.into(),
            service: name.into(),
            port_name: port_name.into(),
            protocol,
            cluster_ip: Ipv4Addr::new(10, 43, 0, 5),
            port: 80,
            node_port: None,
            external_ips: vec![],
            load_balancer_ips: vec![],
            affinity_seconds: None,
            internal_local: false,
            external_local: false,
        }
    }
}

fn ipv4s<'a>(addrs: impl IntoIterator<Item = &'a String>) -> Vec<Ipv4Addr> {
    addrs.into_iter().filter_map(|a| a.parse().ok()).collect()
}

/// The ports of `svc` the proxy programs (none for Services it must leave alone).
pub fn service_ports(svc: &Service) -> Vec<ServicePort> {
    let meta = &svc.metadata;
    let (Some(spec), Some(name)) = (&svc.spec, &meta.name) else {
        return Vec::new();
    };
    let proxied_elsewhere = meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(SERVICE_PROXY_NAME_LABEL));
    let svc_type = spec.type_.as_deref().unwrap_or("ClusterIP");
    let Some(cluster_ip) = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
    else {
        return Vec::new();
    };
    if proxied_elsewhere || svc_type == "ExternalName" {
        return Vec::new();
    }
    let external_ips = ipv4s(spec.external_ips.iter().flatten());
    let load_balancer_ips = if svc_type == "LoadBalancer" {
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        ipv4s(
            ingress
                .into_iter()
                .flatten()
                .filter(|i| i.ip_mode.as_deref() != Some("Proxy"))
                .filter_map(|i| i.ip.as_ref()),
        )
    } else {
        Vec::new()
    };
    let affinity_seconds = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .unwrap_or(DEFAULT_AFFINITY_SECONDS)
    });
    let externally_reachable = matches!(svc_type, "NodePort" | "LoadBalancer")
        || (svc_type == "ClusterIP" && !external_ips.is_empty());
    let external_local =
        externally_reachable && spec.external_traffic_policy.as_deref() == Some("Local");
    let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
    let namespace = meta.namespace.clone().unwrap_or_default();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(ServicePort {
                namespace: namespace.clone(),
                service: name.clone(),
                port_name: p.name.clone().unwrap_or_default(),
                protocol: Protocol::parse(p.protocol.as_deref())?,
                cluster_ip,
                port: u16::try_from(p.port).ok()?,
                node_port: p
                    .node_port
                    .filter(|_| svc_type != "ClusterIP")
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0),
                external_ips: external_ips.clone(),
                load_balancer_ips: load_balancer_ips.clone(),
                affinity_seconds,
                internal_local,
                external_local,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_cluster_ip_port_with_defaults() {
        let s = svc(json!({
            "metadata": {"name": "web", "namespace": "ns1"},
            "spec": {"clusterIP": "10.43.0.5", "ports": [{"name": "http", "port": 80}]}
        }));
        let want = ServicePort::for_test("ns1", "web", "http", Protocol::Tcp);
        assert_eq!(want.cluster_ip, Ipv4Addr::new(10, 43, 0, 5));
        assert_eq!(
            (want.port, want.node_port, want.affinity_seconds),
            (80, None, None)
        );
        assert!(!want.internal_local && !want.external_local);
        assert!(want.external_ips.is_empty() && want.load_balancer_ips.is_empty());
        assert_eq!(service_ports(&s), vec![want]);
        assert_eq!(service_ports(&s)[0].name(), "ns1/web:http");
    }

    #[test]
    fn unproxied_services_give_no_ports() {
        let headless = svc(json!({
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {"clusterIP": "None", "ports": [{"port": 80}]}
        }));
        let external = svc(json!({
            "metadata": {"name": "e", "namespace": "ns"},
            "spec": {"type": "ExternalName", "externalName": "x.example", "clusterIP": "10.43.0.9"}
        }));
        let other_proxy = svc(json!({
            "metadata": {"name": "o", "namespace": "ns",
                         "labels": {"service.kubernetes.io/service-proxy-name": "other"}},
            "spec": {"clusterIP": "10.43.0.8", "ports": [{"port": 80}]}
        }));
        assert!(service_ports(&headless).is_empty());
        assert!(service_ports(&external).is_empty());
        assert!(service_ports(&other_proxy).is_empty());
    }

    #[test]
    fn a_load_balancer_with_policies_affinity_and_mixed_addresses() {
        let s = svc(json!({
            "metadata": {"name": "lb", "namespace": "ns"},
            "spec": {
                "type": "LoadBalancer", "clusterIP": "10.43.0.7",
                "externalIPs": ["192.0.2.1", "2001:db8::1"],
                "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
                "ports": [
                    {"port": 53, "protocol": "UDP", "nodePort": 30053},
                    {"name": "s", "port": 9, "protocol": "SCTP", "nodePort": 30009}
                ]
            },
            "status": {"loadBalancer": {"ingress": [
                {"ip": "203.0.113.1"}, {"ip": "203.0.113.2", "ipMode": "Proxy"}, {"hostname": "lb.example"}
            ]}}
        }));
        let ports = service_ports(&s);
        assert_eq!(ports.len(), 2);
        let udp = &ports[0];
        assert_eq!(udp.name(), "ns/lb");
        assert_eq!(udp.protocol, Protocol::Udp);
        assert_eq!(udp.node_port, Some(30053));
        assert_eq!(udp.external_ips, vec![Ipv4Addr::new(192, 0, 2, 1)]);
        assert_eq!(udp.load_balancer_ips, vec![Ipv4Addr::new(203, 0, 113, 1)]);
        assert_eq!(udp.affinity_seconds, Some(60));
        assert!(udp.internal_local && udp.external_local);
        assert!(udp.uses_cluster_endpoints() && udp.uses_local_endpoints());
        assert_eq!(ports[1].protocol, Protocol::Sctp);
        assert_eq!(ports[1].name(), "ns/lb:s");
    }

    #[test]
    fn external_policy_local_needs_an_external_address() {
        let s = svc(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"clusterIP": "10.43.0.6", "externalTrafficPolicy": "Local",
                     "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}
        }));
        let p = &service_ports(&s)[0];
        assert!(!p.external_local);
        assert!(!p.uses_local_endpoints());
        assert_eq!(p.affinity_seconds, Some(DEFAULT_AFFINITY_SECONDS));
    }
}
