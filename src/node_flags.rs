//! The node's flags, shared by `k3rs agent` and `k3rs server` (whose embedded agent runs the
//! server's own node), and the agent configuration they make.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use k3rs_agent::containerd::registries;
use k3rs_agent::dns::{DnsConfig, PORT_LABEL};
use k3rs_agent::ingress::IngressConfig;
use k3rs_agent::join::JoinToken;
use k3rs_agent::kubelet::node_status::{machine, node, NodeConfig};
use k3rs_agent::netpol::NetworkPolicyConfig;
use k3rs_agent::node_agent::{self, AgentConfig, KubeletArgs};
use k3rs_agent::pod_network::backend::UnknownBackend;
use k3rs_agent::pod_network::{self, Backend, PodNetworkConfig};
use k3rs_agent::proxy::args::{ProxyArgError, ProxyArgs};
use k3rs_agent::proxy::{NodeContext, ProxyConfig};

#[derive(Args, Clone)]
pub struct NodeFlags {
    /// Node name (default: the host name, lower case).
    #[arg(long, env = "K3RS_NODE_NAME")]
    pub node_name: Option<String>,
    /// The node's ExternalIP (repeatable or comma-separated), reported in the Node's
    /// `status.addresses` after its InternalIPs.
    #[arg(
        long = "node-external-ip",
        env = "K3RS_NODE_EXTERNAL_IP",
        value_delimiter = ','
    )]
    pub node_external_ip: Vec<IpAddr>,
    /// The resolv.conf the kubelet reads (pods with `dnsPolicy: Default` get its servers and
    /// the node's cluster DNS forwards other names to them; default /etc/resolv.conf);
    /// `--kubelet-arg resolv-conf=…` wins over it.
    #[arg(long, env = "K3RS_RESOLV_CONF", value_name = "FILE")]
    pub resolv_conf: Option<PathBuf>,
    /// A label registered with the node, key=value (repeatable).
    #[arg(long = "node-label", value_parser = node::parse_label)]
    pub node_label: Vec<(String, String)>,
    /// A taint registered with the node, key=value:Effect (repeatable).
    #[arg(long = "node-taint", value_parser = node::parse_taint)]
    pub node_taint: Vec<node::Taint>,
    /// CRI endpoint of the container runtime (default: the supervised containerd's,
    /// unix://<data-dir>/agent/containerd/containerd.sock).
    #[arg(long, env = "K3RS_CONTAINER_RUNTIME_ENDPOINT")]
    pub container_runtime_endpoint: Option<String>,
    /// The pod sandbox ("pause") image (default: the one built into k3rs, imported into the
    /// agent's containerd at start, so no registry is needed).
    #[arg(long, env = "K3RS_PAUSE_IMAGE")]
    pub pause_image: Option<String>,
    /// A kubelet flag as KEY=VALUE (repeatable): cgroup-root, cluster-dns, cluster-domain,
    /// container-log-max-files, container-log-max-size, eviction-hard,
    /// eviction-pressure-transition-period, image-gc-high-threshold, image-gc-low-threshold,
    /// image-minimum-gc-age, max-pods, node-labels, node-status-update-frequency,
    /// pod-manifest-path, port, register-with-taints, resolv-conf; an unknown KEY is refused.
    #[arg(long = "kubelet-arg", value_name = "KEY=VALUE")]
    pub kubelet_arg: Vec<String>,
    /// A kube-proxy flag as KEY=VALUE (repeatable): cluster-cidr, iptables-sync-period,
    /// iptables-min-sync-period; an unknown KEY is refused.
    #[arg(long = "kube-proxy-arg", value_name = "KEY=VALUE")]
    pub kube_proxy_arg: Vec<String>,
    /// Do not run the service proxy (no iptables rules are written).
    #[arg(long, env = "K3RS_DISABLE_KUBE_PROXY", value_parser = crate::switch::parse)]
    pub disable_kube_proxy: bool,
    /// Do not enforce NetworkPolicies on this node (k3s's `--disable-network-policy`; the
    /// server's `--disable network-policy` sets it for its own node).
    #[arg(long, env = "K3RS_DISABLE_NETWORK_POLICY", value_parser = crate::switch::parse)]
    pub disable_network_policy: bool,
    /// Do not run the ingress controller on this node (the server's `--disable ingress` or
    /// `--disable traefik` sets it for its own node).
    #[arg(long, env = "K3RS_DISABLE_INGRESS", value_parser = crate::switch::parse)]
    pub disable_ingress: bool,
    /// The port the node's ingress controller serves plain HTTP on, at each node IP.
    #[arg(long, env = "K3RS_INGRESS_HTTP_PORT", default_value_t = 80)]
    pub ingress_http_port: u16,
    /// The port the node's ingress controller serves HTTPS on, at each node IP.
    #[arg(long, env = "K3RS_INGRESS_HTTPS_PORT", default_value_t = 443)]
    pub ingress_https_port: u16,
    /// Do not answer cluster DNS on this node (the node then serves no `kube-dns` endpoint).
    #[arg(long, env = "K3RS_DISABLE_CLUSTER_DNS", value_parser = crate::switch::parse)]
    pub disable_cluster_dns: bool,
    /// The port the node's cluster DNS answers on, at each node IP (UDP and TCP).
    #[arg(long, env = "K3RS_CLUSTER_DNS_PORT", default_value_t = 53)]
    pub cluster_dns_port: u16,
    /// How pods reach pods on other nodes: `vxlan` (the default: an overlay through the
    /// `flannel.1` VXLAN device, UDP 8472; the nodes only need to reach each other by IP),
    /// `host-gw` (routes to each node's pod CIDR via its InternalIP; the nodes share a layer-2
    /// network) or `none`. `wireguard-native` is refused. The cluster has one backend, the
    /// server's: agents take it from their server; an agent given this flag refuses to start
    /// when it differs from the server's.
    #[arg(long, env = "K3RS_FLANNEL_BACKEND", value_name = "BACKEND",
        value_parser = pod_network::BACKENDS)]
    pub flannel_backend: Option<String>,
    /// The private registry configuration file (k3s's registries.yaml format: mirrors and
    /// per-registry auth and TLS); a missing file is no configuration.
    #[arg(long, env = "K3RS_PRIVATE_REGISTRY", value_name = "FILE",
        default_value = registries::DEFAULT_PATH)]
    pub private_registry: PathBuf,
    /// A registry for the system images: the pod sandbox image (`docker.io/k3rs/pause:…` is
    /// pulled as `<registry>/k3rs/pause:…`) and, on a server, the local-path provisioner's
    /// helper image. Agents without it take their server's.
    #[arg(long, env = "K3RS_SYSTEM_DEFAULT_REGISTRY", value_name = "REGISTRY")]
    pub system_default_registry: Option<String>,
}

/// Why the node's flags cannot make an agent configuration.
#[derive(Debug, thiserror::Error)]
pub enum NodeConfigError {
    #[error(transparent)]
    KubeletArg(#[from] k3rs_agent::node_agent::kubelet_args::KubeletArgError),
    #[error(transparent)]
    ProxyArg(#[from] ProxyArgError),
    #[error("--private-registry: {}", k3rs_agent::report::error_chain(.0))]
    Registries(#[from] registries::Error),
    #[error("{0}")]
    FlannelBackend(String),
}

/// Where the node's agent joins, and as what.
#[derive(Clone)]
pub struct Join {
    pub server: String,
    pub token: Option<JoinToken>,
    pub data_dir: PathBuf,
    pub node_ips: Vec<IpAddr>,
    /// The pod network (the proxy masquerades traffic from outside it to cluster IPs).
    pub cluster_cidr: ipnet::Ipv4Net,
    /// The server's cluster DNS address (`k3rs server`'s own node); `None`: the agent learns
    /// it from the server's `kube-dns` Service.
    pub cluster_dns: Option<IpAddr>,
    pub csr_timeout: Duration,
}

impl NodeFlags {
    /// The `--kubelet-arg`s (after `--resolv-conf`, so that they win over it).
    fn kubelet_args(&self) -> Result<KubeletArgs, NodeConfigError> {
        let items: Vec<String> = (self.resolv_conf.iter())
            .map(|p| format!("resolv-conf={}", p.display()))
            .chain(self.kubelet_arg.iter().cloned())
            .collect();
        Ok(KubeletArgs::parse(&items)?)
    }

    /// `--flannel-backend`, if given; `wireguard-native` is refused (saying why).
    pub fn flannel_backend(&self) -> Result<Option<Backend>, NodeConfigError> {
        match self.flannel_backend.as_deref() {
            Some("wireguard-native") => Err(NodeConfigError::FlannelBackend(
                pod_network::wireguard_refusal(),
            )),
            Some(b) => b
                .parse()
                .map(Some)
                .map_err(|e: UnknownBackend| NodeConfigError::FlannelBackend(e.to_string())),
            None => Ok(None),
        }
    }

    /// Refuses `--kubelet-arg`s, `--kube-proxy-arg`s and a `--flannel-backend` k3rs does not
    /// take, also where no node runs (`k3rs server --disable-agent`), so a typo never waits
    /// for the next start.
    pub fn check_component_args(&self) -> Result<(), NodeConfigError> {
        self.kubelet_args()?;
        self.flannel_backend()?;
        ProxyArgs::parse(&self.kube_proxy_arg)?;
        Ok(())
    }

    /// The agent's configuration, or why the kubelet flags or registries.yaml are wrong.
    pub fn agent_config(&self, join: Join) -> Result<AgentConfig, NodeConfigError> {
        let mut kubelet = self.kubelet_args()?;
        if kubelet.cluster_dns.is_empty() {
            kubelet.cluster_dns.extend(join.cluster_dns);
        }
        let proxy_args = ProxyArgs::parse(&self.kube_proxy_arg)?;
        let registries = registries::load(&self.private_registry)?.unwrap_or_default();
        let name = self.node_name.clone().unwrap_or_else(machine::hostname);
        let mut node = NodeConfig::new(&name, node_agent::node_ips(&join.node_ips));
        node.labels.extend(self.node_label.iter().cloned());
        node.taints = self.node_taint.clone();
        node.external_ips = self.node_external_ip.clone();
        let proxy = (!self.disable_kube_proxy).then(|| {
            proxy_args.apply(ProxyConfig::new(NodeContext {
                node_name: name.clone(),
                cluster_cidr: Some(join.cluster_cidr),
            }))
        });
        let network_policy =
            (!self.disable_network_policy).then(|| NetworkPolicyConfig::new(&name));
        let ingress = (!self.disable_ingress).then(|| {
            IngressConfig::new(
                &name,
                &node.ips,
                self.ingress_http_port,
                self.ingress_https_port,
            )
        });
        let dns = (!self.disable_cluster_dns).then(|| DnsConfig {
            listen: node
                .ips
                .iter()
                .map(|ip| std::net::SocketAddr::new(*ip, self.cluster_dns_port))
                .collect(),
            cluster_domain: kubelet
                .cluster_domain
                .clone()
                .unwrap_or_else(|| "cluster.local".into()),
            upstreams: kubelet
                .resolv_conf
                .as_deref()
                .map(|p| k3rs_agent::dns::upstream::host(Some(p))),
            allowed: k3rs_agent::dns::sources::Allowed {
                nets: vec![ipnet::IpNet::V4(join.cluster_cidr)],
                local: node.ips.clone(),
            },
        });
        if dns.is_some() {
            node.labels
                .insert(PORT_LABEL.to_string(), self.cluster_dns_port.to_string());
        }
        let pod_network = PodNetworkConfig {
            backend: self.flannel_backend()?,
            node_name: name.clone(),
            node_ip: node.ips.iter().find_map(|ip| match ip {
                IpAddr::V4(v4) => Some(*v4),
                IpAddr::V6(_) => None,
            }),
            cluster_cidr: Some(ipnet::IpNet::V4(join.cluster_cidr)),
        };
        Ok(AgentConfig {
            dns,
            pod_network,
            server: join.server,
            token: join.token,
            proxy,
            network_policy,
            ingress,
            node,
            container_runtime_endpoint: self.container_runtime_endpoint.clone(),
            pause_image: self.pause_image.clone(),
            data_dir: join.data_dir,
            kubelet,
            csr_timeout: join.csr_timeout,
            registries,
            system_default_registry: self.system_default_registry.clone(),
            notify_ready: true,
        })
    }
}
