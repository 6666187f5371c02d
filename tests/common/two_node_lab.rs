//! Two real nodes on one machine: `k3rs server` (with its embedded agent, node [`A`]) in one
//! [`NodeLab`] namespace and `k3rs agent` (node [`B`]) joined by token in another. Either the
//! two are joined by a veth pair the lab makes ([`TwoNodeLab::new`]: one layer-2 network,
//! addresses [`A_IP`] and [`B_IP`]), or each is joined by a veth pair to a router namespace
//! ([`TwoNodeLab::routed`]: two subnets, [`A_ROUTED_IP`] and [`B_ROUTED_IP`], no shared
//! layer 2, each node routing the other's subnet through the router). Nothing is routed out.
//!
//! Guarantees:
//! - [`TwoNodeLab::start`] returns only once both nodes are Ready, with the images of
//!   `scripts/build-images.sh` imported on both.
//! - Everything is cleaned up when the lab drops (each [`NodeLab`] kills what is left in its
//!   namespace and cgroups by PID, including an agent's containerd and shims; the router
//!   namespace goes last).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::k3rs::WITH_AGENT;
use super::kubectl::Kubectl;
pub use super::node_lab::{add_images, build_images, run};
use super::node_lab::{require_node_host, NodeLab};
use super::process::ChildGuard;
use super::K3rs;

/// The server's node.
pub const A: &str = "gw-a";
/// The joined agent's node.
pub const B: &str = "gw-b";
pub const A_IP: &str = "10.99.1.1";
pub const B_IP: &str = "10.99.1.2";
/// Node A's address behind the router ([`TwoNodeLab::routed`]), in `10.97.1.0/24`.
pub const A_ROUTED_IP: &str = "10.97.1.2";
/// Node B's address behind the router, in `10.97.2.0/24`.
pub const B_ROUTED_IP: &str = "10.97.2.2";

/// The two namespaces and the veths between them.
pub struct TwoNodeLab {
    pub a: NodeLab,
    pub b: NodeLab,
    /// Node A's and node B's addresses.
    pub a_ip: &'static str,
    pub b_ip: &'static str,
    /// The router between them ([`TwoNodeLab::routed`]); dropped after the nodes.
    pub router: Option<Router>,
}

/// A network namespace that forwards between the nodes' subnets; deleted on drop.
pub struct Router {
    pub netns: String,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// What [`TwoNodeLab::start`] started, and the two Ready Node objects.
pub struct TwoNodes {
    pub server: K3rs,
    pub k: Kubectl,
    pub agent: ChildGuard,
    pub node_a: Value,
    pub node_b: Value,
}

/// The node as JSON if its Ready condition is True.
pub fn ready(k: &Kubectl, node: &str) -> Option<Value> {
    let out = k.run(&["get", "node", node, "-o", "json"]);
    let n: Value = serde_json::from_str(&out.stdout).ok()?;
    n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
        .then_some(n)
}

/// `curl -sf` of `url` (2 s at most): the trimmed body, or `None` if it failed.
pub fn curl(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "2", url])
        .output()
        .expect("curl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The Running pod (default namespace) whose name starts with `prefix`, once it has an IP.
pub fn running_pod(k: &Kubectl, prefix: &str) -> Option<Value> {
    let p = super::kubectl::json(k, &["get", "pods", "-o", "json"]);
    p["items"]
        .as_array()?
        .iter()
        .find(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
                && p["status"]["phase"] == "Running"
                && p["status"]["podIP"].is_string()
        })
        .cloned()
}

impl TwoNodeLab {
    /// Makes namespaces `<tag>a` and `<tag>b` joined by a veth (`<tag>a0`/`<tag>b0`). Fails
    /// the test unless run as root on a host that can run a node ([`require_node_host`]).
    pub fn new(tag: &str) -> TwoNodeLab {
        require_node_host();
        let lab = TwoNodeLab {
            a: NodeLab::new(&format!("{tag}a")),
            b: NodeLab::new(&format!("{tag}b")),
            a_ip: A_IP,
            b_ip: B_IP,
            router: None,
        };
        let (dev_a, dev_b) = (format!("{tag}a0"), format!("{tag}b0"));
        run(Command::new("ip").args([
            "link",
            "add",
            &dev_a,
            "netns",
            &lab.a.netns,
            "type",
            "veth",
            "peer",
            "name",
            &dev_b,
            "netns",
            &lab.b.netns,
        ]));
        for (l, dev, ip) in [(&lab.a, &dev_a, A_IP), (&lab.b, &dev_b, B_IP)] {
            run(Command::new("ip").args([
                "-n",
                &l.netns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                dev,
            ]));
            run(Command::new("ip").args(["-n", &l.netns, "link", "set", dev, "up"]));
        }
        lab
    }

    /// Makes namespaces `<tag>a` and `<tag>b`, each joined by a veth (`<tag>a0`, `<tag>b0`) to
    /// a router namespace `<tag>r` (`10.97.1.1` and `10.97.2.1`, forwarding): node A at
    /// [`A_ROUTED_IP`] and node B at [`B_ROUTED_IP`] reach each other only through it.
    pub fn routed(tag: &str) -> TwoNodeLab {
        require_node_host();
        let router = Router {
            netns: format!("{}-{tag}r", super::netns::unique_prefix()),
        };
        ip(&["netns", "add", &router.netns]);
        let lab = TwoNodeLab {
            a: NodeLab::new(&format!("{tag}a")),
            b: NodeLab::new(&format!("{tag}b")),
            a_ip: A_ROUTED_IP,
            b_ip: B_ROUTED_IP,
            router: Some(router),
        };
        let r = &lab.router.as_ref().expect("the router").netns;
        ip(&["-n", r, "link", "set", "lo", "up"]);
        for (node, side, subnet) in [(&lab.a, "a", 1), (&lab.b, "b", 2)] {
            let (dev, router_dev) = (format!("{tag}{side}0"), format!("{tag}r{side}"));
            ip(&[
                "link",
                "add",
                &dev,
                "netns",
                &node.netns,
                "type",
                "veth",
                "peer",
                "name",
                &router_dev,
                "netns",
                r,
            ]);
            let (node_addr, gateway) =
                (format!("10.97.{subnet}.2/24"), format!("10.97.{subnet}.1"));
            ip(&[
                "-n",
                r,
                "addr",
                "add",
                &format!("{gateway}/24"),
                "dev",
                &router_dev,
            ]);
            ip(&["-n", r, "link", "set", &router_dev, "up"]);
            ip(&["-n", &node.netns, "addr", "add", &node_addr, "dev", &dev]);
            ip(&["-n", &node.netns, "link", "set", &dev, "up"]);
            let other = format!("10.97.{}.0/24", 3 - subnet);
            ip(&["-n", &node.netns, "route", "add", &other, "via", &gateway]);
        }
        run(Command::new("nsenter")
            .arg(format!("--net=/run/netns/{r}"))
            .args(["sysctl", "-qw", "net.ipv4.ip_forward=1"]));
        lab
    }

    /// Starts the server (node A, `server_args` added to its flags) and the joined agent (node
    /// B), and waits until both nodes are Ready. Call it from inside `self.a` ([`NodeLab::inside`]).
    pub fn start(&self, server_args: &[&str]) -> TwoNodes {
        self.start_with(server_args, &[])
    }

    /// [`TwoNodeLab::start`] with `agent_args` added to the agent's flags.
    pub fn start_with(&self, server_args: &[&str], agent_args: &[&str]) -> TwoNodes {
        let (mut server, k) = self.start_server(server_args);
        add_images(&mut server);
        let (mut agent, _) = self.start_agent_with(&server, agent_args);
        let (node_a, node_b) =
            super::wait_for("both nodes Ready", Duration::from_secs(150), || {
                server.assert_running();
                agent.assert_running();
                Some((ready(&k, A)?, ready(&k, B)?))
            });
        TwoNodes {
            server,
            k,
            agent,
            node_a,
            node_b,
        }
    }

    /// Starts the server (node A) on a fresh data dir, without images, and waits until
    /// kubectl reaches it. Call it from inside `self.a`.
    pub fn start_server(&self, server_args: &[&str]) -> (K3rs, Kubectl) {
        let cgroup_a = format!("cgroup-root={}", self.a.cgroup_root);
        let mut args = vec![
            WITH_AGENT,
            "--node-name",
            A,
            "--node-ip",
            self.a_ip,
            "--tls-san",
            self.a_ip,
            "--bind-address",
            "0.0.0.0",
            "--kubelet-arg",
            &cgroup_a,
            "--kubelet-arg",
            "node-status-update-frequency=2s",
        ];
        args.extend_from_slice(server_args);
        Kubectl::start_server(&args)
    }

    /// Writes the images of `scripts/build-images.sh` into B's agent data dir, then starts
    /// `k3rs agent` (node B; the binary of [`super::k3rs_binary`], like the server's) in
    /// namespace B, joined to `server` by its agent token. Returns the agent and when its
    /// process was spawned.
    pub fn start_agent(&self, server: &K3rs) -> (ChildGuard, Instant) {
        self.start_agent_with(server, &[])
    }

    /// [`TwoNodeLab::start_agent`] with `agent_args` added to the agent's flags.
    pub fn start_agent_with(&self, server: &K3rs, agent_args: &[&str]) -> (ChildGuard, Instant) {
        let token = std::fs::read_to_string(server.data_dir().join("server/agent-token"))
            .expect("agent token")
            .trim()
            .to_string();
        let data = self.b.scratch.path().join("agent-data");
        build_images(&data.join("agent/images"));
        let url = format!("https://{}:{}", self.a_ip, server.https_port());
        let log = self.b.scratch.path().join("agent.log");
        self.b.inside(|| {
            let mut cmd = Command::new(super::k3rs_binary());
            cmd.arg("agent")
                .args(["--server", &url, "--token", &token, "--data-dir"])
                .arg(&data)
                .args(["--node-name", B, "--node-ip", self.b_ip])
                .args(["--kubelet-arg", "node-status-update-frequency=2s"])
                .args(super::k3rs::TEST_NODE_KUBELET_ARGS)
                .args([
                    "--kubelet-arg",
                    &format!("cgroup-root={}", self.b.cgroup_root),
                ])
                .args(agent_args)
                .env_remove("K3RS_TOKEN")
                .env_remove("K3RS_URL")
                .env("K3RS_CONFIG_FILE", "/dev/null")
                .env("RUST_BACKTRACE", "0");
            let spawned = Instant::now();
            (ChildGuard::spawn("k3rs agent", cmd, &log), spawned)
        })
    }
}
