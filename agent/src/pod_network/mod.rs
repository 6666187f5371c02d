//! How pods reach pods on other nodes (`--flannel-backend`, as k3s's embedded flannel): the
//! [`crate::vxlan`] overlay (the default: works across routers), [`crate::host_gw`] routes
//! (the nodes share a layer-2 network), or nothing. Whatever the backend, pod-to-pod traffic
//! keeps its source address ([`no_snat`]) and traffic from pods to the outside is masqueraded
//! by the CNI bridge.
//!
//! The cluster has one backend, the server's: agents take it from the server unless their
//! own flag agrees ([`backend::decide`]).
//!
//! `wireguard-native` is refused: k3rs does not implement it, and [`wireguard_refusal`] says
//! whether the kernel would even have it.

pub mod annotations;
pub mod backend;
pub mod ip;
pub mod no_snat;
pub mod watch;

use std::net::Ipv4Addr;

use ipnet::IpNet;

use crate::host_gw::HostGwConfig;
use crate::vxlan::VxlanConfig;

pub use backend::Backend;

/// The `--flannel-backend` values.
pub const BACKENDS: [&str; 4] = ["vxlan", "host-gw", "none", "wireguard-native"];

/// The pod network backend a node runs.
#[derive(Debug, Clone)]
pub enum PodNetwork {
    /// No routes to other nodes' pods (`--flannel-backend=none`).
    None,
    /// Routes to other nodes' pod CIDRs via their addresses (`--flannel-backend=host-gw`).
    HostGw(HostGwConfig),
    /// The VXLAN overlay (`flannel.1`, the default backend).
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

/// What a node's pod network is made of, whichever backend runs it.
#[derive(Debug, Clone)]
pub struct PodNetworkConfig {
    /// The node's own `--flannel-backend`; `None`: the server's ([`backend::decide`]).
    pub backend: Option<Backend>,
    /// This node.
    pub node_name: String,
    /// The node's IPv4 address (vxlan's tunnel end, flannel's `public-ip`).
    pub node_ip: Option<Ipv4Addr>,
    /// `--cluster-cidr`: only pod CIDRs inside it are routed.
    pub cluster_cidr: Option<IpNet>,
}

impl PodNetworkConfig {
    /// The pod network `backend` runs.
    pub fn network(&self, backend: Backend) -> PodNetwork {
        match backend {
            Backend::None => PodNetwork::None,
            Backend::HostGw => PodNetwork::HostGw(HostGwConfig {
                node_name: self.node_name.clone(),
                cluster_cidr: self.cluster_cidr,
                node_ip: self.node_ip,
            }),
            Backend::Vxlan => PodNetwork::Vxlan(VxlanConfig {
                node_name: self.node_name.clone(),
                node_ip: self.node_ip,
                cluster_cidr: self.cluster_cidr,
            }),
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
