//! Network namespaces a test creates for itself: one "hub" namespace holding a bridge, and one
//! namespace per server joined to the bridge by a veth pair.
//!
//! Guarantees:
//! - Every namespace a test makes (here, in [`super::node_lab`] and elsewhere) is named
//!   [`unique_prefix`]`-…` = `k3rs-t<test pid>-<seq>-…`, so parallel tests and parallel test
//!   binaries never share one; namespaces left behind by a test process that no longer exists
//!   (killed -9) are removed by the next [`remove_stale`] ([`Lab::new`] and
//!   [`super::node_lab::NodeLab::new`] call it).
//! - Addresses are private (`10.213.0.0/24`), no namespace has a default route and nothing is
//!   connected to the root namespace: no packet leaves the namespaces the test created.
//! - Dropping the [`Lab`] (also while unwinding from a panic) deletes every namespace it made,
//!   and with them the bridge and veths. Kill the processes inside before (field order).
//! - A failing `ip` command panics with its output: setup never silently half-succeeds.
//!
//! Partitions are made by taking a server's interface down inside its own namespace (the
//! server keeps running but reaches no one, and no one reaches it), healed by bringing it up.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The /24 every namespace of a lab lives in (each lab is isolated, so labs may share it).
pub const SUBNET: [u8; 3] = [10, 213, 0];

/// Per-process counter so two labs of one test binary get different names.
static SEQ: AtomicU32 = AtomicU32::new(0);

/// `k3rs-t<pid>-<seq>`: a name prefix no other namespace of this or another test process has.
pub fn unique_prefix() -> String {
    format!(
        "k3rs-t{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A hub namespace with a bridge and `n` server namespaces attached to it.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    servers: usize,
}

/// Runs `ip <args>`, panicking with its output on failure.
fn ip(args: &[&str]) {
    let ip = super::require_program("ip", "iproute2");
    let out = Command::new(ip)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ip netns list` names.
fn list_namespaces() -> Vec<String> {
    let out = Command::new(super::require_program("ip", "iproute2"))
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Runs `f` on a new thread that entered the network namespace at `path` and returns its
/// result (a panic in `f` is re-raised here). Threads and processes `f` starts (a tokio
/// runtime, etcdctl, a server) inherit the namespace; the calling thread's is left alone, as
/// are other threads of the test binary. `setns`, unlike `ip netns exec`, leaves `/sys` and so
/// the cgroup mounts alone.
pub fn run_inside<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            let ns = std::fs::File::open(path)
                .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&ns),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap_or_else(|e| panic!("setns {}: {e}", path.display()));
            f()
        });
        match handle.join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Removes `k3rs-t<pid>-…` namespaces whose test process is gone.
pub fn remove_stale() {
    for name in list_namespaces() {
        let Some(rest) = name.strip_prefix("k3rs-t") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

impl Lab {
    /// Creates the hub with its bridge (`10.213.0.1`) and `servers` namespaces, server `i`
    /// (1-based) at [`Lab::addr`]`(i)`, all links up.
    pub fn new(servers: usize) -> Lab {
        assert!((1..=50).contains(&servers), "1..=50 servers");
        remove_stale();
        let prefix = unique_prefix();
        // Constructed first, so a failure half-way still removes what exists.
        let lab = Lab { prefix, servers };
        let hub = lab.hub();
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        let hub_addr = format!("{}/24", lab.hub_addr());
        ip(&["-n", &hub, "addr", "add", &hub_addr, "dev", "br0"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for i in 1..=servers {
            let ns = lab.server(i);
            let hub_end = format!("vs{i}");
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n", &hub, "link", "add", &hub_end, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ]);
            ip(&["-n", &hub, "link", "set", &hub_end, "master", "br0", "up"]);
            let addr = format!("{}/24", lab.addr(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        lab
    }

    /// The hub namespace's name (the test's clients run there, see [`Lab::in_hub`]).
    pub fn hub(&self) -> String {
        format!("{}-hub", self.prefix)
    }

    /// The namespace of server `i` (1-based).
    pub fn server(&self, i: usize) -> String {
        assert!((1..=self.servers).contains(&i), "no server {i}");
        format!("{}-s{i}", self.prefix)
    }

    pub fn hub_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], 1)
    }

    /// Server `i`'s address: `10.213.0.(10 + i)`.
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], 10 + i as u8)
    }

    /// `program args…` run inside server `i`'s namespace (`ip netns exec` execs in place, so
    /// the child's PID is the program's own: signals reach it directly).
    pub fn command_in(&self, ns: &str, program: impl Into<PathBuf>) -> Command {
        let mut cmd = Command::new(super::require_program("ip", "iproute2"));
        cmd.args(["netns", "exec", ns]).arg(program.into());
        cmd
    }

    /// Runs `f` inside the hub namespace ([`run_inside`]) and returns its result.
    pub fn in_hub<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        run_inside(Path::new(&format!("/run/netns/{}", self.hub())), f)
    }

    /// Cuts server `i` off the bridge: its interface goes down inside its namespace.
    pub fn isolate(&self, i: usize) {
        ip(&["-n", &self.server(i), "link", "set", "eth0", "down"]);
    }

    /// Reconnects server `i` (undoes [`Lab::isolate`]).
    pub fn heal(&self, i: usize) {
        ip(&["-n", &self.server(i), "link", "set", "eth0", "up"]);
    }

    /// Whether server `i`'s interface is up.
    pub fn is_connected(&self, i: usize) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.server(i), "-o", "link", "show", "eth0"])
            .output()
            .expect("ip link show");
        String::from_utf8_lossy(&out.stdout).contains(",UP")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Server namespaces first (their veths die with them), then the hub and its bridge.
        let names = (1..=self.servers).map(|i| self.server(i));
        for name in names.chain([self.hub()]) {
            let _ = Command::new("ip")
                .args(["netns", "del", &name])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}
