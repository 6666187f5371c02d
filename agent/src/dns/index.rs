//! What the cluster zone knows, built without I/O from the watched Services and
//! EndpointSlices: per Service its kind (cluster IPs, headless, ExternalName), its ports and
//! its ready endpoints (named by hostname, else by the dashed IP, as CoreDNS names them), plus
//! the reverse map from cluster and endpoint IPs to names.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How a Service's name resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceKind {
    /// `spec.clusterIPs`.
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: the ready endpoints' IPs.
    Headless,
    /// `spec.externalName` (lower case, no trailing dot).
    ExternalName(String),
}

/// A port as SRV records publish it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Port {
    /// The port's name (SRV records exist only for named ports).
    pub name: String,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// The port number.
    pub port: u16,
}

/// A ready endpoint address of a Service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// `hostname` if the endpoint has one, else the IP with `.`/`:` replaced by `-`.
    pub name: String,
    /// The endpoint's address.
    pub ip: IpAddr,
    /// The endpoint's (target) ports, from its EndpointSlice.
    pub ports: Vec<Port>,
}

/// One Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEntry {
    /// What its name resolves to.
    pub kind: ServiceKind,
    /// The Service's ports.
    pub ports: Vec<Port>,
    /// Sorted by name, then IP; one per IP.
    pub endpoints: Vec<Endpoint>,
}

/// The zone's data; `services` keyed by (namespace, name), all lower case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Every Service.
    pub services: BTreeMap<(String, String), ServiceEntry>,
    /// Namespaces that have at least one Service.
    pub namespaces: BTreeSet<String>,
    /// An IP's name under `svc.<zone>` (without the zone): `svc.ns` for a cluster IP,
    /// `endpoint.svc.ns` for an endpoint; cluster IPs win.
    pub reverse: BTreeMap<IpAddr, String>,
    /// The SOA serial.
    pub serial: u32,
}

impl Index {
    /// Whether `ip` is an endpoint of the `kube-dns` Service: a node serving cluster DNS.
    pub fn is_dns_node(&self, ip: IpAddr) -> bool {
        self.services
            .get(&("kube-system".to_string(), "kube-dns".to_string()))
            .is_some_and(|s| s.endpoints.iter().any(|e| e.ip == ip))
    }
}

/// `10.1.2.3` → `10-1-2-3`, `fd00::1` → `fd00--1`.
pub fn dashed(ip: &IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

fn port(name: Option<&String>, protocol: Option<&str>, number: Option<i32>) -> Option<Port> {
    Some(Port {
        name: name.cloned().unwrap_or_default().to_ascii_lowercase(),
        protocol: protocol.unwrap_or("TCP").to_ascii_lowercase(),
        port: u16::try_from(number?).ok()?,
    })
}

fn service_entry(svc: &Service) -> Option<ServiceEntry> {
    let spec = svc.spec.as_ref()?;
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        let target = spec.external_name.as_deref()?.trim_end_matches('.');
        ServiceKind::ExternalName(target.to_ascii_lowercase())
    } else {
        let ips: Vec<&String> = match &spec.cluster_ips {
            Some(ips) if !ips.is_empty() => ips.iter().collect(),
            _ => spec.cluster_ip.iter().collect(),
        };
        if ips.iter().any(|ip| ip.as_str() == "None") {
            ServiceKind::Headless
        } else {
            let ips: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
            if ips.is_empty() {
                return None;
            }
            ServiceKind::ClusterIp(ips)
        }
    };
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port(p.name.as_ref(), p.protocol.as_deref(), Some(p.port)))
        .collect();
    Some(ServiceEntry {
        kind,
        ports,
        endpoints: Vec::new(),
    })
}

fn slice_endpoints(slice: &EndpointSlice) -> Vec<Endpoint> {
    if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
        return Vec::new();
    }
    let ports: Vec<Port> = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port(p.name.as_ref(), p.protocol.as_deref(), p.port))
        .collect();
    let mut out = Vec::new();
    for ep in &slice.endpoints {
        let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        if !ready {
            continue;
        }
        for addr in &ep.addresses {
            let Ok(ip) = addr.parse::<IpAddr>() else {
                continue;
            };
            let name = match ep.hostname.as_deref() {
                Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
                _ => dashed(&ip),
            };
            out.push(Endpoint {
                name,
                ip,
                ports: ports.clone(),
            });
        }
    }
    out
}

/// The index of `services` and their `slices`; slices of unknown Services are ignored.
pub fn build(services: &[Service], slices: &[EndpointSlice], serial: u32) -> Index {
    let mut index = Index {
        serial,
        ..Index::default()
    };
    for svc in services {
        let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
            continue;
        };
        if let Some(entry) = service_entry(svc) {
            let key = (ns.to_ascii_lowercase(), name.to_ascii_lowercase());
            index.namespaces.insert(key.0.clone());
            index.services.insert(key, entry);
        }
    }
    for slice in slices {
        let ns = slice.metadata.namespace.as_deref().unwrap_or_default();
        let Some(svc) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let key = (ns.to_ascii_lowercase(), svc.to_ascii_lowercase());
        if let Some(entry) = index.services.get_mut(&key) {
            entry.endpoints.extend(slice_endpoints(slice));
        }
    }
    for ((ns, name), entry) in index.services.iter_mut() {
        entry.endpoints.sort();
        let mut seen = BTreeSet::new();
        entry.endpoints.retain(|e| seen.insert(e.ip));
        for ep in &entry.endpoints {
            index
                .reverse
                .entry(ep.ip)
                .or_insert_with(|| format!("{}.{name}.{ns}", ep.name));
        }
        if let ServiceKind::ClusterIp(ips) = &entry.kind {
            for ip in ips {
                index.reverse.insert(*ip, format!("{name}.{ns}"));
            }
        }
    }
    index
}
