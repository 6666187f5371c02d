//! What an agent takes from its server where its own flags are silent, as k3s agents read
//! theirs (`/v1-k3s/config`): `GET /v1-k3rs/agent-config`
//! ([`k3rs_apimachinery::agent_config`]) gives
//! - the cluster DNS address the kubelet gives pods (their resolv.conf `nameserver` under
//!   `dnsPolicy: ClusterFirst`), unless `--kubelet-arg cluster-dns` is set; without an
//!   answer, k3s's default 10.43.0.10;
//! - `--system-default-registry` (the sandbox image's registry), unless the agent's own flag
//!   is given;
//! - the server's `--disable network-policy`, which turns this node's enforcement off.
//!
//! `k3rs server` hands its embedded agent the same settings directly.

use std::time::Duration;

use k3rs_apimachinery::agent_config::{AgentConfig as FromServer, PATH};

use super::pods::DEFAULT_CLUSTER_DNS;
use super::AgentConfig;

/// How often the server is asked before the agent goes on without its answer, and the
/// first pause (doubling): the API is usually a moment away (the embedded agent starts with
/// its server), and the container runtime waits for the answer.
const ATTEMPTS: u32 = 6;
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// `cfg` with the server's settings where its own flags left them open.
pub fn apply(mut cfg: AgentConfig, server: &FromServer) -> AgentConfig {
    if cfg.kubelet.cluster_dns.is_empty() {
        cfg.kubelet.cluster_dns = if server.cluster_dns.is_empty() {
            vec![DEFAULT_CLUSTER_DNS.parse().expect("an IP")]
        } else {
            server.cluster_dns.clone()
        };
    }
    if cfg.system_default_registry.is_none() {
        cfg.system_default_registry = server.system_default_registry.clone();
    }
    if server.disable_network_policy {
        cfg.network_policy = None;
    }
    cfg
}

/// The server's settings, asked for a few times (an empty set when it does not answer; the
/// reason is logged).
pub async fn fetch(client: kube::Client) -> FromServer {
    let mut pause = FIRST_PAUSE;
    for attempt in 1..=ATTEMPTS {
        let request = http::Request::get(PATH)
            .body(Vec::new())
            .expect("a valid request");
        match client.request::<FromServer>(request).await {
            Ok(config) => return config,
            // A server without the route: nothing to learn.
            Err(kube::Error::Api(s)) if s.code == 404 => return FromServer::default(),
            Err(e) if attempt == ATTEMPTS => {
                tracing::warn!("reading {PATH} from the server: {e}; using the agent's defaults")
            }
            Err(e) => tracing::debug!("reading {PATH}: {e}; retrying"),
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    FromServer::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::node_status::NodeConfig;
    use std::net::IpAddr;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn agent() -> AgentConfig {
        AgentConfig {
            server: "https://127.0.0.1:6443".into(),
            token: None,
            node: NodeConfig::new("n1", vec![ip("10.0.0.5")]),
            data_dir: "/var/lib/k3rs".into(),
            container_runtime_endpoint: None,
            pause_image: None,
            kubelet: Default::default(),
            csr_timeout: Duration::from_secs(60),
            proxy: None,
            network_policy: Some(crate::netpol::NetworkPolicyConfig::new("n1")),
            dns: None,
            pod_network: crate::pod_network::PodNetwork::None,
            registries: Default::default(),
            system_default_registry: None,
            notify_ready: true,
        }
    }

    #[test]
    fn the_servers_settings_fill_what_the_flags_left_open() {
        let server = FromServer {
            cluster_dns: vec![ip("10.96.0.10")],
            system_default_registry: Some("registry.local:5000".into()),
            disable_network_policy: true,
        };
        let cfg = apply(agent(), &server);
        assert_eq!(cfg.kubelet.cluster_dns, [ip("10.96.0.10")]);
        assert_eq!(
            cfg.system_default_registry.as_deref(),
            Some("registry.local:5000")
        );
        assert!(cfg.network_policy.is_none());
        // The agent's own flags win.
        let mut own = agent();
        own.kubelet.cluster_dns = vec![ip("10.0.0.53")];
        own.system_default_registry = Some("mine.local".into());
        let cfg = apply(own, &server);
        assert_eq!(cfg.kubelet.cluster_dns, [ip("10.0.0.53")]);
        assert_eq!(cfg.system_default_registry.as_deref(), Some("mine.local"));
    }

    #[test]
    fn a_silent_server_leaves_k3s_defaults() {
        let cfg = apply(agent(), &FromServer::default());
        assert_eq!(cfg.kubelet.cluster_dns, [ip("10.43.0.10")]);
        assert_eq!(cfg.system_default_registry, None);
        assert!(cfg.network_policy.is_some());
    }
}
