//! A pod's DNS settings and hostname (upstream's `network/dns` `GetPodDNS` and
//! `GeneratePodHostNameAndDomain`): what goes into the sandbox's resolv.conf per `dnsPolicy`
//! (`ClusterFirst`, `ClusterFirstWithHostNet`, `Default`, `None`) and `dnsConfig`.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

use super::spec::host_network;

/// At most this many nameservers are used.
pub const MAX_NAMESERVERS: usize = 3;
/// At most this many search domains, of at most 253 characters each, 2048 in all.
pub const MAX_SEARCHES: usize = 32;
pub const MAX_SEARCH_CHARS: usize = 2048;
const MAX_DOMAIN_CHARS: usize = 253;

/// A resolver configuration (CRI `DNSConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// The node's DNS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeDns {
    /// `--cluster-dns`.
    pub cluster_dns: Vec<IpAddr>,
    /// `--cluster-domain` (`cluster.local`).
    pub cluster_domain: String,
    /// The host's resolv.conf, parsed; `None` when the kubelet has none (`--resolv-conf=""`).
    pub host: Option<DnsConfig>,
    /// The node's IPs (for the loopback resolver used when there is no host resolv.conf).
    pub node_ips: Vec<IpAddr>,
}

/// Options by name, later ones replacing earlier ones in place.
fn merge_options(into: &mut Vec<String>, more: impl IntoIterator<Item = String>) {
    for opt in more {
        let name = opt.split(':').next().unwrap_or_default().to_string();
        match into
            .iter_mut()
            .find(|o| o.split(':').next() == Some(name.as_str()))
        {
            Some(slot) => *slot = opt,
            None => into.push(opt),
        }
    }
}

/// Parses resolv.conf: `nameserver` lines add up, the last `search` line wins (trailing dots
/// dropped, `.` ignored), `options` lines merge; `#` comments are skipped.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut c = DnsConfig::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["nameserver", ip, ..] => c.servers.push(ip.to_string()),
            ["search", domains @ ..] => {
                c.searches = domains
                    .iter()
                    .filter(|d| **d != ".")
                    .map(|d| d.trim_end_matches('.').to_string())
                    .collect();
            }
            ["options", opts @ ..] => {
                merge_options(&mut c.options, opts.iter().map(|o| o.to_string()))
            }
            _ => {}
        }
    }
    c
}

fn dedup(list: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for s in list {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The pod's resolver configuration.
pub fn pod_dns(pod: &Pod, node: &NodeDns) -> DnsConfig {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let cluster = match policy {
        "None" => None,
        "ClusterFirstWithHostNet" => Some(true),
        "Default" => Some(false),
        "ClusterFirst" => Some(!host_network(pod)),
        _ => Some(true),
    };
    let host = node.host.clone().unwrap_or_default();
    let mut c = match cluster {
        None => DnsConfig::default(),
        Some(true) if !node.cluster_dns.is_empty() => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let d = &node.cluster_domain;
            let mut searches = if d.is_empty() {
                vec![]
            } else {
                vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()]
            };
            searches.extend(host.searches);
            DnsConfig {
                servers: node.cluster_dns.iter().map(|ip| ip.to_string()).collect(),
                searches: dedup(searches),
                options: vec!["ndots:5".into()],
            }
        }
        Some(_) if node.host.is_none() => {
            let mut servers: Vec<String> = node
                .node_ips
                .iter()
                .map(|ip| if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_string())
                .collect();
            if servers.is_empty() {
                servers.push("127.0.0.1".into());
            }
            DnsConfig {
                servers,
                searches: vec![".".into()],
                options: vec![],
            }
        }
        Some(_) => host,
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        c.servers
            .extend(extra.nameservers.iter().flatten().cloned());
        c.servers = dedup(std::mem::take(&mut c.servers));
        c.searches.extend(extra.searches.iter().flatten().cloned());
        c.searches = dedup(std::mem::take(&mut c.searches));
        let opts = extra
            .options
            .iter()
            .flatten()
            .map(|o| match o.value.as_deref() {
                Some(v) if !v.is_empty() => {
                    format!("{}:{v}", o.name.as_deref().unwrap_or_default())
                }
                _ => o.name.clone().unwrap_or_default(),
            });
        merge_options(&mut c.options, opts);
    }
    fit_limits(c)
}

/// At most 3 nameservers; at most 32 search domains, none longer than 253 characters, and
/// the search line no longer than 2048 (domains cut from the end).
fn fit_limits(mut c: DnsConfig) -> DnsConfig {
    c.servers.truncate(MAX_NAMESERVERS);
    c.searches.truncate(MAX_SEARCHES);
    c.searches.retain(|s| s.len() <= MAX_DOMAIN_CHARS);
    while c.searches.join(" ").len() > MAX_SEARCH_CHARS {
        c.searches.pop();
    }
    c
}

/// The pod's hostname and domain: `spec.hostname` or the pod's name, cut to 63 characters
/// without a trailing `-` or `.`; the domain `<subdomain>.<namespace>.svc.<cluster domain>`
/// when `spec.subdomain` is set.
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let hostname = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
        .unwrap_or(name);
    let hostname = if hostname.len() > 63 {
        hostname[..63].trim_end_matches(['-', '.']).to_string()
    } else {
        hostname.to_string()
    };
    let domain = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|d| !d.is_empty())
        .map(|sub| {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            format!("{sub}.{ns}.svc.{cluster_domain}")
        });
    (hostname, domain)
}

#[cfg(test)]
mod tests;
