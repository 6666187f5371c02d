//! End-to-end: the agent's service proxy in iptables mode, in network namespaces the test
//! makes (nothing routed out of the machine). A node namespace holds a bridge (`10.214.0.1`,
//! the node IP), a real `k3rs server` and a real `k3rs agent` joined by token with no
//! container runtime (the node stays NotReady; the proxy runs anyway). Three backend
//! namespaces on the bridge each run `busybox httpd` serving their own name. A selectorless
//! NodePort Service with a hand-made EndpointSlice listing the backends is created with
//! `kubectl`. Checked: `iptables-save` in the node namespace shows upstream's chains (names
//! hashed as upstream); the ClusterIP reaches every backend; the NodePort answers on the node
//! IP, from the node and from a client namespace on another link; a backend marked not ready is no longer
//! chosen; sessionAffinity ClientIP sticks; deleting the Service removes its chains.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::kubectl::{json, Kubectl};
use crate::common::process::{run_with_timeout, ChildGuard};
use crate::common::{self, require_program, wait_for};

/// The node's bridge address (the node IP) and the backends' (`.11`, `.12`, `.13`).
const NODE_IP: &str = "10.214.0.1";
const BACKENDS: [&str; 3] = ["10.214.0.11", "10.214.0.12", "10.214.0.13"];
/// `base32(sha256("default/web:httptcp"))[:16]` and of each `…10.214.0.1x:8080`, computed
/// independently of k3rs.
const SVC_CHAIN: &str = "KUBE-SVC-CDGGSHYLG3RE2FKL";
const SEP_CHAINS: [&str; 3] = [
    "KUBE-SEP-PHQPN4NNMRFG3PCF",
    "KUBE-SEP-NRSPZN4KFXMUTJ5K",
    "KUBE-SEP-BH33IZ73ZRN5VVB5",
];

fn ip(args: &[&str]) {
    let out = Command::new(require_program("ip", "iproute2"))
        .args(args)
        .output()
        .expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The node namespace, three backend namespaces on its bridge and a client namespace on a
/// link of its own (`10.215.0.2`, like a machine outside the node); deleted (with their
/// veths) on drop.
struct Net {
    node: String,
    backends: Vec<String>,
    client: String,
}

impl Net {
    fn new() -> Net {
        let prefix = format!("{}-px", common::netns::unique_prefix());
        let net = Net {
            node: format!("{prefix}-node"),
            backends: (1..=3).map(|i| format!("{prefix}-b{i}")).collect(),
            client: format!("{prefix}-c"),
        };
        let node = net.node.as_str();
        ip(&["netns", "add", node]);
        ip(&["-n", node, "link", "set", "lo", "up"]);
        ip(&["-n", node, "link", "add", "br0", "type", "bridge"]);
        ip(&[
            "-n",
            node,
            "addr",
            "add",
            &format!("{NODE_IP}/24"),
            "dev",
            "br0",
        ]);
        ip(&["-n", node, "link", "set", "br0", "up"]);
        // Cluster IPs are routed onto the bridge (as a node's default route would): the
        // proxy's DNAT picks the real destination.
        ip(&["-n", node, "route", "add", "10.43.0.0/16", "dev", "br0"]);
        for (i, b) in net.backends.iter().enumerate() {
            let veth = format!("vb{}", i + 1);
            ip(&["netns", "add", b]);
            ip(&["-n", b, "link", "set", "lo", "up"]);
            ip(&[
                "-n", node, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                b,
            ]);
            ip(&["-n", node, "link", "set", &veth, "master", "br0", "up"]);
            ip(&[
                "-n",
                b,
                "addr",
                "add",
                &format!("{}/24", BACKENDS[i]),
                "dev",
                "eth0",
            ]);
            ip(&["-n", b, "link", "set", "eth0", "up"]);
            ip(&["-n", b, "route", "add", "default", "via", NODE_IP]);
        }
        let client = net.client.as_str();
        ip(&["netns", "add", client]);
        ip(&["-n", client, "link", "set", "lo", "up"]);
        ip(&[
            "-n", node, "link", "add", "vc", "type", "veth", "peer", "name", "eth0", "netns",
            client,
        ]);
        ip(&["-n", node, "addr", "add", "10.215.0.1/24", "dev", "vc"]);
        ip(&["-n", node, "link", "set", "vc", "up"]);
        ip(&["-n", client, "addr", "add", "10.215.0.2/24", "dev", "eth0"]);
        ip(&["-n", client, "link", "set", "eth0", "up"]);
        ip(&["-n", client, "route", "add", "default", "via", "10.215.0.1"]);
        // NodePort traffic from the client is forwarded by the node.
        let out = net
            .nsenter(node, "sysctl")
            .args(["-w", "net.ipv4.ip_forward=1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        net
    }

    /// `program` run inside namespace `ns` through `nsenter --net`.
    fn nsenter(&self, ns: &str, program: &str) -> Command {
        let mut cmd = Command::new(require_program("nsenter", "util-linux"));
        cmd.arg(format!("--net=/run/netns/{ns}")).arg(program);
        cmd
    }

    /// Runs `f` on a thread inside the node namespace: the server, agent, kubectl and curl it
    /// starts live there.
    fn in_node<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        common::netns::run_inside(Path::new(&format!("/run/netns/{}", self.node)), f)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.backends.iter().chain([&self.client, &self.node]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// `iptables-save -t TABLE` in the current thread's namespace.
fn iptables_save(table: &str) -> String {
    let mut cmd = Command::new(require_program("iptables-save", "iptables"));
    cmd.args(["-t", table]);
    let (code, out, err) = run_with_timeout(cmd, None, Duration::from_secs(20));
    assert_eq!(code, Some(0), "iptables-save: {err}");
    out
}

/// One HTTP GET with curl (2 s bound); the body, or `None` if it failed.
fn curl(cmd: Command) -> Option<String> {
    let (code, out, _) = run_with_timeout(cmd, None, Duration::from_secs(10));
    (code == Some(0)).then(|| out.trim().to_string())
}

fn curl_cmd(url: &str) -> Command {
    let mut cmd = Command::new(require_program("curl", "curl"));
    cmd.args(["-s", "--max-time", "2", url]);
    cmd
}

/// The backends answering `tries` GETs of `url`.
fn answers(url: &str, tries: usize) -> Vec<String> {
    (0..tries)
        .map(|_| curl(curl_cmd(url)).unwrap_or_else(|| panic!("GET {url} failed")))
        .collect()
}

fn slice(ready: [bool; 3]) -> String {
    let endpoints: Vec<serde_json::Value> = BACKENDS
        .iter()
        .zip(ready)
        .map(|(ip, ready)| {
            serde_json::json!({"addresses": [ip], "conditions": {"ready": ready}, "nodeName": "proxy-node"})
        })
        .collect();
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-manual", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
    .to_string()
}

fn start_backends(net: &Net, dir: &Path) -> Vec<ChildGuard> {
    let busybox = require_program("busybox", "busybox").display().to_string();
    net.backends
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            let root = dir.join(format!("www{}", i + 1));
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("index.html"), format!("b{}\n", i + 1)).unwrap();
            let mut cmd = net.nsenter(ns, &busybox);
            cmd.args(["httpd", "-f", "-p", "8080", "-h"]).arg(&root);
            ChildGuard::spawn(
                &format!("httpd b{}", i + 1),
                cmd,
                &dir.join(format!("httpd{}.log", i + 1)),
            )
        })
        .collect()
}

#[test]
fn the_proxy_programs_iptables_for_services() {
    let net = Net::new();
    let work = tempfile::tempdir().unwrap();
    let mut backends = start_backends(&net, work.path());
    net.in_node(|| {
        let (server, k) = Kubectl::start_server(&["--disable-agent"]);
        let token = std::fs::read_to_string(server.data_dir().join("server/agent-token"))
            .unwrap()
            .trim()
            .to_string();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
        cmd.arg("agent")
            .args(["--server", &server.server_url(), "--token", &token])
            .arg("--data-dir")
            .arg(work.path().join("agent"))
            .args(["--node-name", "proxy-node", "--node-ip", NODE_IP])
            .args(["--container-runtime-endpoint", "unix:///nonexistent"])
            .env("K3RS_CONFIG_FILE", "/dev/null")
            .env_remove("K3RS_TOKEN")
            .env_remove("K3RS_URL")
            .env("K3RS_LOG", "info,k3rs_agent=debug");
        let mut agent = ChildGuard::spawn("k3rs agent", cmd, &work.path().join("agent.log"));

        // Before any Service of ours: the jumps and top-level chains are there.
        let first = [
            "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
            "-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
            "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
            "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
            "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully",
        ];
        let mut nat = String::new();
        let mut synced = false;
        for _ in 0..600 {
            agent.assert_running();
            nat = iptables_save("nat");
            if first.iter().all(|want| nat.contains(want)) {
                synced = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(synced, "no first sync within 60 s; nat table:\n{nat}");
        let filter = iptables_save("filter");
        assert!(
            filter.contains("-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD"),
            "{filter}"
        );

        // A selectorless NodePort Service and its EndpointSlice.
        k.ok_stdin(
            &["apply", "-f", "-"],
            Some(
                &serde_json::json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"type": "NodePort",
                             "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
                })
                .to_string(),
            ),
        );
        k.ok_stdin(&["apply", "-f", "-"], Some(&slice([true, true, true])));
        let svc = json(&k, &["get", "service", "web"]);
        let cluster_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
        let node_port = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap();

        // iptables-save prints the kernel's 32-bit fixed-point probability back with 11
        // digits: 0.3333333333 reads back as 0.33333333349.
        let nat = wait_for("the service's chains", Duration::from_secs(30), || {
            let nat = iptables_save("nat");
            SEP_CHAINS
                .iter()
                .all(|c| nat.contains(&format!(":{c} ")))
                .then_some(nat)
        });
        for want in [
            format!("-A KUBE-SERVICES -d {cluster_ip}/32 -p tcp -m comment --comment \"default/web:http cluster IP\" -m tcp --dport 80 -j {SVC_CHAIN}"),
            format!("-A KUBE-NODEPORTS -p tcp -m comment --comment \"default/web:http\" -m tcp --dport {node_port} -j KUBE-EXT-CDGGSHYLG3RE2FKL"),
            format!("-A {SVC_CHAIN} -m comment --comment \"default/web:http -> 10.214.0.11:8080\" -m statistic --mode random --probability 0.33333333349 -j {}", SEP_CHAINS[0]),
            format!("-A {SVC_CHAIN} -m comment --comment \"default/web:http -> 10.214.0.12:8080\" -m statistic --mode random --probability 0.50000000000 -j {}", SEP_CHAINS[1]),
            format!("-A {SVC_CHAIN} -m comment --comment \"default/web:http -> 10.214.0.13:8080\" -j {}", SEP_CHAINS[2]),
            format!("-A {} -p tcp -m comment --comment \"default/web:http\" -m tcp -j DNAT --to-destination 10.214.0.11:8080", SEP_CHAINS[0]),
            "-A KUBE-SERVICES ! -d 127.0.0.0/8 -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS".to_string(),
        ] {
            assert!(nat.contains(&want), "missing {want:?} in\n{nat}");
        }

        // The ClusterIP reaches every backend (random choice: 60 tries miss one with
        // probability below 1e-10).
        let url = format!("http://{cluster_ip}:80/");
        let mut seen = BTreeSet::new();
        for _ in 0..60 {
            seen.insert(curl(curl_cmd(&url)).unwrap_or_else(|| panic!("GET {url} failed")));
            if seen.len() == 3 {
                break;
            }
        }
        assert_eq!(seen, BTreeSet::from(["b1".into(), "b2".into(), "b3".into()]));

        // The NodePort answers on the node IP, from the node and from the client namespace.
        let node_url = format!("http://{NODE_IP}:{node_port}/");
        let body = curl(curl_cmd(&node_url)).expect("NodePort from the node");
        assert!(["b1", "b2", "b3"].contains(&body.as_str()), "{body}");
        let mut from_client = net.nsenter(&net.client, "curl");
        from_client.args(["-s", "--max-time", "2", &node_url]);
        let body = curl(from_client).expect("NodePort from the client namespace");
        assert!(["b1", "b2", "b3"].contains(&body.as_str()), "{body}");

        // b2 not ready: its endpoint chain goes, and it is never chosen.
        k.ok_stdin(&["apply", "-f", "-"], Some(&slice([true, false, true])));
        wait_for("b2's chain to go", Duration::from_secs(30), || {
            (!iptables_save("nat").contains(SEP_CHAINS[1])).then_some(())
        });
        let got = answers(&url, 30);
        assert!(!got.iter().any(|b| b == "b2"), "{got:?}");
        assert!(got.iter().all(|b| b == "b1" || b == "b3"), "{got:?}");

        // sessionAffinity ClientIP: every request from here goes to one backend.
        k.ok(&["patch", "service", "web", "-p", r#"{"spec":{"sessionAffinity":"ClientIP"}}"#]);
        wait_for("the affinity rules", Duration::from_secs(30), || {
            iptables_save("nat").contains("--rcheck --seconds 10800 --reap").then_some(())
        });
        let got = answers(&url, 15);
        assert!(got.iter().all(|b| *b == got[0]), "affinity broken: {got:?}");

        // Deleting the Service removes its chains and rules.
        k.ok(&["delete", "service", "web"]);
        wait_for("the service's chains to go", Duration::from_secs(30), || {
            let nat = iptables_save("nat");
            (!nat.contains("default/web") && !nat.contains(SVC_CHAIN)).then_some(())
        });
        let filter = iptables_save("filter");
        assert!(!filter.contains("default/web"), "{filter}");
        agent.assert_running();
        agent.terminate(Duration::from_secs(10));
        drop(server);
    });
    for b in &mut backends {
        b.kill();
    }
}
