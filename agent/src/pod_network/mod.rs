//! How pods reach pods on other nodes (`--flannel-backend`, as k3s's embedded flannel): the
//! [`crate::vxlan`] overlay (the default: works across routers), [`crate::host_gw`] routes
//! (the nodes share a layer-2 network), or nothing. Whatever the backend, pod-to-pod traffic
//! keeps its source address ([`no_snat`]) and traffic from pods to the outside is masqueraded
//! by the CNI bridge.
//!
//! `wireguard-native` is refused: k3rs does not implement it, and [`wireguard_refusal`] says
//! whether the kernel would even have it.

pub mod ip;
pub mod no_snat;
pub mod watch;

use ipnet::IpNet;

use crate::host_gw::HostGwConfig;
use crate::vxlan::VxlanConfig;

/// The `--flannel-backend` values.
pub const BACKENDS: [&str; 4] = ["vxlan", "host-gw", "none", "wireguard-native"];

/// The pod network backend a node runs.
#[derive(Debug, Clone)]
pub enum PodNetwork {
    /// No routes to other nodes' pods (`--flannel-backend=none`).
    None,
    HostGw(HostGwConfig),
    Vxlan(VxlanConfig),
}

impl PodNetwork {
    /// The cluster CIDR whose pod-to-pod traffic keeps its source address.
    pub fn cluster_cidr(&self) -> Option<IpNet> {
        match self {
            PodNetwork::None => None,
            PodNetwork::HostGw(c) => c.cluster_cidr,
            PodNetwork::Vxlan(c) => c.cluster_cidr,
        }
    }
}

/// Why `--flannel-backend=wireguard-native` cannot run: the kernel's answer to making a
/// WireGuard link (`ip link add … type wireguard`, removed again at once), or that k3rs does
/// not implement the backend.
pub fn wireguard_refusal() -> String {
    const PROBE: &str = "k3rs-wgprobe";
    let out = std::process::Command::new("ip")
        .args(["link", "add", PROBE, "type", "wireguard"])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", PROBE])
                .output();
            "--flannel-backend=wireguard-native is not implemented by k3rs; use vxlan (the \
             default) or host-gw"
                .to_string()
        }
        Ok(o) => format!(
            "--flannel-backend=wireguard-native: this kernel has no WireGuard (`ip link add \
             type wireguard`: {}); use vxlan (the default) or host-gw",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!(
            "--flannel-backend=wireguard-native: cannot run `ip` to check for WireGuard ({e}); \
             use vxlan (the default) or host-gw"
        ),
    }
}
