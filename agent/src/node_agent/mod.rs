//! A real node (`k3rs agent` without `--hollow`): join the cluster ([`crate::join`]), bring the
//! container runtime up, then keep the Node, its Lease and status
//! ([`crate::kubelet::node_status`], Ready as the runtime reports through CRI), the client
//! certificate rotated, a serving certificate requested, and the node's pods running
//! ([`pods`]), until stopped.

pub mod kubelet_args;
pub mod pods;
pub mod server_config;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k3rs_apimachinery::tasks;
use tokio_util::sync::CancellationToken;

use crate::join::{self, JoinConfig, JoinToken};
use crate::kubelet::node_status::{self, cri_health::CriHealth, NodeConfig, NodeStatusConfig};
use crate::kubelet::server::{ServerConfig, DEFAULT_PORT};

pub use kubelet_args::KubeletArgs;

/// Everything `k3rs agent` was told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `--server`: the API server's URL.
    pub server: String,
    /// `--token` (or `--token-file`); needed only when no usable node identity is stored.
    pub token: Option<JoinToken>,
    /// The Node as registered (name, addresses, labels, taints).
    pub node: NodeConfig,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--container-runtime-endpoint` (`unix:///…`): someone else's CRI runtime; `None`:
    /// the agent's own containerd.
    pub container_runtime_endpoint: Option<String>,
    /// `--pause-image`: the pod sandbox image; `None`: the one embedded in the binary.
    pub pause_image: Option<String>,
    /// `--kubelet-arg`s.
    pub kubelet: KubeletArgs,
    /// How long the client certificate request may take.
    pub csr_timeout: Duration,
    /// The service proxy's settings; `None`: no proxy.
    pub proxy: Option<crate::proxy::ProxyConfig>,
    /// The NetworkPolicy enforcer's settings; `None`: policies are not enforced on this node
    /// (and rules a previous run left are removed).
    pub network_policy: Option<crate::netpol::NetworkPolicyConfig>,
    /// The ingress controller's settings; `None`: no ingress listeners on this node.
    pub ingress: Option<crate::ingress::IngressConfig>,
    /// The cluster DNS server's settings; `None`: no DNS server.
    pub dns: Option<crate::dns::DnsConfig>,
    /// How pods reach the other nodes' pods (`--flannel-backend`, else the server's).
    pub pod_network: crate::pod_network::PodNetworkConfig,
    /// `--private-registry` (`registries.yaml`), rendered into the agent's containerd config.
    pub registries: crate::containerd::registries::Registries,
    /// `--system-default-registry`: where the system images (the sandbox image) come from.
    pub system_default_registry: Option<String>,
    /// Whether registering the node tells the service manager `READY=1` (`k3rs agent`); the
    /// server's embedded agent leaves that to the server, which waits for its node to be
    /// Ready.
    pub notify_ready: bool,
}

/// The node's addresses: the given ones, else the default route's.
pub fn node_ips(given: &[IpAddr]) -> Vec<IpAddr> {
    if given.is_empty() {
        vec![node_status::machine::default_ip()]
    } else {
        given.to_vec()
    }
}

/// Starts the pod network backend. host-gw removes the `flannel.1` a vxlan run left (`none`
/// leaves it: the node's pod network may be someone else's, e.g. a flannel of their own).
fn spawn_pod_network(
    running: &mut tokio::task::JoinSet<()>,
    network: &crate::pod_network::PodNetwork,
    clusters: &tokio::sync::watch::Receiver<crate::watches::Cluster>,
    stop: &CancellationToken,
) {
    use crate::pod_network::PodNetwork;
    use crate::vxlan::kernel::IpOverlay;
    if matches!(network, PodNetwork::HostGw(_)) {
        running.spawn(async {
            if let Err(e) = crate::vxlan::remove(&IpOverlay).await {
                tracing::warn!(error = %e, "removing the vxlan device failed");
            }
        });
    }
    let clusters = clusters.clone();
    match network.clone() {
        PodNetwork::None => {}
        PodNetwork::HostGw(host_gw) => {
            running.spawn(tasks::supervise(
                "agent/host-gw",
                stop.clone(),
                move |stop| {
                    let routes = crate::host_gw::routes::IpRoute;
                    crate::host_gw::run(clusters.clone(), routes, host_gw.clone(), stop)
                },
            ));
        }
        PodNetwork::Vxlan(vxlan) => {
            running.spawn(tasks::supervise("agent/vxlan", stop.clone(), move |stop| {
                crate::vxlan::run(clusters.clone(), IpOverlay, vxlan.clone(), stop)
            }));
        }
    }
}

/// Why the node could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Joining the cluster failed.
    #[error(transparent)]
    Join(#[from] join::Error),
    /// The agent's `--flannel-backend` and the server's disagree: fatal, retrying cannot help.
    #[error(transparent)]
    FlannelBackend(#[from] crate::pod_network::backend::BackendError),
}

/// Joins and runs the node until `stop`; an error if joining failed or the node cannot run
/// the cluster's pod network backend.
pub async fn run(mut cfg: AgentConfig, stop: CancellationToken) -> Result<(), Error> {
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
    if let Some(p) = cfg.kubelet.port {
        node.kubelet_port = i32::from(p);
    }
    node.reserved = cfg.kubelet.reserved();
    let kubelet_port = u16::try_from(node.kubelet_port).unwrap_or(DEFAULT_PORT);
    node.labels.extend(cfg.kubelet.node_labels.iter().cloned());
    node.taints
        .extend(cfg.kubelet.register_with_taints.iter().cloned());
    let mut status_cfg = NodeStatusConfig::new(node, cfg.data_dir.clone());
    status_cfg.notify_ready = cfg.notify_ready;
    // The eviction manager reports the node's pressure; the node status publishes it.
    let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(Default::default());
    status_cfg.pressure = Some(pressure_rx);
    if let Some(f) = cfg.kubelet.node_status_update_frequency {
        status_cfg.status_update_frequency = f;
    }
    let (runtime_tx, runtime_rx) = tokio::sync::watch::channel(None);
    let health = Arc::new(CriHealth(runtime_rx));
    // Every long-running part is a named task: a panic is logged with its name, and the
    // supervised ones start again with backoff (k3rs_apimachinery::tasks).
    let mut running = tokio::task::JoinSet::new();
    // The Node's status first: a restarted agent replaces the status its last run left
    // (which may still say Ready) before anything waits on the server.
    {
        let latest = latest.clone();
        running.spawn(tasks::supervise(
            "agent/node-status",
            stop.clone(),
            move |stop| node_status::run(latest.clone(), status_cfg.clone(), health.clone(), stop),
        ));
    }
    let from_server = tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        c = server_config::fetch(identity.client.clone()) => c,
    };
    cfg = server_config::apply(cfg, &from_server);
    let pod_network = cfg
        .pod_network
        .network(server_config::flannel_backend(&cfg, &from_server)?);
    tracing::info!(
        cluster_dns = ?cfg.kubelet.cluster_dns,
        system_default_registry = ?cfg.system_default_registry,
        network_policy = cfg.network_policy.is_some(),
        "settings after the server's"
    );
    let rotation = tasks::spawn(
        "agent/certificate-rotation",
        join::rotation::run(join_cfg.clone(), identity, clients, stop.clone()),
    );
    running.spawn(async move {
        let _ = rotation.await;
    });
    // One watch and one cache per resource type for the node's keepers (proxy, network
    // policy, pod network, ingress, DNS), renewed with the client.
    let (clusters, follow) = crate::watches::clusters(latest.clone(), stop.clone());
    let follow = tasks::spawn("agent/informers", follow);
    running.spawn(async move {
        let _ = follow.await;
    });
    let layout = join::files::Layout::new(&cfg.data_dir);
    let server_cfg = ServerConfig {
        node_name: cfg.node.name.clone(),
        listen: std::net::SocketAddr::from(([0, 0, 0, 0], kubelet_port)),
        serving_cert: layout.serving_cert(),
        serving_key: layout.serving_key(),
        client_ca: pods::agent_dir(&cfg.data_dir).join("client-ca.crt"),
    };
    {
        let latest = latest.clone();
        running.spawn(tasks::supervise(
            "agent/serving-certificate",
            stop.clone(),
            move |stop| {
                join::serving::run(
                    join_cfg.clone(),
                    latest.clone(),
                    Duration::from_secs(900),
                    stop,
                )
            },
        ));
    }
    if let Some(proxy) = cfg.proxy.clone() {
        let clusters = clusters.clone();
        running.spawn(tasks::supervise("agent/proxy", stop.clone(), move |stop| {
            let ipt = crate::proxy::iptables::SystemIptables;
            crate::proxy::run(clusters.clone(), ipt, proxy.clone(), stop)
        }));
    }
    if let Some(netpol) = cfg.network_policy.clone() {
        let clusters = clusters.clone();
        running.spawn(tasks::supervise(
            "agent/network-policy",
            stop.clone(),
            move |stop| {
                let ipt = crate::proxy::iptables::SystemIptables;
                crate::netpol::run(clusters.clone(), ipt, netpol.clone(), stop)
            },
        ));
    } else {
        running.spawn(async {
            // Disabled: take away what an enforcing run of this node may have left.
            let ipt = crate::proxy::iptables::SystemIptables;
            if let Err(e) = crate::netpol::sync::remove(&ipt).await {
                tracing::debug!(error = %e, "network policy disabled; removing old rules failed");
            }
        });
    }
    if let Some(cidr) = pod_network.cluster_cidr() {
        running.spawn(async move {
            let ipt = crate::proxy::iptables::SystemIptables;
            if let Err(e) = crate::pod_network::no_snat::ensure(&ipt, &cidr).await {
                tracing::error!(error = %e, "pod network: pods on other nodes will see node addresses");
            }
        });
    }
    spawn_pod_network(&mut running, &pod_network, &clusters, &stop);
    if let Some(ingress) = cfg.ingress.clone() {
        let clusters = clusters.clone();
        running.spawn(tasks::supervise(
            "agent/ingress",
            stop.clone(),
            move |stop| crate::ingress::run(clusters.clone(), ingress.clone(), stop),
        ));
    }
    if let Some(dns) = cfg.dns.clone() {
        let clusters = clusters.clone();
        running.spawn(tasks::supervise("agent/dns", stop.clone(), move |stop| {
            crate::dns::run(clusters.clone(), dns.clone(), stop)
        }));
    }
    // The node reports the runtime down until it is up.
    if let Some(runtime) = pods::start_runtime_retrying(&cfg, &stop).await {
        runtime_tx.send_replace(Some(Arc::new(runtime.cri.clone())));
        let image_imports = pods::import_air_gap_images(&runtime, &cfg, &mut running, &stop);
        {
            let (latest, cri) = (latest.clone(), Arc::new(runtime.cri.clone()));
            running.spawn(tasks::supervise(
                "agent/kubelet-server",
                stop.clone(),
                move |stop| {
                    crate::kubelet::server::run(
                        server_cfg.clone(),
                        latest.clone(),
                        cri.clone(),
                        stop,
                    )
                },
            ));
        }
        {
            let (cri, policy) = (Arc::new(runtime.cri.clone()), cfg.kubelet.container_log);
            running.spawn(tasks::supervise(
                "agent/container-log-rotation",
                stop.clone(),
                move |stop| crate::kubelet::log_rotation::run(cri.clone(), policy, stop),
            ));
        }
        if cfg.container_runtime_endpoint.is_none() {
            let (latest, node, data_dir) =
                (latest.clone(), cfg.node.name.clone(), cfg.data_dir.clone());
            let cluster_cidr = pod_network.cluster_cidr();
            let conf_dir =
                crate::containerd::Layout::new(&pods::agent_dir(&cfg.data_dir)).cni_conf_dir;
            let mtu = match &pod_network {
                crate::pod_network::PodNetwork::Vxlan(v) => {
                    crate::vxlan::pod_mtu(&crate::vxlan::kernel::IpOverlay, v).await
                }
                _ => None,
            };
            running.spawn(tasks::supervise(
                "agent/cni-config",
                stop.clone(),
                move |stop| {
                    pods::write_cni_config(
                        latest.clone(),
                        node.clone(),
                        data_dir.clone(),
                        conf_dir.clone(),
                        mtu,
                        cluster_cidr,
                        stop,
                    )
                },
            ));
        }
        let protection = pods::protection(&cfg, pressure_tx);
        pods::run(latest, &runtime, &cfg, protection, image_imports, stop).await;
        runtime.stop().await;
    }
    while running.join_next().await.is_some() {}
    tracing::info!("agent stopped");
    Ok(())
}
