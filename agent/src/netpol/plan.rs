//! Which filter rules enforce the cluster's NetworkPolicies on one node: a pure function from
//! the policies, pods and namespaces to the node's [`Plan`] (chains and their rules), with
//! the policies it could not fully express as [`Warning`]s.
//!
//! The rules: [`TOP`] (jumped to from `FORWARD` and `INPUT`) lets packets of established
//! connections through, then sends a packet from a local egress-isolated pod to the pod's
//! `KUBE-NP-E-…` chain and one to a local ingress-isolated pod to its `KUBE-NP-I-…` chain.
//! Each per-pod chain `RETURN`s what one of the policies selecting the pod allows (peer
//! address and port) and drops the rest. Nothing is ever accepted, so the node's other rules
//! (the service proxy's) still see every packet that is let through.
//!
//! Semantics (upstream's, `networking.k8s.io/v1`):
//! - A pod is isolated for a direction when a policy of its namespace selects it with that
//!   direction in `policyTypes` (default: `Ingress`, plus `Egress` when it has egress rules);
//!   what the union of those policies' rules allows is allowed; a pod no policy selects is
//!   not isolated.
//! - A peer is an `ipBlock` (minus `except`), or the pods matching `podSelector` in the
//!   namespaces matching `namespaceSelector` (the policy's own namespace without one);
//!   no peers: every address; no ports: every port and protocol.
//! - A named port is resolved against the pod that receives: the local pod for ingress, each
//!   peer pod for egress (so an egress named port only reaches pods, also for `ipBlock` peers
//!   and rules without peers).
//! - hostNetwork pods are neither isolated nor peers (their address is the node's); traffic
//!   from the node to its own pods is not filtered (only `FORWARD` and `INPUT` are hooked),
//!   traffic from a pod to its node is subject to the pod's egress policy (so cluster DNS,
//!   served on the node, needs an egress rule allowing it).
//! - Established connections are not cut when a policy changes (conntrack, as Calico):
//!   only new connections are checked.
//! - A port the node cannot filter (SCTP without kernel SCTP support, an unknown protocol) or
//!   an `ipBlock` that does not parse is left out (so what it would allow stays denied) and
//!   reported as a [`Warning`].

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use k3rs_apimachinery::scheduling::label_selector_matches;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::cidr;
use crate::proxy::names::hash16;

/// The top-level chain, jumped to from `FORWARD` and `INPUT` of the `filter` table.
pub const TOP: &str = "KUBE-NWPLCY";
/// The prefix of the per-pod chains; one with it that the plan does not use is stale.
pub const POD_CHAIN_PREFIX: &str = "KUBE-NP-";

/// What the node knows.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub node_name: &'a str,
    pub policies: &'a [NetworkPolicy],
    pub pods: &'a [Pod],
    pub namespaces: &'a [Namespace],
    /// Whether the kernel has SCTP (`-p sctp` rules can be written and mean something).
    pub sctp: bool,
}

/// One chain of the `filter` table and its rules (each the arguments after `-A <name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: String,
    pub rules: Vec<String>,
}

/// Something of a policy the node cannot enforce as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    pub namespace: String,
    pub policy: String,
    /// The Event reason (`UnsupportedProtocol`, `InvalidIPBlock`).
    pub reason: &'static str,
    pub message: String,
}

/// The node's rules: [`TOP`] first, then the per-pod chains, and the warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub chains: Vec<Chain>,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

/// A pod that can be a peer (and, on this node, be isolated).
struct PodInfo<'a> {
    namespace: &'a str,
    name: &'a str,
    ip: Ipv4Addr,
    pod: &'a Pod,
}

impl PodInfo<'_> {
    fn labels(&self) -> BTreeMap<String, String> {
        self.pod.metadata.labels.clone().unwrap_or_default()
    }
}

/// A peer, before ports.
#[derive(Clone, Copy)]
enum Peer<'a> {
    Anywhere,
    Net(Ipv4Net),
    Pod(&'a PodInfo<'a>),
}

/// A port entry, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PortSpec {
    Any,
    Protocol(&'static str),
    Numbers(&'static str, u16, u16),
    Named(&'static str, String),
}

/// Builds the plan.
pub fn plan(input: &Input<'_>) -> Plan {
    let pods = peer_pods(input.pods);
    let ns_labels = namespace_labels(input.namespaces, &pods);
    // A policy without a spec is the empty spec: it isolates every pod of its namespace.
    let mut policies: Vec<(&NetworkPolicy, NetworkPolicySpec)> = input
        .policies
        .iter()
        .map(|p| (p, p.spec.clone().unwrap_or_default()))
        .collect();
    policies.sort_by(|(a, _), (b, _)| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let mut warnings = BTreeSet::new();
    let mut top = Vec::new();
    let mut chains = Vec::new();
    for local in pods.iter().filter(|p| on_node(p.pod, input.node_name)) {
        for dir in [Direction::Egress, Direction::Ingress] {
            let selecting: Vec<&(&NetworkPolicy, NetworkPolicySpec)> = policies
                .iter()
                .filter(|(p, spec)| selects(p, spec, local) && has_type(spec, dir))
                .collect();
            if selecting.is_empty() {
                continue;
            }
            let name = pod_chain(local, dir);
            let mut rules = Rules::default();
            for (p, spec) in selecting {
                let ctx = PolicyCtx {
                    policy: p,
                    spec,
                    pods: &pods,
                    ns_labels: &ns_labels,
                    sctp: input.sctp,
                };
                ctx.allow(local, dir, &mut rules, &mut warnings);
            }
            let who = format!("{}/{}", local.namespace, local.name);
            let (what, addr) = match dir {
                Direction::Ingress => ("ingress", "-d"),
                Direction::Egress => ("egress", "-s"),
            };
            rules.push(format!(
                "-m comment --comment \"{who} {what}: no policy allows\" -j DROP"
            ));
            top.push(format!(
                "{addr} {}/32 -m comment --comment \"{who} {what}\" -j {name}",
                local.ip
            ));
            chains.push(Chain {
                name,
                rules: rules.lines,
            });
        }
    }
    if !top.is_empty() {
        top.insert(
            0,
            "-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN".to_string(),
        );
    }
    chains.insert(
        0,
        Chain {
            name: TOP.to_string(),
            rules: top,
        },
    );
    Plan {
        chains,
        warnings: warnings.into_iter().collect(),
    }
}

/// Rule lines in first-seen order, without repeats.
#[derive(Default)]
struct Rules {
    lines: Vec<String>,
    seen: HashSet<String>,
}

impl Rules {
    fn push(&mut self, line: String) {
        if self.seen.insert(line.clone()) {
            self.lines.push(line);
        }
    }
}

/// One rule's peers (`from` or `to`) and ports.
type RuleParts<'a> = (
    Option<&'a Vec<NetworkPolicyPeer>>,
    Option<&'a Vec<NetworkPolicyPort>>,
);

struct PolicyCtx<'a> {
    policy: &'a NetworkPolicy,
    spec: &'a NetworkPolicySpec,
    pods: &'a [PodInfo<'a>],
    ns_labels: &'a BTreeMap<String, BTreeMap<String, String>>,
    sctp: bool,
}

impl PolicyCtx<'_> {
    fn namespace(&self) -> &str {
        self.policy
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    fn warn(&self, warnings: &mut BTreeSet<Warning>, reason: &'static str, message: String) {
        warnings.insert(Warning {
            namespace: self.namespace().to_string(),
            policy: self.policy.metadata.name.clone().unwrap_or_default(),
            reason,
            message,
        });
    }

    /// Adds the `RETURN` rules of this policy for `local` in `dir`.
    fn allow(
        &self,
        local: &PodInfo<'_>,
        dir: Direction,
        rules: &mut Rules,
        warnings: &mut BTreeSet<Warning>,
    ) {
        let spec = self.spec;
        let comment = format!(
            "{}/{}",
            self.namespace(),
            self.policy.metadata.name.as_deref().unwrap_or_default()
        );
        let rule_parts: Vec<RuleParts<'_>> = match dir {
            Direction::Ingress => spec
                .ingress
                .iter()
                .flatten()
                .map(|r| (r.from.as_ref(), r.ports.as_ref()))
                .collect(),
            Direction::Egress => spec
                .egress
                .iter()
                .flatten()
                .map(|r| (r.to.as_ref(), r.ports.as_ref()))
                .collect(),
        };
        let addr_flag = match dir {
            Direction::Ingress => "-s",
            Direction::Egress => "-d",
        };
        for (peers, ports) in rule_parts {
            let ports = self.port_specs(ports, warnings);
            let peers = self.peers(peers, warnings);
            for peer in &peers {
                for port in &ports {
                    for (addr, port_match) in self.expand(local, dir, *peer, port) {
                        let mut line = format!("-m comment --comment \"{comment}\"");
                        if let Some(net) = addr {
                            line.push_str(&format!(" {addr_flag} {net}"));
                        }
                        if let Some(m) = port_match {
                            line.push(' ');
                            line.push_str(&m);
                        }
                        line.push_str(" -j RETURN");
                        rules.push(line);
                    }
                }
            }
        }
    }

    /// The (address, port match) pairs one peer and one port entry allow.
    fn expand(
        &self,
        local: &PodInfo<'_>,
        dir: Direction,
        peer: Peer<'_>,
        port: &PortSpec,
    ) -> Vec<(Option<Ipv4Net>, Option<String>)> {
        let addr = |p: Peer<'_>| match p {
            Peer::Anywhere => None,
            Peer::Net(n) => Some(n),
            Peer::Pod(pod) => Some(host(pod.ip)),
        };
        let PortSpec::Named(proto, name) = port else {
            return vec![(addr(peer), numeric_match(port))];
        };
        match (dir, peer) {
            (Direction::Ingress, _) => named_port(local.pod, proto, name)
                .map(|n| (addr(peer), Some(dport(proto, n, n))))
                .into_iter()
                .collect(),
            (Direction::Egress, Peer::Pod(pod)) => named_port(pod.pod, proto, name)
                .map(|n| (Some(host(pod.ip)), Some(dport(proto, n, n))))
                .into_iter()
                .collect(),
            (Direction::Egress, Peer::Anywhere | Peer::Net(_)) => self
                .pods
                .iter()
                .filter(|p| match peer {
                    Peer::Net(n) => n.contains(&p.ip),
                    _ => true,
                })
                .filter_map(|p| {
                    named_port(p.pod, proto, name)
                        .map(|n| (Some(host(p.ip)), Some(dport(proto, n, n))))
                })
                .collect(),
        }
    }

    fn port_specs(
        &self,
        ports: Option<&Vec<NetworkPolicyPort>>,
        warnings: &mut BTreeSet<Warning>,
    ) -> Vec<PortSpec> {
        let ports = ports.map(Vec::as_slice).unwrap_or_default();
        if ports.is_empty() {
            return vec![PortSpec::Any];
        }
        let mut out = Vec::new();
        for p in ports {
            let given = p.protocol.as_deref().unwrap_or("TCP");
            let proto = match given {
                "TCP" => "tcp",
                "UDP" => "udp",
                "SCTP" if self.sctp => "sctp",
                "SCTP" => {
                    self.warn(
                        warnings,
                        "UnsupportedProtocol",
                        "SCTP ports are not enforced: this node's kernel has no SCTP; \
                         the traffic they would allow stays denied"
                            .to_string(),
                    );
                    continue;
                }
                other => {
                    self.warn(
                        warnings,
                        "UnsupportedProtocol",
                        format!("protocol {other:?} is not supported; the traffic it would allow stays denied"),
                    );
                    continue;
                }
            };
            out.push(match &p.port {
                None => PortSpec::Protocol(proto),
                Some(IntOrString::Int(n)) => {
                    let Ok(start) = u16::try_from(*n) else {
                        continue;
                    };
                    let end = p
                        .end_port
                        .and_then(|e| u16::try_from(e).ok())
                        .unwrap_or(start)
                        .max(start);
                    PortSpec::Numbers(proto, start, end)
                }
                Some(IntOrString::String(name)) => PortSpec::Named(proto, name.clone()),
            });
        }
        out
    }

    fn peers<'p>(
        &'p self,
        peers: Option<&Vec<NetworkPolicyPeer>>,
        warnings: &mut BTreeSet<Warning>,
    ) -> Vec<Peer<'p>> {
        let peers = peers.map(Vec::as_slice).unwrap_or_default();
        if peers.is_empty() {
            return vec![Peer::Anywhere];
        }
        let mut out = Vec::new();
        for peer in peers {
            if let Some(block) = &peer.ip_block {
                if block.cidr.contains(':') {
                    continue; // IPv6: the node filters IPv4 only.
                }
                let parsed: Result<Ipv4Net, _> = block.cidr.parse();
                let except: Result<Vec<Ipv4Net>, _> = block
                    .except
                    .iter()
                    .flatten()
                    .filter(|e| !e.contains(':'))
                    .map(|e| e.parse::<Ipv4Net>())
                    .collect();
                match (parsed, except) {
                    (Ok(net), Ok(except)) => {
                        out.extend(cidr::subtract(net, &except).into_iter().map(Peer::Net))
                    }
                    _ => self.warn(
                        warnings,
                        "InvalidIPBlock",
                        format!("ipBlock {:?} does not parse; it allows nothing", block.cidr),
                    ),
                }
                continue;
            }
            let own = self.namespace();
            for pod in self.pods {
                let ns_ok = match &peer.namespace_selector {
                    None => pod.namespace == own,
                    Some(sel) => label_selector_matches(
                        Some(sel),
                        self.ns_labels
                            .get(pod.namespace)
                            .unwrap_or(&BTreeMap::new()),
                    ),
                };
                let pod_ok = peer
                    .pod_selector
                    .as_ref()
                    .is_none_or(|sel| label_selector_matches(Some(sel), &pod.labels()));
                if ns_ok && pod_ok {
                    out.push(Peer::Pod(pod));
                }
            }
        }
        out
    }
}

fn has_type(spec: &NetworkPolicySpec, dir: Direction) -> bool {
    match &spec.policy_types {
        Some(types) if !types.is_empty() => types.iter().any(|t| {
            t == match dir {
                Direction::Ingress => "Ingress",
                Direction::Egress => "Egress",
            }
        }),
        _ => match dir {
            Direction::Ingress => true,
            Direction::Egress => spec.egress.as_ref().is_some_and(|e| !e.is_empty()),
        },
    }
}

/// Whether `p` applies to `pod` (an absent `podSelector` is the empty one: every pod).
fn selects(p: &NetworkPolicy, spec: &NetworkPolicySpec, pod: &PodInfo<'_>) -> bool {
    let all = LabelSelector::default();
    p.metadata.namespace.as_deref() == Some(pod.namespace)
        && label_selector_matches(
            Some(spec.pod_selector.as_ref().unwrap_or(&all)),
            &pod.labels(),
        )
}

fn on_node(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

fn host(ip: Ipv4Addr) -> Ipv4Net {
    Ipv4Net::from(ip)
}

/// Pods with an IPv4 address of their own that are not finished, sorted by namespace and name.
fn peer_pods(pods: &[Pod]) -> Vec<PodInfo<'_>> {
    let mut out: Vec<PodInfo<'_>> = pods
        .iter()
        .filter_map(|pod| {
            let spec = pod.spec.as_ref()?;
            if spec.host_network == Some(true) {
                return None;
            }
            let status = pod.status.as_ref()?;
            if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
                return None;
            }
            let ip = status.pod_ip.as_deref()?.parse::<Ipv4Addr>().ok()?;
            Some(PodInfo {
                namespace: pod.metadata.namespace.as_deref()?,
                name: pod.metadata.name.as_deref()?,
                ip,
                pod,
            })
        })
        .collect();
    out.sort_by_key(|p| (p.namespace, p.name));
    out
}

/// Each namespace's labels, with `kubernetes.io/metadata.name` (which the API server sets)
/// also for namespaces of pods not (yet) seen.
fn namespace_labels(
    namespaces: &[Namespace],
    pods: &[PodInfo<'_>],
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for ns in namespaces {
        if let Some(name) = &ns.metadata.name {
            out.insert(name.clone(), ns.metadata.labels.clone().unwrap_or_default());
        }
    }
    for p in pods {
        out.entry(p.namespace.to_string()).or_default();
    }
    for (name, labels) in out.iter_mut() {
        labels
            .entry("kubernetes.io/metadata.name".to_string())
            .or_insert_with(|| name.clone());
    }
    out
}

/// The container port named `name` with `proto` in `pod`.
fn named_port(pod: &Pod, proto: &str, name: &str) -> Option<u16> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| {
            p.name.as_deref() == Some(name)
                && p.protocol
                    .as_deref()
                    .unwrap_or("TCP")
                    .eq_ignore_ascii_case(proto)
        })
        .and_then(|p| u16::try_from(p.container_port).ok())
}

fn dport(proto: &str, start: u16, end: u16) -> String {
    if start == end {
        format!("-p {proto} -m {proto} --dport {start}")
    } else {
        format!("-p {proto} -m {proto} --dport {start}:{end}")
    }
}

fn numeric_match(port: &PortSpec) -> Option<String> {
    match port {
        PortSpec::Any | PortSpec::Named(..) => None,
        PortSpec::Protocol(proto) => Some(format!("-p {proto}")),
        PortSpec::Numbers(proto, start, end) => Some(dport(proto, *start, *end)),
    }
}

fn pod_chain(pod: &PodInfo<'_>, dir: Direction) -> String {
    let (d, key) = match dir {
        Direction::Ingress => ("I", "ingress"),
        Direction::Egress => ("E", "egress"),
    };
    let uid = pod.pod.metadata.uid.as_deref().unwrap_or_default();
    format!(
        "{POD_CHAIN_PREFIX}{d}-{}",
        hash16(&format!("{}/{}/{uid}/{key}", pod.namespace, pod.name))
    )
}

/// The `iptables-restore --noflush` input for `plan`: its chains (replaced whole), and the
/// stale per-pod chains among `existing` (the `filter` chains present now) flushed and
/// deleted.
pub fn render(plan: &Plan, existing: &[String]) -> String {
    let wanted: HashSet<&str> = plan.chains.iter().map(|c| c.name.as_str()).collect();
    let stale: Vec<&String> = existing
        .iter()
        .filter(|c| c.starts_with(POD_CHAIN_PREFIX) && !wanted.contains(c.as_str()))
        .collect();
    let mut out = String::from("*filter\n");
    for c in &plan.chains {
        out.push_str(&format!(":{} - [0:0]\n", c.name));
    }
    for c in &stale {
        out.push_str(&format!(":{c} - [0:0]\n"));
    }
    for c in &plan.chains {
        for r in &c.rules {
            out.push_str(&format!("-A {} {r}\n", c.name));
        }
    }
    for c in &stale {
        out.push_str(&format!("-X {c}\n"));
    }
    out.push_str("COMMIT\n");
    out
}

/// The input that removes every chain of the enforcer among `existing` (after the jumps
/// into [`TOP`] are gone).
pub fn render_removal(existing: &[String]) -> String {
    let ours: Vec<&String> = existing
        .iter()
        .filter(|c| c.as_str() == TOP || c.starts_with(POD_CHAIN_PREFIX))
        .collect();
    let mut out = String::from("*filter\n");
    for c in &ours {
        out.push_str(&format!(":{c} - [0:0]\n"));
    }
    for c in &ours {
        out.push_str(&format!("-X {c}\n"));
    }
    out.push_str("COMMIT\n");
    out
}
