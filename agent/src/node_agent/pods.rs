//! The node's pods: the container runtime (the agent's own containerd with the air-gap images
//! of `<data-dir>/agent/images/*.tar` imported, or `--container-runtime-endpoint`), the CNI
//! conflist once the server assigned the node its `spec.podCIDR`, and the pod executor
//! ([`crate::kubelet::pods`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::AgentConfig;
use crate::cni;
use crate::containerd::registries::system_image::with_registry;
use crate::containerd::{self, host, Config, Endpoint, Runtime, SupervisorOptions};
use crate::kubelet::eviction::NodeProtection;
use crate::kubelet::node_status::conditions::Pressure;
use crate::kubelet::node_status::{machine::Machine, node};
use crate::kubelet::plan::{parse_resolv_conf, Allocatable, NodeDns, Quantity};
use crate::kubelet::pods::NodeContext;
use crate::report::error_chain;

/// The cluster DNS address when `--kubelet-arg cluster-dns` is not given (k3s's).
pub const DEFAULT_CLUSTER_DNS: &str = "10.43.0.10";

/// `<data-dir>/agent`.
pub fn agent_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("agent")
}

/// The static pod manifests when `--kubelet-arg pod-manifest-path` is not given (k3s's
/// `<data-dir>/agent/pod-manifests`).
pub fn pod_manifest_dir(data_dir: &Path) -> PathBuf {
    agent_dir(data_dir).join("pod-manifests")
}

/// The pod sandbox image: `--pause-image`, else the pause image embedded in the binary
/// ([`crate::images::pause`]), under `--system-default-registry` when given (then pulled
/// from that registry: the embedded copy is imported only under its own name).
pub fn sandbox_image(cfg: &AgentConfig) -> String {
    match cfg.pause_image.as_deref() {
        Some(image) => image.to_string(),
        None => with_registry(
            cfg.system_default_registry.as_deref().unwrap_or_default(),
            crate::images::pause::default_image(),
        ),
    }
}

/// The containerd config for this agent (adapted to the host), with its private registries
/// and the sandbox image under `--system-default-registry`.
pub fn containerd_config(cfg: &AgentConfig) -> Config {
    let mut config = Config::new(&agent_dir(&cfg.data_dir), &sandbox_image(cfg));
    config.registries = cfg.registries.clone();
    for (registry, mirror) in &config.registries.mirrors {
        if !mirror.rewrite.is_empty() {
            tracing::warn!(
                registry,
                "registries.yaml: the mirror's rewrite is written to hosts.toml, but upstream \
                 containerd ignores it (only k3s's containerd build applies it)"
            );
        }
    }
    for note in host::adapt(&mut config) {
        tracing::info!("containerd: {note}");
    }
    config
}

/// Brings the runtime up: `--container-runtime-endpoint` if given, else the agent's own
/// containerd with the embedded pause image (when it is the sandbox image) and the images of
/// `<data-dir>/agent/images` imported.
pub async fn start_runtime(cfg: &AgentConfig) -> Result<Runtime, containerd::runtime::Error> {
    let endpoint = match &cfg.container_runtime_endpoint {
        Some(e) => Endpoint::External(PathBuf::from(e.strip_prefix("unix://").unwrap_or(e))),
        None => Endpoint::Supervised {
            config: containerd_config(cfg),
            options: SupervisorOptions::default(),
            images_dir: Some(agent_dir(&cfg.data_dir).join("images")),
        },
    };
    let runtime = Runtime::start(endpoint).await?;
    for (tarball, images) in &runtime.imported.imported {
        tracing::info!(tarball = %tarball.display(), ?images, "imported");
    }
    Ok(runtime)
}

/// [`start_runtime`], retried every few seconds until it succeeds (`None`: stopped first).
pub async fn start_runtime_retrying(
    cfg: &AgentConfig,
    stop: &CancellationToken,
) -> Option<Runtime> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            r = start_runtime(cfg) => match r {
                Ok(runtime) => return Some(runtime),
                Err(e) => tracing::warn!("the container runtime is down: {}", error_chain(&e)),
            },
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// What the executor knows of the node.
pub fn node_context(cfg: &AgentConfig) -> NodeContext {
    let m = Machine::observe(&cfg.data_dir);
    let (_, allocatable) = node::resources(&m, cfg.node.max_pods);
    let q = |k: &str| allocatable.get(k).map(Quantity::of).unwrap_or_default();
    let cluster_dns = if cfg.kubelet.cluster_dns.is_empty() {
        vec![DEFAULT_CLUSTER_DNS.parse().expect("an IP")]
    } else {
        cfg.kubelet.cluster_dns.clone()
    };
    let resolv_conf = (cfg.kubelet.resolv_conf.as_deref())
        .unwrap_or(std::path::Path::new(crate::dns::upstream::RESOLV_CONF));
    let host = std::fs::read_to_string(resolv_conf)
        .ok()
        .map(|t| parse_resolv_conf(&t));
    NodeContext {
        host_ips: cfg.node.ips.clone(),
        dns: NodeDns {
            cluster_dns,
            cluster_domain: cfg
                .kubelet
                .cluster_domain
                .clone()
                .unwrap_or_else(|| "cluster.local".into()),
            host,
            node_ips: cfg.node.ips.clone(),
        },
        allocatable: Allocatable {
            cpu: q("cpu"),
            memory: q("memory"),
            ephemeral_storage: q("ephemeral-storage"),
        },
        memory_capacity: m.memory_bytes as i64,
        cgroup_root: cfg
            .kubelet
            .cgroup_root
            .clone()
            .unwrap_or_else(|| "/".into()),
        pods_dir: agent_dir(&cfg.data_dir).join("pods"),
        pod_logs_dir: PathBuf::from(crate::kubelet::plan::labels::POD_LOGS_ROOT),
    }
}

/// The node's pod CIDRs, once assigned.
fn pod_cidrs(n: &Node) -> Vec<ipnet::IpNet> {
    let spec = n.spec.as_ref();
    let listed = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
    let single = spec.and_then(|s| s.pod_cidr.clone());
    let all = if listed.is_empty() {
        single.into_iter().collect()
    } else {
        listed
    };
    all.iter().filter_map(|c| c.parse().ok()).collect()
}

/// Waits until the Node has a pod CIDR, puts the pods' masquerading in place
/// ([`cni::masquerade`], sparing `cluster_cidr`), then writes the CNI conflist into
/// `conf_dir` (containerd picks it up and its network becomes ready).
pub async fn write_cni_config(
    clients: watch::Receiver<kube::Client>,
    node_name: String,
    data_dir: PathBuf,
    conf_dir: PathBuf,
    mtu: Option<u32>,
    cluster_cidr: Option<ipnet::IpNet>,
    stop: CancellationToken,
) {
    loop {
        let api: Api<Node> = Api::all(clients.borrow().clone());
        match api.get_opt(&node_name).await {
            Ok(Some(n)) if !pod_cidrs(&n).is_empty() => {
                let mut config = cni::Config::new(pod_cidrs(&n), &agent_dir(&data_dir));
                config.mtu = mtu;
                let ipt = crate::proxy::iptables::SystemIptables;
                let masquerade =
                    cni::masquerade::ensure(&ipt, &config.pod_cidrs, cluster_cidr.as_ref()).await;
                let written = match masquerade {
                    Ok(()) => cni::write(&config, &conf_dir),
                    Err(e) => {
                        tracing::warn!("masquerading the pods' outbound traffic: {e}");
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                        }
                        continue;
                    }
                };
                match written {
                    Ok(path) => {
                        tracing::info!(conflist = %path.display(), cidrs = ?config.pod_cidrs, "CNI network configured");
                        // Done; a supervised task that returned would count as failed.
                        stop.cancelled().await;
                        return;
                    }
                    Err(e) => tracing::warn!("writing the CNI conflist: {e}"),
                }
            }
            Ok(_) => tracing::debug!(node = %node_name, "no pod CIDR yet"),
            Err(e) => tracing::warn!(node = %node_name, "reading the node: {e}"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// The node's disk and memory protection: the `--kubelet-arg` settings, the data dir as the
/// node filesystem and the agent's containerd root as the image filesystem (an external
/// runtime's is not known: the node's counts).
pub fn protection(cfg: &AgentConfig, pressure: watch::Sender<Pressure>) -> NodeProtection {
    NodeProtection {
        eviction: cfg.kubelet.eviction.clone(),
        image_gc: cfg.kubelet.image_gc,
        node_dir: cfg.data_dir.clone(),
        image_dir: cfg
            .container_runtime_endpoint
            .is_none()
            .then(|| containerd::Layout::new(&agent_dir(&cfg.data_dir)).root),
        sandbox_image: sandbox_image(cfg),
        pressure,
    }
}

/// Runs the pods of the node on `runtime` until `stop`, protected by `protection`.
pub async fn run(
    clients: watch::Receiver<kube::Client>,
    runtime: &Runtime,
    cfg: &AgentConfig,
    protection: NodeProtection,
    stop: CancellationToken,
) {
    let cri = Arc::new(runtime.cri.clone());
    crate::kubelet::pods::run(
        clients,
        cri.clone(),
        cri,
        cfg.node.name.clone(),
        node_context(cfg),
        Some(
            cfg.kubelet
                .pod_manifest_path
                .clone()
                .unwrap_or_else(|| pod_manifest_dir(&cfg.data_dir)),
        ),
        Some(protection),
        stop,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_cidrs_prefer_the_list() {
        let n: Node = serde_json::from_value(json!({"spec": {
            "podCIDR": "10.42.1.0/24", "podCIDRs": ["10.42.1.0/24", "fd00:1::/64"]}}))
        .unwrap();
        assert_eq!(
            pod_cidrs(&n),
            vec![
                "10.42.1.0/24".parse::<ipnet::IpNet>().unwrap(),
                "fd00:1::/64".parse().unwrap()
            ]
        );
        let single: Node =
            serde_json::from_value(json!({"spec": {"podCIDR": "10.42.2.0/24"}})).unwrap();
        assert_eq!(pod_cidrs(&single).len(), 1);
        assert!(pod_cidrs(&Node::default()).is_empty());
    }
}
