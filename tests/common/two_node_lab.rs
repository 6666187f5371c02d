//! Two real nodes on one machine: `k3rs server` (with its embedded agent, node [`A`]) in one
//! [`NodeLab`] namespace and `k3rs agent` (node [`B`]) joined by token in another, the two
//! joined by a veth pair the lab makes (addresses [`A_IP`] and [`B_IP`], nothing routed out).
//!
//! Guarantees:
//! - [`TwoNodeLab::start`] returns only once both nodes are Ready, with the images of
//!   `scripts/build-images.sh` imported on both.
//! - Everything is cleaned up when the lab drops (each [`NodeLab`] kills what is left in its
//!   namespace and cgroups by PID, including an agent's containerd and shims).

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

/// The two namespaces and the veth between them.
pub struct TwoNodeLab {
    pub a: NodeLab,
    pub b: NodeLab,
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

impl TwoNodeLab {
    /// Makes namespaces `<tag>a` and `<tag>b` joined by a veth (`<tag>a0`/`<tag>b0`). Fails
    /// the test unless run as root on a host that can run a node ([`require_node_host`]).
    pub fn new(tag: &str) -> TwoNodeLab {
        require_node_host();
        let lab = TwoNodeLab {
            a: NodeLab::new(&format!("{tag}a")),
            b: NodeLab::new(&format!("{tag}b")),
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

    /// Starts the server (node A, `server_args` added to its flags) and the joined agent (node
    /// B), and waits until both nodes are Ready. Call it from inside `self.a` ([`NodeLab::inside`]).
    pub fn start(&self, server_args: &[&str]) -> TwoNodes {
        let (mut server, k) = self.start_server(server_args);
        add_images(&mut server);
        let (mut agent, _) = self.start_agent(&server);
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
            A_IP,
            "--tls-san",
            A_IP,
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
    /// `k3rs agent` (node B) in namespace B, joined to `server` by its agent token. Returns
    /// the agent and when its process was spawned.
    pub fn start_agent(&self, server: &K3rs) -> (ChildGuard, Instant) {
        let token = std::fs::read_to_string(server.data_dir().join("server/agent-token"))
            .expect("agent token")
            .trim()
            .to_string();
        let data = self.b.scratch.path().join("agent-data");
        build_images(&data.join("agent/images"));
        let url = format!("https://{A_IP}:{}", server.https_port());
        let log = self.b.scratch.path().join("agent.log");
        self.b.inside(|| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
            cmd.arg("agent")
                .args(["--server", &url, "--token", &token, "--data-dir"])
                .arg(&data)
                .args(["--node-name", B, "--node-ip", B_IP])
                .args(["--kubelet-arg", "node-status-update-frequency=2s"])
                .args(super::k3rs::TEST_NODE_KUBELET_ARGS)
                .args([
                    "--kubelet-arg",
                    &format!("cgroup-root={}", self.b.cgroup_root),
                ])
                .env_remove("K3RS_TOKEN")
                .env_remove("K3RS_URL")
                .env("K3RS_CONFIG_FILE", "/dev/null")
                .env("RUST_BACKTRACE", "0");
            let spawned = Instant::now();
            (ChildGuard::spawn("k3rs agent", cmd, &log), spawned)
        })
    }
}
