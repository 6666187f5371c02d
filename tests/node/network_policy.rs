//! NetworkPolicy enforcement, as a truth table in the style of upstream's network-policy e2e
//! matrix: nine pods (`a`, `b`, `c` in namespaces `x`, `y`, `z`) spread over two real nodes
//! (the server's and a joined agent, see `common::two_node_lab`), each serving TCP and UDP on
//! ports 80 and 81. After each policy change every pod probes every pod on all four, and the
//! whole reachability matrix must equal the one an independent model in this file computes
//! from the same policies (not the agent's planner).
//!
//! The servers and probes are the test's own sockets, opened on threads that entered the
//! pods' network namespaces (found through each pod's `sleep <marker>` process): busybox's
//! `nc` in the test image has no UDP. Probes are bounded (1 s each, all in parallel); a matrix
//! is retried for up to 40 s while the nodes catch up with a change.
//!
//! As root, with the images of `scripts/build-images.sh`; missing prerequisites fail the test.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use serde_json::{json, Value};

use crate::common;
use crate::common::kubectl::{json as kjson, Kubectl};
use crate::common::netns::run_inside;
use crate::common::two_node_lab::{TwoNodeLab, TwoNodes, A, B};

mod beyond_matrix;

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
const PORTS: [u16; 2] = [80, 81];
const PROTOCOLS: [&str; 2] = ["TCP", "UDP"];

/// One pod of the matrix.
#[derive(Debug, Clone)]
struct Target {
    ns: &'static str,
    name: &'static str,
    ip: Ipv4Addr,
    netns: PathBuf,
}

impl Target {
    fn id(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }
}

// ---------------------------------------------------------------- the model

/// A pod selector of the model: every pod, or pods whose `pod` label is (not) in a set.
#[derive(Debug, Clone)]
enum Sel {
    All,
    In(&'static [&'static str]),
    NotIn(&'static [&'static str]),
}

#[derive(Debug, Clone)]
enum Peer {
    /// Pods of the policy's namespace.
    Pods(Sel),
    /// Every pod of the namespaces whose `ns` label is in the set (`None`: all namespaces).
    Namespaces(Option<&'static [&'static str]>),
    /// Pods matching both.
    Both(Option<&'static [&'static str]>, Sel),
    Block(Ipv4Net, Vec<Ipv4Net>),
}

#[derive(Debug, Clone)]
enum PortRef {
    Any,
    Number(u16, Option<u16>),
    Name(&'static str),
}

#[derive(Debug, Clone)]
struct Port(&'static str, PortRef);

#[derive(Debug, Clone, Default)]
struct Rule {
    peers: Vec<Peer>,
    ports: Vec<Port>,
}

#[derive(Debug, Clone)]
struct Policy {
    ns: &'static str,
    name: &'static str,
    select: Sel,
    /// `policyTypes`; `None`: not given.
    types: Option<&'static [&'static str]>,
    ingress: Option<Vec<Rule>>,
    egress: Option<Vec<Rule>>,
}

fn pol(ns: &'static str, name: &'static str, select: Sel) -> Policy {
    Policy {
        ns,
        name,
        select,
        types: None,
        ingress: None,
        egress: None,
    }
}

impl Policy {
    fn types(mut self, t: &'static [&'static str]) -> Policy {
        self.types = Some(t);
        self
    }
    fn ingress(mut self, r: Vec<Rule>) -> Policy {
        self.ingress = Some(r);
        self
    }
    fn egress(mut self, r: Vec<Rule>) -> Policy {
        self.egress = Some(r);
        self
    }
}

fn rule(peers: Vec<Peer>, ports: Vec<Port>) -> Rule {
    Rule { peers, ports }
}

fn sel_matches(sel: &Sel, pod: &str) -> bool {
    match sel {
        Sel::All => true,
        Sel::In(set) => set.contains(&pod),
        Sel::NotIn(set) => !set.contains(&pod),
    }
}

/// The port name each pod gives `port`/`proto` (every pod has the same four).
fn port_name(port: u16, proto: &str) -> String {
    format!("serve-{port}-{}", proto.to_lowercase())
}

fn peer_matches(p: &Policy, peer: &Peer, other: &Target) -> bool {
    let ns_in = |set: &Option<&[&str]>| set.is_none_or(|s| s.contains(&other.ns));
    match peer {
        Peer::Pods(sel) => other.ns == p.ns && sel_matches(sel, other.name),
        Peer::Namespaces(set) => ns_in(set),
        Peer::Both(set, sel) => ns_in(set) && sel_matches(sel, other.name),
        Peer::Block(net, except) => {
            net.contains(&other.ip) && !except.iter().any(|e| e.contains(&other.ip))
        }
    }
}

fn port_matches(ports: &[Port], port: u16, proto: &str) -> bool {
    ports.is_empty()
        || ports.iter().any(|Port(pr, r)| {
            *pr == proto
                && match r {
                    PortRef::Any => true,
                    PortRef::Number(n, end) => (*n..=end.unwrap_or(*n)).contains(&port),
                    PortRef::Name(name) => *name == port_name(port, proto),
                }
        })
}

fn has_type(p: &Policy, t: &str) -> bool {
    match p.types {
        Some(types) => types.contains(&t),
        None => t == "Ingress" || p.egress.as_ref().is_some_and(|e| !e.is_empty()),
    }
}

/// Whether `subject` may talk to `other` in direction `t` (`Ingress`: `other` is the source).
fn direction_allows(
    policies: &[Policy],
    t: &str,
    subject: &Target,
    other: &Target,
    port: u16,
    proto: &str,
) -> bool {
    let selecting: Vec<&Policy> = policies
        .iter()
        .filter(|p| p.ns == subject.ns && sel_matches(&p.select, subject.name) && has_type(p, t))
        .collect();
    selecting.is_empty()
        || selecting.iter().any(|p| {
            let rules = if t == "Ingress" {
                &p.ingress
            } else {
                &p.egress
            };
            rules.iter().flatten().any(|r| {
                (r.peers.is_empty() || r.peers.iter().any(|peer| peer_matches(p, peer, other)))
                    && port_matches(&r.ports, port, proto)
            })
        })
}

fn expected(policies: &[Policy], pods: &[Target]) -> Matrix {
    let mut m = Matrix::new();
    for src in pods {
        for dst in pods {
            for port in PORTS {
                for proto in PROTOCOLS {
                    let ok = src.id() == dst.id()
                        || (direction_allows(policies, "Egress", src, dst, port, proto)
                            && direction_allows(policies, "Ingress", dst, src, port, proto));
                    m.insert((src.id(), dst.id(), port, proto), ok);
                }
            }
        }
    }
    m
}

// ---------------------------------------------------------------- policies as the API takes them

fn sel_json(sel: &Sel) -> Value {
    match sel {
        Sel::All => json!({}),
        Sel::In(v) => json!({"matchExpressions": [{"key": "pod", "operator": "In", "values": v}]}),
        Sel::NotIn(v) => {
            json!({"matchExpressions": [{"key": "pod", "operator": "NotIn", "values": v}]})
        }
    }
}

fn ns_json(set: &Option<&[&str]>) -> Value {
    match set {
        None => json!({}),
        Some(v) => json!({"matchExpressions": [{"key": "ns", "operator": "In", "values": v}]}),
    }
}

fn rule_json(r: &Rule, peers_key: &str) -> Value {
    let peers: Vec<Value> = r
        .peers
        .iter()
        .map(|p| match p {
            Peer::Pods(s) => json!({"podSelector": sel_json(s)}),
            Peer::Namespaces(n) => json!({"namespaceSelector": ns_json(n)}),
            Peer::Both(n, s) => {
                json!({"namespaceSelector": ns_json(n), "podSelector": sel_json(s)})
            }
            Peer::Block(net, except) => json!({"ipBlock": {
                "cidr": net.to_string(),
                "except": except.iter().map(|e| e.to_string()).collect::<Vec<_>>()}}),
        })
        .collect();
    let ports: Vec<Value> = r
        .ports
        .iter()
        .map(|Port(proto, r)| match r {
            PortRef::Any => json!({"protocol": proto}),
            PortRef::Number(n, None) => json!({"protocol": proto, "port": n}),
            PortRef::Number(n, Some(e)) => json!({"protocol": proto, "port": n, "endPort": e}),
            PortRef::Name(name) => json!({"protocol": proto, "port": name}),
        })
        .collect();
    let mut v = json!({});
    if !peers.is_empty() {
        v[peers_key] = json!(peers);
    }
    if !ports.is_empty() {
        v["ports"] = json!(ports);
    }
    v
}

fn policy_json(p: &Policy) -> Value {
    let mut spec = json!({"podSelector": sel_json(&p.select)});
    if let Some(t) = p.types {
        spec["policyTypes"] = json!(t);
    }
    if let Some(i) = &p.ingress {
        spec["ingress"] = Value::Array(i.iter().map(|r| rule_json(r, "from")).collect());
    }
    if let Some(e) = &p.egress {
        spec["egress"] = Value::Array(e.iter().map(|r| rule_json(r, "to")).collect());
    }
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": p.ns, "name": p.name}, "spec": spec})
}

// ---------------------------------------------------------------- the cases

fn cases(ip: &dyn Fn(&str) -> Ipv4Addr, cluster: Ipv4Net) -> Vec<(&'static str, Vec<Policy>)> {
    let host = |id: &str| Ipv4Net::from(ip(id));
    let tcp = |n| Port("TCP", PortRef::Number(n, None));
    let all_ns = Peer::Namespaces(None);
    let deny_x = pol("x", "deny-all", Sel::All).types(&["Ingress"]);
    vec![
        ("no policies", vec![]),
        ("x: default deny ingress", vec![deny_x.clone()]),
        (
            "x: deny, but from x's own pods",
            vec![
                deny_x.clone(),
                pol("x", "own", Sel::All).ingress(vec![rule(vec![Peer::Pods(Sel::All)], vec![])]),
            ],
        ),
        (
            "x/a: from namespace y",
            vec![pol("x", "from-y", Sel::In(&["a"]))
                .ingress(vec![rule(vec![Peer::Namespaces(Some(&["y"]))], vec![])])],
        ),
        (
            "x/a: from y's b pods (both selectors)",
            vec![pol("x", "y-b", Sel::In(&["a"])).ingress(vec![rule(
                vec![Peer::Both(Some(&["y"]), Sel::In(&["b"]))],
                vec![],
            )])],
        ),
        (
            "x/a: from b pods anywhere",
            vec![pol("x", "any-b", Sel::In(&["a"]))
                .ingress(vec![rule(vec![Peer::Both(None, Sel::In(&["b"]))], vec![])])],
        ),
        (
            "x/a: from x/b or namespace z (two peers)",
            vec![pol("x", "or", Sel::In(&["a"])).ingress(vec![rule(
                vec![Peer::Pods(Sel::In(&["b"])), Peer::Namespaces(Some(&["z"]))],
                vec![],
            )])],
        ),
        (
            "x/a: TCP 80 only",
            vec![pol("x", "tcp80", Sel::In(&["a"])).ingress(vec![rule(vec![], vec![tcp(80)])])],
        ),
        (
            "x/a: UDP 81 from all namespaces",
            vec![pol("x", "udp81", Sel::In(&["a"])).ingress(vec![rule(
                vec![all_ns.clone()],
                vec![Port("UDP", PortRef::Number(81, None))],
            )])],
        ),
        (
            "x/a: named port serve-81-tcp",
            vec![pol("x", "named", Sel::In(&["a"])).ingress(vec![rule(
                vec![],
                vec![Port("TCP", PortRef::Name("serve-81-tcp"))],
            )])],
        ),
        (
            "x/b: TCP 80-81 (endPort) from z",
            vec![pol("x", "range", Sel::In(&["b"])).ingress(vec![rule(
                vec![Peer::Namespaces(Some(&["z"]))],
                vec![Port("TCP", PortRef::Number(80, Some(81)))],
            )])],
        ),
        (
            "x/b: any UDP port",
            vec![pol("x", "udp", Sel::In(&["b"]))
                .ingress(vec![rule(vec![], vec![Port("UDP", PortRef::Any)])])],
        ),
        (
            "x/a: ipBlock of the cluster except y/b",
            vec![pol("x", "block", Sel::In(&["a"])).ingress(vec![rule(
                vec![Peer::Block(cluster, vec![host("y/b")])],
                vec![],
            )])],
        ),
        (
            "x: ipBlock of z/c only",
            vec![pol("x", "one-ip", Sel::All)
                .ingress(vec![rule(vec![Peer::Block(host("z/c"), vec![])], vec![])])],
        ),
        (
            "y: default deny egress",
            vec![pol("y", "deny-egress", Sel::All).types(&["Egress"])],
        ),
        (
            "y: egress to namespace x on TCP 80",
            vec![pol("y", "to-x", Sel::All).egress(vec![rule(
                vec![Peer::Namespaces(Some(&["x"]))],
                vec![tcp(80)],
            )])],
        ),
        (
            "y/a: egress to c pods on named port serve-80-udp",
            vec![pol("y", "to-c", Sel::In(&["a"])).egress(vec![rule(
                vec![Peer::Both(None, Sel::In(&["c"]))],
                vec![Port("UDP", PortRef::Name("serve-80-udp"))],
            )])],
        ),
        (
            "y/b: egress to the cluster except x's a on 81",
            vec![pol("y", "egress-block", Sel::In(&["b"])).egress(vec![rule(
                vec![Peer::Block(cluster, vec![host("x/a")])],
                vec![tcp(81), Port("UDP", PortRef::Number(81, None))],
            )])],
        ),
        (
            "x: deny both ways except to and from z",
            vec![pol("x", "only-z", Sel::All)
                .types(&["Ingress", "Egress"])
                .ingress(vec![rule(vec![Peer::Namespaces(Some(&["z"]))], vec![])])
                .egress(vec![rule(vec![Peer::Namespaces(Some(&["z"]))], vec![])])],
        ),
        (
            "z: deny ingress to pods not labelled a",
            vec![pol("z", "not-a", Sel::NotIn(&["a"])).types(&["Ingress"])],
        ),
        (
            "x/a: policies add up (y on 80, z on 81)",
            vec![
                pol("x", "y80", Sel::In(&["a"])).ingress(vec![rule(
                    vec![Peer::Namespaces(Some(&["y"]))],
                    vec![tcp(80)],
                )]),
                pol("x", "z81", Sel::In(&["a"])).ingress(vec![rule(
                    vec![Peer::Namespaces(Some(&["z"]))],
                    vec![tcp(81)],
                )]),
            ],
        ),
        (
            "x/b: SCTP only (denied for TCP and UDP)",
            vec![pol("x", "sctp", Sel::In(&["b"])).ingress(vec![rule(
                vec![],
                vec![Port("SCTP", PortRef::Number(80, None))],
            )])],
        ),
        (
            "x: deny all plus allow all ingress",
            vec![
                deny_x,
                pol("x", "allow-all", Sel::All).ingress(vec![Rule::default()]),
            ],
        ),
        (
            "everything: deny ingress and egress in all three namespaces",
            NAMESPACES
                .iter()
                .map(|&ns| pol(ns, "lockdown", Sel::All).types(&["Ingress", "Egress"]))
                .collect(),
        ),
        ("all removed again", vec![]),
    ]
}

// ---------------------------------------------------------------- servers and probes

type Matrix = BTreeMap<(String, String, u16, &'static str), bool>;

/// The grid upstream prints: one row per source, one column per destination, each cell four
/// marks (80/TCP, 81/TCP, 80/UDP, 81/UDP): `.` reachable, `X` not.
fn grid(m: &Matrix, pods: &[Target]) -> String {
    let mut out = String::from("       ");
    for d in pods {
        out.push_str(&format!(" {:<5}", d.id()));
    }
    out.push('\n');
    for s in pods {
        out.push_str(&format!("{:<7}", s.id()));
        for d in pods {
            out.push(' ');
            for proto in PROTOCOLS {
                for port in PORTS {
                    let ok = m
                        .get(&(s.id(), d.id(), port, proto))
                        .copied()
                        .unwrap_or(false);
                    out.push(if ok { '.' } else { 'X' });
                }
            }
            out.push(' ');
        }
        out.push('\n');
    }
    out
}

/// TCP and UDP servers on 80 and 81 in each pod's network namespace, answering `ok`; stopped
/// and joined on drop.
struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Servers {
    fn start(pods: &[Target]) -> Servers {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for pod in pods {
            for port in PORTS {
                let (tcp, udp) = run_inside(&pod.netns, || {
                    let addr = SocketAddr::from(([0, 0, 0, 0], port));
                    (
                        TcpListener::bind(addr).unwrap(),
                        UdpSocket::bind(addr).unwrap(),
                    )
                });
                tcp.set_nonblocking(true).unwrap();
                udp.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let s = stop.clone();
                threads.push(std::thread::spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        match tcp.accept() {
                            Ok((mut c, _)) => {
                                let _ = c.write_all(b"ok");
                            }
                            Err(_) => std::thread::sleep(Duration::from_millis(10)),
                        }
                    }
                }));
                let s = stop.clone();
                threads.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    while !s.load(Ordering::Relaxed) {
                        if let Ok((_, from)) = udp.recv_from(&mut buf) {
                            let _ = udp.send_to(b"ok", from);
                        }
                    }
                }));
            }
        }
        Servers { stop, threads }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

fn probe(dst: Ipv4Addr, port: u16, proto: &str) -> bool {
    let addr = SocketAddr::from((dst, port));
    let mut buf = [0u8; 8];
    if proto == "TCP" {
        let Ok(mut c) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(PROBE_TIMEOUT));
        c.read(&mut buf).is_ok_and(|n| &buf[..n] == b"ok")
    } else {
        let Ok(s) = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0))) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
        s.send_to(b"p", addr).is_ok() && s.recv(&mut buf).is_ok_and(|n| &buf[..n] == b"ok")
    }
}

/// Every pod probes every pod on both ports over TCP and UDP, all at once.
fn probe_all(pods: &[Target]) -> Matrix {
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for src in pods {
            for dst in pods {
                for port in PORTS {
                    for proto in PROTOCOLS {
                        let key = (src.id(), dst.id(), port, proto);
                        let (netns, ip) = (&src.netns, dst.ip);
                        handles
                            .push(scope.spawn(move || {
                                (key, run_inside(netns, || probe(ip, port, proto)))
                            }));
                    }
                }
            }
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

// ---------------------------------------------------------------- the scenario

fn marker(i: usize) -> String {
    (7_340_000 + i).to_string()
}

fn manifests() -> String {
    let mut docs = Vec::new();
    for (n, ns) in NAMESPACES.iter().enumerate() {
        docs.push(json!({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": ns, "labels": {"ns": ns}}}));
        for (p, name) in PODS.iter().enumerate() {
            let node = if (n + p) % 2 == 0 { A } else { B };
            let ports: Vec<Value> = PORTS
                .iter()
                .flat_map(|port| PROTOCOLS.iter().map(move |proto| (*port, *proto)))
                .map(|(port, proto)| json!({"name": port_name(port, proto), "containerPort": port, "protocol": proto}))
                .collect();
            docs.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": ns, "name": name, "labels": {"pod": name}},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": "docker.io/library/busybox:1.35",
                                         "command": ["sleep", marker(n * 3 + p)], "ports": ports}]}}));
        }
    }
    docs.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The network namespace of the process running `sleep <marker>`.
fn netns_of(marker: &str) -> Option<PathBuf> {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        (cmdline == want.as_bytes()).then(|| e.path().join("ns/net"))
    })
}

fn targets(k: &Kubectl) -> Vec<Target> {
    let mut out = Vec::new();
    for (n, &ns) in NAMESPACES.iter().enumerate() {
        for (p, &name) in PODS.iter().enumerate() {
            let pod = kjson(k, &["get", "pod", "-n", ns, name, "-o", "json"]);
            let ip: Ipv4Addr = pod["status"]["podIP"].as_str().unwrap().parse().unwrap();
            let netns = common::wait_for(
                &format!("{ns}/{name}'s process"),
                Duration::from_secs(30),
                || netns_of(&marker(n * 3 + p)),
            );
            out.push(Target {
                ns,
                name,
                ip,
                netns,
            });
        }
    }
    out
}

fn apply(k: &Kubectl, before: &[Policy], now: &[Policy]) {
    for old in before {
        if !now.iter().any(|p| p.ns == old.ns && p.name == old.name) {
            k.ok(&[
                "delete",
                "networkpolicy",
                "-n",
                old.ns,
                old.name,
                "--wait=false",
            ]);
        }
    }
    for p in now {
        k.ok_stdin(&["apply", "-f", "-"], Some(&policy_json(p).to_string()));
    }
}

#[test]
fn network_policy_truth_table_across_two_nodes() {
    let lab = TwoNodeLab::new("np");
    lab.a.inside(|| scenario(&lab));
}

fn scenario(lab: &TwoNodeLab) {
    let TwoNodes {
        mut server,
        k,
        mut agent,
        node_a,
        ..
    } = lab.start(&[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&manifests()));
    common::wait_for("the nine pods running", Duration::from_secs(180), || {
        server.assert_running();
        agent.assert_running();
        let pods = kjson(&k, &["get", "pods", "-A", "-l", "pod", "-o", "json"]);
        let running = pods["items"]
            .as_array()?
            .iter()
            .filter(|p| p["status"]["phase"] == "Running" && p["status"]["podIP"].is_string())
            .count();
        (running == 9).then_some(())
    });
    let pods = targets(&k);
    let _servers = Servers::start(&pods);
    let cidr_a: Ipv4Net = node_a["spec"]["podCIDR"].as_str().unwrap().parse().unwrap();
    let cluster = Ipv4Net::new(cidr_a.network(), 16).unwrap().trunc();
    let ip_of = |id: &str| pods.iter().find(|p| p.id() == id).unwrap().ip;
    let mut before: Vec<Policy> = Vec::new();
    let all = cases(&ip_of, cluster);
    assert!(all.len() >= 20, "at least 20 policy cases");
    for (name, policies) in all {
        apply(&k, &before, &policies);
        let want = expected(&policies, &pods);
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut got = probe_all(&pods);
        while got != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            got = probe_all(&pods);
        }
        assert!(
            got == want,
            "case {name:?}: reachability differs\nexpected:\n{}\ngot:\n{}",
            grid(&want, &pods),
            grid(&got, &pods)
        );
        eprintln!("case {name:?}: matrix as expected");
        if name.contains("SCTP") {
            sctp_reported(&k);
        }
        before = policies;
    }
    apply(&k, &before, &[]);
    beyond_matrix::established_connection_survives_a_deny(&k, &pods);
    beyond_matrix::dns_only_when_an_egress_rule_allows_it(&k, &pods);
    beyond_matrix::host_network_pods_are_untouched(&k, &pods);
    beyond_matrix::chains_removed_when_the_agent_stops(&k, &lab.b.netns_path(), || {
        agent.terminate(Duration::from_secs(20));
    });
}

/// An SCTP port on a kernel without SCTP is reported on the policy (and enforced as denied,
/// which the matrix checked); with SCTP, nothing is reported.
fn sctp_reported(k: &Kubectl) {
    let has_sctp = std::path::Path::new("/proc/sys/net/sctp").exists()
        || std::fs::read_to_string("/proc/net/protocols")
            .is_ok_and(|p| p.lines().any(|l| l.starts_with("SCTP")));
    let events = || {
        let ev = kjson(k, &["get", "events", "-n", "x", "-o", "json"]);
        ev["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["involvedObject"]["name"] == "sctp" && e["reason"] == "UnsupportedProtocol"
            })
            .count()
    };
    if has_sctp {
        assert_eq!(events(), 0, "a kernel with SCTP enforces SCTP ports");
    } else {
        common::wait_for(
            "the UnsupportedProtocol event",
            Duration::from_secs(20),
            || (events() > 0).then_some(()),
        );
    }
}
