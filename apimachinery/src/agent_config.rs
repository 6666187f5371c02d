//! `GET /v1-k3rs/agent-config`: the server's settings every agent takes unless its own flags
//! say otherwise, as k3s agents read theirs from the server (`/v1-k3s/config`). Served to
//! nodes (`system:nodes`) and cluster admins.

use serde::{Deserialize, Serialize};

/// The route's path.
pub const PATH: &str = "/v1-k3rs/agent-config";

/// What the server tells its agents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// `--cluster-dns`: the nameserver kubelets give pods (the `kube-dns` Service's ClusterIP).
    #[serde(rename = "clusterDNS", default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<std::net::IpAddr>,
    /// `--system-default-registry`: where the system images are pulled from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_default_registry: Option<String>,
    /// `--disable network-policy`: agents do not enforce NetworkPolicies.
    #[serde(default)]
    pub disable_network_policy: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form() {
        let c = AgentConfig {
            cluster_dns: vec!["10.96.0.10".parse().unwrap()],
            system_default_registry: Some("registry.local:5000".into()),
            disable_network_policy: true,
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"clusterDNS": ["10.96.0.10"],
                "systemDefaultRegistry": "registry.local:5000", "disableNetworkPolicy": true})
        );
        let empty: AgentConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, AgentConfig::default());
    }
}
