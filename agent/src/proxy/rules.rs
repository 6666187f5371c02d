//! The whole rule set of the proxy, as `iptables-restore` input for the `filter` and `nat`
//! tables, built from Services and EndpointSlices without I/O. Upstream kube-proxy's iptables
//! mode (`pkg/proxy/iptables/proxier.go`) is the model: same chains, same rule order, same
//! comments, so `iptables-save` reads the same as on any Kubernetes node.
//!
//! Layout (`nat`): `PREROUTING`/`OUTPUT` → `KUBE-SERVICES`, which captures each cluster IP
//! (→ `KUBE-SVC-…`, or `KUBE-SVL-…` for internal policy Local), external IP and load-balancer
//! IP (→ `KUBE-EXT-…`), and last jumps to `KUBE-NODEPORTS` for local destinations (→
//! `KUBE-EXT-…`). `KUBE-EXT-…` marks for masquerade (policy Cluster) or short-circuits pod and
//! node traffic (policy Local), then goes to the policy chain, which picks an endpoint chain
//! `KUBE-SEP-…` with `statistic --mode random --probability 1/(n-i)`, honouring ClientIP
//! affinity with `recent`; the endpoint chain DNATs. Marked packets (`0x4000`) are masqueraded
//! in `KUBE-POSTROUTING`. `filter` rejects traffic to ports without endpoints
//! (`KUBE-SERVICES`, `KUBE-EXTERNAL-SERVICES`), drops traffic for policy Local without local
//! endpoints, and accepts marked forwarded traffic (`KUBE-FORWARD`).
//!
//! Guarantees:
//! - The output depends only on the inputs: ports ordered by (name, protocol), endpoints by
//!   (IP, port).
//! - Every chain written is declared (`:CHAIN - [0:0]`), which with `iptables-restore
//!   --noflush` empties it first; no other chain of the tables is touched.
//! - Per-service chains that exist (`existing_nat_chains`) but are no longer used are declared
//!   and deleted (`-X`).
//! - NodePorts are not served on `127.0.0.0/8` (this proxy leaves `route_localnet` alone).

use std::collections::BTreeSet;

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::endpoints::{categorize, endpoints_for, Endpoint};
use super::names::{
    self, EXTERNAL_SERVICES, FORWARD, MARK_MASQ, NODE_PORTS, POSTROUTING, SERVICES,
};
use super::service_port::{service_ports, ServicePort};

/// The mark of packets to masquerade (upstream's `--iptables-masquerade-bit` 14).
pub const MASQ_MARK: &str = "0x4000";

/// What the rules depend on besides the API objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// The node's name (endpoints with this `nodeName` are local).
    pub node_name: String,
    /// Pod addresses: traffic from elsewhere to a cluster IP is masqueraded. `None`: no such
    /// masquerade (upstream without a local-traffic detector).
    pub cluster_cidr: Option<Ipv4Net>,
}

/// Upstream's probability formatting: `%0.10f` of `1/n`.
pub fn probability(n: usize) -> String {
    format!("{:.10}", 1.0 / n as f64)
}

/// Chain declarations and rules of one table.
#[derive(Default)]
struct Table {
    chains: Vec<String>,
    rules: Vec<String>,
}

impl Table {
    fn chain(&mut self, name: &str) {
        self.chains.push(format!(":{name} - [0:0]"));
    }

    fn rule(&mut self, line: String) {
        self.rules.push(line);
    }

    fn render(&self, name: &str, out: &mut String) {
        out.push('*');
        out.push_str(name);
        out.push('\n');
        for l in self.chains.iter().chain(&self.rules) {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str("COMMIT\n");
    }
}

struct Builder<'a> {
    ctx: &'a NodeContext,
    filter: Table,
    nat: Table,
    active: BTreeSet<String>,
}

/// The complete `iptables-restore` input (filter, then nat) for `services` and `slices`.
/// `existing_nat_chains` are the `nat` chains present now (from `iptables-save`), to find
/// stale ones.
pub fn build(
    services: &[Service],
    slices: &[EndpointSlice],
    ctx: &NodeContext,
    existing_nat_chains: &[String],
) -> String {
    let mut ports: Vec<ServicePort> = services.iter().flat_map(service_ports).collect();
    ports.sort_by_key(|p| (p.name(), p.protocol));
    let mut b = Builder {
        ctx,
        filter: Table::default(),
        nat: Table::default(),
        active: BTreeSet::new(),
    };
    b.top_level();
    for port in &ports {
        let eps = endpoints_for(port.endpoints_key(), slices, &ctx.node_name);
        b.service_port(port, &eps);
    }
    b.remove_stale(existing_nat_chains);
    b.tail();
    let mut out = String::new();
    b.filter.render("filter", &mut out);
    b.nat.render("nat", &mut out);
    out
}

impl Builder<'_> {
    fn top_level(&mut self) {
        for c in [SERVICES, EXTERNAL_SERVICES, FORWARD, NODE_PORTS] {
            self.filter.chain(c);
        }
        for c in [SERVICES, NODE_PORTS, POSTROUTING, MARK_MASQ] {
            self.nat.chain(c);
        }
        let nat = &mut self.nat;
        nat.rule(format!(
            "-A {POSTROUTING} -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN"
        ));
        nat.rule(format!("-A {POSTROUTING} -j MARK --xor-mark {MASQ_MARK}"));
        nat.rule(format!(
            "-A {POSTROUTING} -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully"
        ));
        nat.rule(format!("-A {MARK_MASQ} -j MARK --or-mark {MASQ_MARK}"));
    }

    fn service_port(&mut self, port: &ServicePort, eps: &[Endpoint]) {
        let name = port.name();
        let proto = port.protocol.lower();
        let cats = categorize(port, eps);
        let cluster_chain = names::cluster_policy_chain(port);
        let local_chain = names::local_policy_chain(port);
        let ext_chain = names::external_chain(port);
        let uses_cluster_chain = !cats.cluster.is_empty() && port.uses_cluster_endpoints();
        let uses_local_chain = !cats.local.is_empty() && port.uses_local_endpoints();
        let has_endpoints = cats.has_any;

        let (internal_chain, has_internal) = if port.internal_local {
            (&local_chain, has_endpoints && !cats.local.is_empty())
        } else {
            (&cluster_chain, has_endpoints)
        };
        let (external_policy_chain, has_external) = if port.external_local {
            (&local_chain, has_endpoints && !cats.local.is_empty())
        } else {
            (&cluster_chain, has_endpoints)
        };
        // On `has_endpoints`, not `has_external`: pods and the node itself are short-circuited
        // to cluster endpoints even when policy Local has none here.
        let uses_ext_chain = has_endpoints && port.externally_accessible();

        let no_endpoints = format!("\"{name} has no endpoints\"");
        let no_local = format!("\"{name} has no local endpoints\"");
        let (internal_filter, external_filter) = if !has_endpoints {
            (("REJECT", &no_endpoints), ("REJECT", &no_endpoints))
        } else {
            (("DROP", &no_local), ("DROP", &no_local))
        };
        let dst = |ip: &std::net::Ipv4Addr| {
            format!("-m {proto} -p {proto} -d {ip} --dport {}", port.port)
        };

        // Capture the cluster IP.
        let cluster_ip = dst(&port.cluster_ip);
        if has_internal {
            self.nat.rule(format!(
                "-A {SERVICES} -m comment --comment \"{name} cluster IP\" {cluster_ip} -j {internal_chain}"
            ));
        } else {
            let (target, comment) = internal_filter;
            self.filter.rule(format!(
                "-A {SERVICES} -m comment --comment {comment} {cluster_ip} -j {target}"
            ));
        }
        // Capture external IPs.
        let (ext_target, ext_comment) = external_filter;
        for ip in &port.external_ips {
            if has_endpoints {
                self.nat.rule(format!(
                    "-A {SERVICES} -m comment --comment \"{name} external IP\" {} -j {ext_chain}",
                    dst(ip)
                ));
            }
            if !has_external {
                self.filter.rule(format!(
                    "-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} {} -j {ext_target}",
                    dst(ip)
                ));
            }
        }
        // Capture load-balancer ingress IPs.
        for ip in &port.load_balancer_ips {
            if has_endpoints {
                self.nat.rule(format!(
                    "-A {SERVICES} -m comment --comment \"{name} loadbalancer IP\" {} -j {ext_chain}",
                    dst(ip)
                ));
            }
        }
        if !has_external {
            for ip in &port.load_balancer_ips {
                self.filter.rule(format!(
                    "-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} {} -j {ext_target}",
                    dst(ip)
                ));
            }
        }
        // Capture the NodePort.
        if let Some(node_port) = port.node_port {
            if has_endpoints {
                self.nat.rule(format!(
                    "-A {NODE_PORTS} -m comment --comment {name} -m {proto} -p {proto} --dport {node_port} -j {ext_chain}"
                ));
            }
            if !has_external {
                self.filter.rule(format!(
                    "-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} -m addrtype --dst-type LOCAL -m {proto} -p {proto} --dport {node_port} -j {ext_target}"
                ));
            }
        }

        // Internal traffic from outside the pod network is masqueraded (it may be routed here
        // from off the node and must come back the same way).
        if has_internal {
            if let Some(cidr) = self.ctx.cluster_cidr {
                self.nat.rule(format!(
                    "-A {internal_chain} -m comment --comment \"{name} cluster IP\" {cluster_ip} ! -s {cidr} -j {MARK_MASQ}"
                ));
            }
        }

        if uses_ext_chain {
            self.declare_nat(&ext_chain);
            if !port.external_local {
                self.nat.rule(format!(
                    "-A {ext_chain} -m comment --comment \"masquerade traffic for {name} external destinations\" -j {MARK_MASQ}"
                ));
            } else {
                if let Some(cidr) = self.ctx.cluster_cidr {
                    self.nat.rule(format!(
                        "-A {ext_chain} -m comment --comment \"pod traffic for {name} external destinations\" -s {cidr} -j {cluster_chain}"
                    ));
                }
                self.nat.rule(format!(
                    "-A {ext_chain} -m comment --comment \"masquerade LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {MARK_MASQ}"
                ));
                self.nat.rule(format!(
                    "-A {ext_chain} -m comment --comment \"route LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {cluster_chain}"
                ));
            }
            if has_external {
                self.nat
                    .rule(format!("-A {ext_chain} -j {external_policy_chain}"));
            }
        }

        if uses_cluster_chain {
            self.declare_nat(&cluster_chain);
            self.endpoint_choice(port, &cluster_chain, &cats.cluster);
        }
        if uses_local_chain {
            self.declare_nat(&local_chain);
            self.endpoint_choice(port, &local_chain, &cats.local);
        }

        for ep in &cats.reachable {
            let chain = names::endpoint_chain(port, &ep.addr());
            self.declare_nat(&chain);
            self.nat.rule(format!(
                "-A {chain} -m comment --comment {name} -s {} -j {MARK_MASQ}",
                ep.ip
            ));
            let affinity = if port.affinity_seconds.is_some() {
                format!(" -m recent --name {chain} --set")
            } else {
                String::new()
            };
            self.nat.rule(format!(
                "-A {chain} -m comment --comment {name}{affinity} -m {proto} -p {proto} -j DNAT --to-destination {}",
                ep.addr()
            ));
        }
    }

    /// The policy chain's rules: affinity checks first, then the random choice.
    fn endpoint_choice(&mut self, port: &ServicePort, chain: &str, eps: &[Endpoint]) {
        let name = port.name();
        if let Some(seconds) = port.affinity_seconds {
            for ep in eps {
                let sep = names::endpoint_chain(port, &ep.addr());
                self.nat.rule(format!(
                    "-A {chain} -m comment --comment \"{name} -> {}\" -m recent --name {sep} --rcheck --seconds {seconds} --reap -j {sep}",
                    ep.addr()
                ));
            }
        }
        let n = eps.len();
        for (i, ep) in eps.iter().enumerate() {
            let sep = names::endpoint_chain(port, &ep.addr());
            let statistic = if i + 1 < n {
                format!(
                    " -m statistic --mode random --probability {}",
                    probability(n - i)
                )
            } else {
                String::new()
            };
            self.nat.rule(format!(
                "-A {chain} -m comment --comment \"{name} -> {}\"{statistic} -j {sep}",
                ep.addr()
            ));
        }
    }

    fn declare_nat(&mut self, chain: &str) {
        self.nat.chain(chain);
        self.active.insert(chain.to_string());
    }

    fn remove_stale(&mut self, existing: &[String]) {
        let mut stale: Vec<&String> = existing
            .iter()
            .filter(|c| names::PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p)))
            .filter(|c| !self.active.contains(*c))
            .collect();
        stale.sort();
        stale.dedup();
        for c in stale {
            self.nat.chain(c);
            self.nat.rule(format!("-X {c}"));
        }
    }

    fn tail(&mut self) {
        self.nat.rule(format!(
            "-A {SERVICES} -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j {NODE_PORTS}"
        ));
        let f = &mut self.filter;
        f.rule(format!(
            "-A {FORWARD} -m conntrack --ctstate INVALID -j DROP"
        ));
        f.rule(format!(
            "-A {FORWARD} -m comment --comment \"kubernetes forwarding rules\" -m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT"
        ));
        f.rule(format!(
            "-A {FORWARD} -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        ));
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
