//! A real node (`k3rs agent` without `--hollow`): join the cluster ([`crate::join`]), then keep
//! the Node, its Lease and status ([`crate::kubelet::node_status`]), the client certificate
//! rotated and a serving certificate requested, until stopped.

pub mod kubelet_args;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::join::{self, JoinConfig, JoinToken};
use crate::kubelet::node_status::{self, runtime::SocketProbe, NodeConfig, NodeStatusConfig};

pub use kubelet_args::KubeletArgs;

/// Everything `k3rs agent` was told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub server: String,
    pub token: Option<JoinToken>,
    pub node: NodeConfig,
    pub data_dir: PathBuf,
    /// `unix:///…` of the CRI runtime.
    pub container_runtime_endpoint: String,
    pub kubelet: KubeletArgs,
    /// How long the client certificate request may take.
    pub csr_timeout: Duration,
    /// The service proxy's settings; `None`: no proxy.
    pub proxy: Option<crate::proxy::ProxyConfig>,
}

/// The default CRI endpoint: the socket of the containerd the agent supervises,
/// `<data-dir>/agent/containerd/containerd.sock` ([`crate::containerd::config`]).
pub fn default_runtime_endpoint(data_dir: &std::path::Path) -> String {
    format!(
        "unix://{}",
        data_dir.join("agent/containerd/containerd.sock").display()
    )
}

/// The node's addresses: the given ones, else the default route's.
pub fn node_ips(given: &[IpAddr]) -> Vec<IpAddr> {
    if given.is_empty() {
        vec![node_status::machine::default_ip()]
    } else {
        given.to_vec()
    }
}

/// Joins and runs the node until `stop`; an error only if joining failed.
pub async fn run(cfg: AgentConfig, stop: CancellationToken) -> Result<(), join::Error> {
    let join_cfg = JoinConfig {
        server: cfg.server.clone(),
        token: cfg.token.clone(),
        node_name: cfg.node.name.clone(),
        node_ips: cfg.node.ips.clone(),
        data_dir: cfg.data_dir.clone(),
        csr_timeout: cfg.csr_timeout,
    };
    let identity = join::ensure_identity(&join_cfg).await?;
    let (clients, latest) = tokio::sync::watch::channel(identity.client.clone());
    let mut node = cfg.node.clone();
    if let Some(p) = cfg.kubelet.max_pods {
        node.max_pods = p;
    }
    node.labels.extend(cfg.kubelet.node_labels.iter().cloned());
    node.taints
        .extend(cfg.kubelet.register_with_taints.iter().cloned());
    let mut status_cfg = NodeStatusConfig::new(node, cfg.data_dir.clone());
    if let Some(f) = cfg.kubelet.node_status_update_frequency {
        status_cfg.status_update_frequency = f;
    }
    let runtime = Arc::new(SocketProbe::new(&cfg.container_runtime_endpoint));
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(join::rotation::run(
        join_cfg.clone(),
        identity,
        clients,
        stop.clone(),
    ));
    tasks.spawn(join::serving::run(
        join_cfg,
        latest.clone(),
        Duration::from_secs(900),
        stop.clone(),
    ));
    if let Some(proxy) = cfg.proxy.clone() {
        let ipt = crate::proxy::iptables::SystemIptables;
        tasks.spawn(crate::proxy::run(latest.clone(), ipt, proxy, stop.clone()));
    }
    tasks.spawn(node_status::run(latest, status_cfg, runtime, stop.clone()));
    while tasks.join_next().await.is_some() {}
    tracing::info!("agent stopped");
    Ok(())
}
