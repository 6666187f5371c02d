//! A network namespace with only loopback, for a test that runs a whole node (server, agent,
//! containerd, pods) inside it, plus the cgroup root the agent puts its pods under.
//!
//! Guarantees:
//! - [`NodeLab::run`] is the whole preamble of such a test: it fails the test (never skips it)
//!   unless run as root on a host that can run a node ([`require_node_host`]), then runs the
//!   scenario inside a fresh lab.
//! - The namespace is `k3rs-t<pid>-<seq>-<name>` ([`super::netns::unique_prefix`]; no route
//!   anywhere, nothing connected to the root namespace), the cgroup root `/` the same name,
//!   so tests running at once in one test binary never share either; ones left by a test
//!   process that is gone are removed by [`NodeLab::new`].
//! - [`NodeLab::inside`] runs a closure on a thread that entered the namespace (with `setns`,
//!   which, unlike `ip netns exec`, leaves `/sys` and so the cgroup mounts alone); processes it
//!   starts inherit the namespace.
//! - Dropping the lab (also on panic) SIGKILLs, by PID, every process left in the namespace or
//!   in the cgroup root (containerd, its shims, the pods' processes), unmounts what is left
//!   under the scratch dir (with the pods' network namespaces: the agent's containerd mounts
//!   them under its state dir, not in `/run/netns`), removes the cgroups and the namespace.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::k3rs::{K3rs, WITH_AGENT};
use super::kubectl::Kubectl;

/// The lab.
pub struct NodeLab {
    pub netns: String,
    /// The agent's `--kubelet-arg cgroup-root`.
    pub cgroup_root: String,
    pub scratch: tempfile::TempDir,
}

fn ip(args: &[&str]) {
    let out = Command::new(super::require_program("ip", "iproute2"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Programs a host needs to run a node with containers, with the apt package of each.
const NODE_PROGRAMS: [(&str, &str); 6] = [
    ("containerd", "containerd"),
    ("ctr", "containerd"),
    ("runc", "runc"),
    ("ip", "iproute2"),
    ("iptables", "iptables"),
    ("curl", "curl"),
];

/// The CNI plugins of the agent's pod network.
const CNI_PLUGINS: [&str; 4] = ["bridge", "host-local", "portmap", "loopback"];

/// Server flags: the node's status every 2 s (the kubelet's default is 10 s).
pub const FAST_STATUS: [&str; 2] = ["--kubelet-arg", "node-status-update-frequency=2s"];

/// Fails the test (never skips it) unless it runs as root on a host that can run a node:
/// containerd, ctr, runc, ip, iptables, curl and the CNI plugins in `/usr/lib/cni`
/// (`scripts/prereqs.sh test` installs them).
pub fn require_node_host() {
    assert!(
        rustix::process::getuid().is_root(),
        "this test runs containers and writes iptables rules: run it as root"
    );
    for (program, package) in NODE_PROGRAMS {
        super::require_program(program, package);
    }
    for plugin in CNI_PLUGINS {
        assert!(
            Path::new("/usr/lib/cni").join(plugin).exists(),
            "/usr/lib/cni/{plugin} is missing: apt-get install containernetworking-plugins"
        );
    }
}

fn collect_procs(dir: &Path, pids: &mut Vec<i32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()));
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_procs(&e.path(), pids);
        }
    }
}

fn remove_cgroups(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroups(&e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Runs `scripts/build-images.sh dir` (the pause and busybox image tarballs).
pub fn build_images(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-images.sh");
    run(Command::new("bash").arg(&script).arg(dir));
}

/// Writes the busybox image of `scripts/build-images.sh` renamed `name` (tag `1.35`) into
/// the tarball `dest`, its busybox binary padded with 32 MiB of noise (so it is an image of
/// its own, and a big one); `work` is a scratch directory.
pub fn build_renamed_busybox(work: &Path, dest: &Path, name: &str) {
    const MIB: u64 = 1024 * 1024;
    std::fs::create_dir_all(work).expect("work dir");
    let busybox = work.join("busybox");
    let mut bytes = std::fs::read("/bin/busybox").expect("/bin/busybox (busybox-static)");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..(32 * MIB / 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(&busybox, bytes).expect("padded busybox");
    run(Command::new("chmod").arg("0755").arg(&busybox));
    let out = work.join("out");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-images.sh");
    run(Command::new("bash")
        .arg(&script)
        .arg(&out)
        .env("BUSYBOX", &busybox));
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout).expect("layout dir");
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-xf")
        .arg(out.join("busybox.tar")));
    let index = layout.join("index.json");
    let text = std::fs::read_to_string(&index).expect("index.json");
    let renamed = text.replace("docker.io/library/busybox", name);
    assert_ne!(text, renamed, "the image name in {text}");
    std::fs::write(&index, renamed).expect("index.json");
    std::fs::create_dir_all(dest.parent().expect("a parent")).expect("images dir");
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(dest)
        .args(["oci-layout", "index.json", "blobs"]));
}

/// Writes the images into the server's `<data-dir>/agent/images` and restarts it, so that
/// its embedded agent imports them (air-gapped images are imported when the agent starts).
pub fn add_images(server: &mut K3rs) {
    build_images(&server.data_dir().join("agent/images"));
    server.restart();
}

/// Runs `cmd`, panicking with its output unless it succeeds; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// containerd's containers (sandboxes and app containers) of the pod with `uid`, via `ctr`.
pub fn runtime_objects(socket: &Path, uid: &str) -> Vec<String> {
    let filter = format!("labels.\"io.kubernetes.pod.uid\"=={uid}");
    run(Command::new("ctr").arg("--address").arg(socket).args([
        "-n",
        "k8s.io",
        "containers",
        "ls",
        "-q",
        &filter,
    ]))
    .lines()
    .map(str::to_string)
    .collect()
}

/// The containerd objects (sandboxes and containers) among `ids` whose task is running.
pub fn running_objects(socket: &Path, ids: &[String]) -> Vec<String> {
    let tasks = run(Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io", "tasks", "ls"]));
    // `TASK  PID  STATUS` rows.
    let running: Vec<&str> = (tasks.lines())
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.get(2) == Some(&"RUNNING")).then(|| cols[0])
        })
        .collect();
    ids.iter()
        .filter(|id| running.contains(&id.as_str()))
        .cloned()
        .collect()
}

/// `kubectl <args>` as JSON once `check` holds, within 2 minutes; `agent` must stay up.
pub fn wait_json(
    k: &super::kubectl::Kubectl,
    what: &str,
    args: &[&str],
    agent: &mut super::process::ChildGuard,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    super::wait_for(what, Duration::from_secs(120), || {
        agent.assert_running();
        let out = k.run(args);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
        check(&v).then_some(v)
    })
}

impl NodeLab {
    /// A test that runs a node: [`require_node_host`], then `scenario` on a thread inside a
    /// fresh lab named after `name` ([`NodeLab::inside`]); the lab is cleaned up afterwards,
    /// also when `scenario` panics.
    pub fn run<T: Send>(name: &str, scenario: impl FnOnce(&NodeLab) -> T + Send) -> T {
        require_node_host();
        let lab = NodeLab::new(name);
        lab.inside(|| scenario(&lab))
    }

    /// A lab named `k3rs-t<pid>-<seq>-<name>`, without the host checks of [`NodeLab::run`].
    pub fn new(name: &str) -> NodeLab {
        super::netns::remove_stale();
        let name = format!("{}-{name}", super::netns::unique_prefix());
        let lab = NodeLab {
            cgroup_root: format!("/{name}"),
            netns: name,
            scratch: tempfile::Builder::new()
                .prefix("k3rs-node-")
                .tempdir()
                .expect("scratch dir"),
        };
        ip(&["netns", "add", &lab.netns]);
        ip(&["-n", &lab.netns, "link", "set", "lo", "up"]);
        lab
    }

    /// The agent's data dir in the lab, with the images of `scripts/build-images.sh` in
    /// `agent/images` (imported at the agent's start).
    pub fn agent_data_with_images(&self) -> PathBuf {
        let data = self.scratch.path().join("agent-data");
        build_images(&data.join("agent/images"));
        data
    }

    /// Starts `k3rs server` with its embedded agent as node `node` at `node_ip`, pods under
    /// the lab's cgroup root, `extra_args` added and `env` in the server's environment, with
    /// the images of `scripts/build-images.sh` imported ([`add_images`]). Call it from inside
    /// the lab ([`NodeLab::run`]). Returns once kubectl reaches the API, not once the node is
    /// Ready.
    pub fn start_server(
        &self,
        node: &str,
        node_ip: &str,
        extra_args: &[&str],
        env: &[(&str, &OsStr)],
    ) -> (K3rs, Kubectl) {
        self.start_server_in(None, node, node_ip, extra_args, env)
    }

    /// [`NodeLab::start_server`] with the server's data dir at `data_dir` (e.g. on a small
    /// file system the test mounted).
    pub fn start_server_on(
        &self,
        data_dir: &Path,
        node: &str,
        node_ip: &str,
        extra_args: &[&str],
    ) -> (K3rs, Kubectl) {
        self.start_server_in(Some(data_dir), node, node_ip, extra_args, &[])
    }

    fn start_server_in(
        &self,
        data_dir: Option<&Path>,
        node: &str,
        node_ip: &str,
        extra_args: &[&str],
        env: &[(&str, &OsStr)],
    ) -> (K3rs, Kubectl) {
        let cgroup_root = format!("cgroup-root={}", self.cgroup_root);
        let mut args = vec![
            WITH_AGENT,
            "--node-name",
            node,
            "--node-ip",
            node_ip,
            "--kubelet-arg",
            &cgroup_root,
        ];
        args.extend_from_slice(extra_args);
        let (mut server, k) = match data_dir {
            Some(d) => Kubectl::start_server_on(d, &args, env),
            None => Kubectl::start_server_with_env(&args, env),
        };
        add_images(&mut server);
        (server, k)
    }

    /// Starts `k3rs agent` (data dir `data`, node `node` at 127.0.0.1, pods under the lab's
    /// cgroup root, status every 2 s) joined to `server` with its agent token; logs to
    /// `<scratch>/agent.log`.
    pub fn start_agent(
        &self,
        server: &super::K3rs,
        node: &str,
        data: &Path,
    ) -> super::process::ChildGuard {
        let token = std::fs::read_to_string(server.data_dir().join("server/agent-token"))
            .expect("agent token")
            .trim()
            .to_string();
        let mut cmd = Command::new(super::k3rs_binary());
        cmd.arg("agent")
            .args([
                "--server",
                &server.server_url(),
                "--token",
                &token,
                "--data-dir",
            ])
            .arg(data)
            .args(["--node-name", node, "--node-ip", "127.0.0.1"])
            .args(["--kubelet-arg", "node-status-update-frequency=2s"])
            .args(super::k3rs::TEST_NODE_KUBELET_ARGS)
            .args([
                "--kubelet-arg",
                &format!("cgroup-root={}", self.cgroup_root),
            ])
            .env_remove("K3RS_TOKEN")
            .env_remove("K3RS_URL")
            .env("K3RS_CONFIG_FILE", "/dev/null")
            .env("K3RS_LOG", "info,k3rs_agent=debug");
        let log = self.scratch.path().join("agent.log");
        super::process::ChildGuard::spawn("k3rs agent", cmd, &log)
    }

    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.netns))
    }

    /// Runs `f` on a thread inside the namespace ([`super::netns::run_inside`]).
    pub fn inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        super::netns::run_inside(&self.netns_path(), f)
    }

    /// `<mount>/<cgroup root>` in every cgroup hierarchy that has it.
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        mountinfo
            .lines()
            .filter_map(|l| {
                let fields: Vec<&str> = l.split(' ').collect();
                let sep = fields.iter().position(|f| *f == "-")?;
                let fstype = fields.get(sep + 1)?;
                (*fstype == "cgroup" || *fstype == "cgroup2")
                    .then(|| Path::new(fields[4]).join(self.cgroup_root.trim_start_matches('/')))
            })
            .filter(|p| p.exists())
            .collect()
    }

    /// PIDs in the namespace or under the cgroup root.
    pub fn processes(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.netns])
            .output()
        {
            pids.extend(
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
        for dir in self.cgroup_dirs() {
            collect_procs(&dir, &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        pids.retain(|p| *p != std::process::id() as i32);
        pids
    }
}

impl Drop for NodeLab {
    fn drop(&mut self) {
        let pids = self.processes();
        for pid in &pids {
            if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.processes().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        super::mounts::unmount_under(self.scratch.path());
        for dir in self.cgroup_dirs() {
            remove_cgroups(&dir);
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .stderr(std::process::Stdio::null())
            .status();
    }
}
