//! Multi-node pod networking across routers, flannel's vxlan backend (the default
//! `--flannel-backend`): pods' packets to another node's pod CIDR are routed into the
//! `flannel.1` VXLAN device, which wraps them in UDP (port 8472) to that node's address, so
//! the nodes only need to reach each other by IP, not share a layer-2 network.
//!
//! [`device`] decides what `flannel.1` needs; [`plan`] decides, without I/O, the routes,
//! neighbour and FDB entries for the other nodes' VTEPs; [`kernel`] is the kernel (iproute2,
//! or a recording fake); [`annotations`] are flannel's Node annotations this node publishes
//! its VTEP in and reads the others' from. [`run`] watches the Nodes and syncs on change (at
//! most once per second) and every 30 s ([`crate::pod_network::watch`]).
//!
//! Guarantees:
//! - Every sync first makes sure `flannel.1` exists as [`device`] says (re-creating it if
//!   its tunnel settings changed), then that this node's Node carries the annotations of the
//!   device's current MAC, then the entries of [`plan`].
//! - A node whose address is loopback or not IPv4 (a single-node test setup) gets no
//!   overlay and keeps the default pod MTU; that is logged once.
//! - Nothing is routed before this node has a pod CIDR (the device's address is its
//!   network address).
//! - Pods get `flannel.1`'s MTU ([`pod_mtu`], written into the CNI conflist), so their
//!   packets fit in the tunnel without fragmenting.
//! - IP forwarding is turned on at start; a failed change is logged and retried, it does not
//!   stop the others.
//!
//! Assumptions: IPv4 (a dual-stack cluster's IPv6 pod CIDRs get no overlay); every node
//! runs the vxlan backend (a node whose annotations say otherwise is not a peer).

pub mod annotations;
pub mod device;
pub mod kernel;
pub mod plan;

use std::net::Ipv4Addr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::device::{DeviceSpec, Step};
use self::kernel::Overlay;
use self::plan::Mac;
use crate::pod_network::watch::NodeSync;
use crate::watches::Cluster;

/// How the vxlan backend runs.
#[derive(Debug, Clone)]
pub struct VxlanConfig {
    /// This node.
    pub node_name: String,
    /// The node's IPv4 address: the local tunnel end and the published `public-ip`.
    pub node_ip: Option<Ipv4Addr>,
    /// `--cluster-cidr`: only pod CIDRs inside it are routed.
    pub cluster_cidr: Option<IpNet>,
}

/// Why `flannel.1` could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The node has no IPv4 address.
    #[error("the node has no IPv4 address for the VXLAN tunnel (--node-ip)")]
    NoNodeIp,
    /// The node's address is a loopback address.
    #[error(
        "the node address {0} is a loopback address: no other node can reach its VXLAN tunnel"
    )]
    Loopback(Ipv4Addr),
    /// No interface holds the node's address.
    #[error("no interface holds the node address {0}")]
    NoInterface(Ipv4Addr),
    /// The device vanished between creating and reading it.
    #[error("{} disappeared right after it was set up", plan::DEVICE)]
    DeviceGone,
    /// A kernel call failed.
    #[error(transparent)]
    Kernel(#[from] kernel::Error),
}

/// The tunnel's local address: the node's IPv4 address, unless it has none or a loopback one.
fn tunnel_ip(cfg: &VxlanConfig) -> Result<Ipv4Addr, SetupError> {
    match cfg.node_ip {
        None => Err(SetupError::NoNodeIp),
        Some(ip) if ip.is_loopback() => Err(SetupError::Loopback(ip)),
        Some(ip) => Ok(ip),
    }
}

/// Makes `flannel.1` what [`device`] says; its MAC and the tunnel's local address.
pub async fn ensure_device<O: Overlay>(
    kernel: &O,
    cfg: &VxlanConfig,
) -> Result<(Mac, Ipv4Addr), SetupError> {
    let local = tunnel_ip(cfg)?;
    let link = kernel
        .interface_of(local)
        .await?
        .ok_or(SetupError::NoInterface(local))?;
    let want = DeviceSpec::new(local, &link.name, link.mtu);
    let current = kernel.device().await?;
    match device::step(current.as_ref(), &want) {
        Step::Keep => {}
        Step::Adjust => kernel.adjust_device(want.mtu).await?,
        Step::Create => {
            tracing::info!(device = plan::DEVICE, %local, link = %link.name, mtu = want.mtu, "vxlan: creating the device");
            kernel.create_device(want).await?;
        }
        Step::Recreate => {
            tracing::info!(device = plan::DEVICE, %local, link = %link.name, "vxlan: re-creating the device with new settings");
            kernel.delete_device().await?;
            kernel.create_device(want).await?;
        }
    }
    let mac = kernel.device().await?.ok_or(SetupError::DeviceGone)?.mac;
    Ok((mac, local))
}

/// Brings the overlay's entries in line with `nodes` once; `false` if any change failed.
/// Does nothing until this node has a pod CIDR.
pub async fn sync_entries<O: Overlay>(kernel: &O, cfg: &VxlanConfig, nodes: &[Node]) -> bool {
    let me = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(cfg.node_name.as_str()));
    let Some(my_cidr) = me.and_then(plan::pod_cidr_v4) else {
        tracing::debug!(node = %cfg.node_name, "vxlan: no pod CIDR yet");
        return true;
    };
    let desired = plan::desired(&cfg.node_name, my_cidr, nodes, cfg.cluster_cidr.as_ref());
    let current = match kernel.state().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "vxlan: reading the overlay's state failed");
            return false;
        }
    };
    let mut ok = true;
    for action in plan::plan(&desired, &current) {
        match kernel.apply(action.clone()).await {
            Ok(()) => tracing::info!(?action, "vxlan: applied"),
            Err(e) => {
                tracing::warn!(error = %e, ?action, "vxlan: a change failed");
                ok = false;
            }
        }
    }
    ok
}

/// vxlan as a [`NodeSync`].
struct Vxlan<O> {
    kernel: O,
    cfg: VxlanConfig,
}

impl<O: Overlay> NodeSync for Vxlan<O> {
    async fn sync(&mut self, client: &Client, nodes: Vec<Node>) -> bool {
        let (mac, local) = match ensure_device(&self.kernel, &self.cfg).await {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "vxlan: setting up {} failed; pods on other nodes are unreachable", plan::DEVICE);
                return false;
            }
        };
        let name = &self.cfg.node_name;
        let me = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
        let wanted = annotations::wanted(device::VNI, mac, local);
        let published =
            crate::pod_network::annotations::publish(client, me, name, &wanted, "vxlan").await;
        sync_entries(&self.kernel, &self.cfg, &nodes).await && published
    }
}

/// Runs until `stop`, with the latest [`Cluster`] of `clusters`.
pub async fn run<O: Overlay>(
    clusters: watch::Receiver<Cluster>,
    kernel: O,
    cfg: VxlanConfig,
    stop: CancellationToken,
) {
    if let Err(e) = kernel.enable_forwarding().await {
        tracing::error!(error = %e, "vxlan: pods on other nodes will not be reachable");
    }
    if let Err(e) = tunnel_ip(&cfg) {
        // Nothing to retry: the node's address is given at start.
        tracing::warn!("vxlan: {e}; no overlay on this node");
        stop.cancelled().await;
        return;
    }
    crate::pod_network::watch::run(clusters, Vxlan { kernel, cfg }, "vxlan", stop).await;
}

/// The pods' MTU under the overlay: `flannel.1`'s (the node interface's minus the VXLAN
/// overhead), as flannel hands its CNI plugin; `None` (logged) if the interface is not found.
pub async fn pod_mtu<O: Overlay>(kernel: &O, cfg: &VxlanConfig) -> Option<u32> {
    let ip = tunnel_ip(cfg).ok()?;
    match kernel.interface_of(ip).await {
        Ok(Some(link)) => Some(DeviceSpec::new(ip, &link.name, link.mtu).mtu),
        Ok(None) => {
            tracing::warn!(%ip, "vxlan: no interface holds the node address; pods keep the default MTU");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "vxlan: reading the node interface's MTU failed; pods keep the default MTU");
            None
        }
    }
}

/// Removes `flannel.1` if a vxlan run left it (the node now runs another backend).
pub async fn remove<O: Overlay>(kernel: &O) -> Result<(), kernel::Error> {
    if kernel.device().await?.is_some() {
        kernel.delete_device().await?;
        tracing::info!(
            device = plan::DEVICE,
            "vxlan: device removed (another backend runs)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
