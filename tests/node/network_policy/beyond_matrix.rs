//! What the reachability matrix cannot show, on the same two nodes and pods:
//! - a TCP connection established before a policy denies it keeps flowing (conntrack, as
//!   Calico and kube-router enforce), while new connections are refused;
//! - DNS to the cluster DNS works for an egress-isolated pod only once an egress rule allows
//!   port 53, as upstream's semantics say (the cluster DNS is an ordinary destination);
//! - a hostNetwork pod selected by a deny-everything policy is untouched (its traffic is the
//!   node's);
//! - the enforcer's chains are gone from a node once its agent stops.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Target, PROBE_TIMEOUT};
use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::netns::run_inside;
use crate::common::two_node_lab::{A, A_IP};

/// How long a node may take to enforce a policy change.
const CONVERGE: Duration = Duration::from_secs(40);
/// A port the matrix does not use: x/a echoes on it.
const ECHO_PORT: u16 = 82;

fn pod<'a>(pods: &'a [Target], id: &str) -> &'a Target {
    pods.iter().find(|p| p.id() == id).unwrap()
}

fn apply(k: &Kubectl, policy: serde_json::Value) {
    k.ok_stdin(&["apply", "-f", "-"], Some(&policy.to_string()));
}

fn delete(k: &Kubectl, ns: &str, name: &str) {
    k.ok(&["delete", "networkpolicy", "-n", ns, name, "--wait=false"]);
}

/// An echo server on `ECHO_PORT` in `netns` (one thread per connection) until dropped.
struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start(netns: &Path) -> Echo {
        let listener = run_inside(netns, || {
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], ECHO_PORT))).unwrap()
        });
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        let s = s.clone();
                        std::thread::spawn(move || {
                            let _ = c.set_nonblocking(false);
                            let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                            let mut buf = [0u8; 64];
                            while !s.load(Ordering::Relaxed) {
                                match c.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(n) => {
                                        if c.write_all(&buf[..n]).is_err() {
                                            break;
                                        }
                                    }
                                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                                    Err(_) => break,
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Echo {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One echo round trip of `msg` on `c`.
fn round_trip(c: &mut TcpStream, msg: &[u8]) -> bool {
    let mut buf = [0u8; 64];
    c.write_all(msg).is_ok() && c.read(&mut buf).is_ok_and(|n| &buf[..n] == msg)
}

/// A new connection from `src` to `dst` on `ECHO_PORT` completes a round trip.
fn connects(src: &Target, dst: Ipv4Addr) -> bool {
    run_inside(&src.netns, || {
        TcpStream::connect_timeout(&SocketAddr::from((dst, ECHO_PORT)), PROBE_TIMEOUT).is_ok_and(
            |mut c| {
                let _ = c.set_read_timeout(Some(PROBE_TIMEOUT));
                round_trip(&mut c, b"new")
            },
        )
    })
}

/// y/b talks to x/a; a policy then isolates x/a for ingress with no rule. New connections
/// are refused, the established one goes on.
pub(super) fn established_connection_survives_a_deny(k: &Kubectl, pods: &[Target]) {
    let (dst, src) = (pod(pods, "x/a"), pod(pods, "y/b"));
    let _echo = Echo::start(&dst.netns);
    assert!(
        connects(src, dst.ip),
        "y/b reaches x/a:{ECHO_PORT} before any policy"
    );
    let mut open = run_inside(&src.netns, || {
        TcpStream::connect_timeout(&SocketAddr::from((dst.ip, ECHO_PORT)), PROBE_TIMEOUT)
            .expect("connect before the policy")
    });
    open.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
    assert!(round_trip(&mut open, b"before"));

    apply(
        k,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "isolate-a"},
            "spec": {"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress"]}}),
    );
    common::wait_for("new connections to x/a refused", CONVERGE, || {
        // Keep the established connection busy while the rules change under it.
        assert!(
            round_trip(&mut open, b"during"),
            "the established connection broke while the deny was applied"
        );
        (!connects(src, dst.ip)).then_some(())
    });
    for i in 0..5 {
        assert!(
            round_trip(&mut open, format!("after-{i}").as_bytes()),
            "the established connection stopped after the deny"
        );
    }
    delete(k, "x", "isolate-a");
    common::wait_for("x/a reachable again", CONVERGE, || {
        connects(src, dst.ip).then_some(())
    });
}

/// A DNS query for `name` (type A) to `server`:53 over UDP from inside `netns`; whether an
/// answer with at least one record came back.
fn resolves(netns: &Path, server: Ipv4Addr, name: &str) -> bool {
    let mut q = vec![0x4b, 0x33, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend(label.as_bytes());
    }
    q.extend([0, 0, 1, 0, 1]);
    run_inside(netns, || {
        let Ok(s) = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0))) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
        let mut buf = [0u8; 512];
        s.send_to(&q, SocketAddr::from((server, 53))).is_ok()
            && s.recv(&mut buf).is_ok_and(|n| {
                n >= 12
                    && buf[..2] == q[..2]
                    && buf[3] & 0x0f == 0
                    && u16::from_be_bytes([buf[6], buf[7]]) > 0
            })
    })
}

/// x/c is egress-isolated: its DNS queries fail until a rule allows port 53; other egress
/// stays denied.
pub(super) fn dns_only_when_an_egress_rule_allows_it(k: &Kubectl, pods: &[Target]) {
    let dns: Ipv4Addr = k
        .ok(&[
            "get",
            "service",
            "-n",
            "kube-system",
            "kube-dns",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .trim()
        .parse()
        .expect("kube-dns ClusterIP");
    let name = "kubernetes.default.svc.cluster.local";
    let c = pod(pods, "x/c");
    common::wait_for("x/c resolving names before any policy", CONVERGE, || {
        resolves(&c.netns, dns, name).then_some(())
    });
    apply(
        k,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "no-egress"},
            "spec": {"podSelector": {"matchLabels": {"pod": "c"}}, "policyTypes": ["Egress"]}}),
    );
    common::wait_for("DNS denied to the egress-isolated x/c", CONVERGE, || {
        (!resolves(&c.netns, dns, name)).then_some(())
    });
    apply(
        k,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "allow-dns"},
            "spec": {"podSelector": {"matchLabels": {"pod": "c"}}, "policyTypes": ["Egress"],
                "egress": [{"ports": [{"protocol": "UDP", "port": 53},
                                      {"protocol": "TCP", "port": 53}]}]}}),
    );
    common::wait_for("DNS allowed by the egress rule", CONVERGE, || {
        resolves(&c.netns, dns, name).then_some(())
    });
    let a = pod(pods, "x/a");
    assert!(
        !run_inside(&c.netns, || super::probe(a.ip, 80, "TCP")),
        "only DNS is allowed: x/c must not reach x/a:80"
    );
    delete(k, "x", "allow-dns");
    delete(k, "x", "no-egress");
}

/// The filter table of the network namespace `netns`, as `iptables-save` prints it.
fn filter_table(netns: &Path) -> String {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(["iptables-save", "-t", "filter"])
        .output()
        .expect("iptables-save");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has_pod_chains(rules: &str) -> bool {
    rules.contains(":KUBE-NP-")
}

/// With x/b (on node B) isolated, B holds a per-pod chain; once B's agent is stopped by
/// `stop`, none of the enforcer's chains remain there.
pub(super) fn chains_removed_when_the_agent_stops(
    k: &Kubectl,
    b_netns: &Path,
    stop: impl FnOnce(),
) {
    apply(
        k,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "isolate-b"},
            "spec": {"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Ingress"]}}),
    );
    common::wait_for("x/b's chain on node B", CONVERGE, || {
        has_pod_chains(&filter_table(b_netns)).then_some(())
    });
    stop();
    let rules = filter_table(b_netns);
    assert!(
        !rules.contains("KUBE-NWPLCY") && !has_pod_chains(&rules),
        "node B's policy chains remain after its agent stopped:\n{rules}"
    );
}

/// A hostNetwork pod in `x` is selected by a deny-everything policy of `x` and stays
/// untouched: its traffic is the node's. The test thread runs in node A's network namespace,
/// which is that pod's network, so it serves and probes as the pod would. The same policy
/// isolates x/a, which shows it is enforced.
pub(super) fn host_network_pods_are_untouched(k: &Kubectl, pods: &[Target]) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": "x", "name": "h", "labels": {"pod": "h"}},
                "spec": {"hostNetwork": true, "terminationGracePeriodSeconds": 1,
                    "nodeSelector": {"kubernetes.io/hostname": A},
                    "containers": [{"name": "c", "image": "docker.io/library/busybox:1.35",
                                    "command": ["sleep", "7349999"]}]}})
            .to_string(),
        ),
    );
    common::wait_for("the hostNetwork pod running", CONVERGE, || {
        let phase = k.ok(&[
            "get",
            "pod",
            "-n",
            "x",
            "h",
            "-o",
            "jsonpath={.status.phase}",
        ]);
        (phase.trim() == "Running").then_some(())
    });
    let listener = TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], HOST_PORT))).unwrap();
    listener.set_nonblocking(true).unwrap();
    let served = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (served, stop) = (served.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.write_all(b"ok");
                        served.store(true, Ordering::Relaxed);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    apply(
        k,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "deny-all"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}),
    );
    let (a, yb) = (pod(pods, "x/a"), pod(pods, "y/b"));
    common::wait_for("x/a isolated by deny-all", CONVERGE, || {
        (!run_inside(&yb.netns, || super::probe(a.ip, 80, "TCP"))).then_some(())
    });
    let node_ip: Ipv4Addr = A_IP.parse().unwrap();
    // Into the hostNetwork pod (the node's address) and out of it (to a pod), both allowed.
    for _ in 0..3 {
        assert!(
            run_inside(&yb.netns, || super::probe(node_ip, HOST_PORT, "TCP")),
            "y/b could not reach the hostNetwork pod x/h under x's deny-all"
        );
        assert!(
            super::probe(yb.ip, 80, "TCP"),
            "the hostNetwork pod x/h could not reach y/b under x's deny-all"
        );
    }
    assert!(served.load(Ordering::Relaxed));
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    delete(k, "x", "deny-all");
    k.ok(&["delete", "pod", "-n", "x", "h", "--wait=false"]);
}

/// The port the "hostNetwork pod" serves on in node A's network namespace.
const HOST_PORT: u16 = 8383;
