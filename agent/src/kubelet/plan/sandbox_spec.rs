//! Everything the executor needs to create a pod sandbox (upstream's
//! `generatePodSandboxConfig`), as plain data it maps onto CRI's `PodSandboxConfig`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::dns::{hostname_and_domain, pod_dns, DnsConfig, NodeDns};
use super::labels::{pod_log_directory, sandbox_annotations, sandbox_labels};
use super::spec::{containers, host_network};

/// A container port as the sandbox publishes it (`hostPort` 0: not published).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub protocol: String,
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
}

/// A pod sandbox to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    /// `None` for host-network pods (they keep the node's).
    pub hostname: Option<String>,
    pub log_directory: String,
    pub dns: DnsConfig,
    pub port_mappings: Vec<PortMapping>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub host_network: bool,
    pub host_pid: bool,
    pub host_ipc: bool,
    /// `securityContext.sysctls`, by name.
    pub sysctls: BTreeMap<String, String>,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
}

/// Builds the sandbox of `pod` for its `attempt`-th sandbox on a node with `dns` settings.
pub fn sandbox_spec(pod: &Pod, attempt: u32, dns: &NodeDns) -> SandboxSpec {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    let sc = spec.and_then(|s| s.security_context.as_ref());
    let host_net = host_network(pod);
    let port_mappings = containers(pod)
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| PortMapping {
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect();
    SandboxSpec {
        name: m.name.clone().unwrap_or_default(),
        namespace: m.namespace.clone().unwrap_or_default(),
        uid: m.uid.clone().unwrap_or_default(),
        attempt,
        hostname: (!host_net).then(|| hostname_and_domain(pod, &dns.cluster_domain).0),
        log_directory: pod_log_directory(pod),
        dns: pod_dns(pod, dns),
        port_mappings,
        labels: sandbox_labels(pod),
        annotations: sandbox_annotations(pod),
        host_network: host_net,
        host_pid: spec.and_then(|s| s.host_pid).unwrap_or(false),
        host_ipc: spec.and_then(|s| s.host_ipc).unwrap_or(false),
        sysctls: sc
            .and_then(|s| s.sysctls.as_ref())
            .into_iter()
            .flatten()
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect(),
        run_as_user: sc.and_then(|s| s.run_as_user),
        run_as_group: sc.and_then(|s| s.run_as_group),
        supplemental_groups: sc
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::labels::POD_UID;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::json;

    fn node() -> NodeDns {
        NodeDns {
            cluster_dns: vec!["10.43.0.10".parse().unwrap()],
            cluster_domain: "cluster.local".into(),
            host: None,
            node_ips: vec![],
        }
    }

    #[test]
    fn a_pod_network_sandbox() {
        let p = pod(json!({"spec": {
            "securityContext": {"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
                "runAsUser": 1000},
            "containers": [{"name": "c", "image": "i", "ports": [
                {"containerPort": 80, "hostPort": 8080},
                {"containerPort": 53, "protocol": "UDP"}]}]}}));
        let s = sandbox_spec(&p, 1, &node());
        assert_eq!(
            (
                s.name.as_str(),
                s.namespace.as_str(),
                s.uid.as_str(),
                s.attempt
            ),
            ("web", "default", "u1", 1)
        );
        assert_eq!(s.hostname.as_deref(), Some("web"));
        assert_eq!(s.log_directory, "/var/log/pods/default_web_u1");
        assert_eq!(s.dns.servers, vec!["10.43.0.10"]);
        assert_eq!(
            s.port_mappings,
            vec![
                PortMapping {
                    protocol: "TCP".into(),
                    container_port: 80,
                    host_port: 8080,
                    host_ip: String::new()
                },
                PortMapping {
                    protocol: "UDP".into(),
                    container_port: 53,
                    host_port: 0,
                    host_ip: String::new()
                },
            ]
        );
        assert_eq!(s.labels[POD_UID], "u1");
        assert!(!s.host_network);
        assert_eq!(
            s.sysctls,
            [(
                "net.ipv4.ip_unprivileged_port_start".to_string(),
                "0".to_string()
            )]
            .into()
        );
        assert_eq!(s.run_as_user, Some(1000));
    }

    #[test]
    fn a_host_network_sandbox_keeps_the_nodes_hostname() {
        let p = pod(json!({"spec": {"hostNetwork": true, "hostPID": true}}));
        let s = sandbox_spec(&p, 0, &node());
        assert_eq!(s.hostname, None);
        assert!(s.host_network && s.host_pid && !s.host_ipc);
        // ClusterFirst on the host network falls back to the host's resolver (here none).
        assert_eq!(s.dns.servers, vec!["127.0.0.1"]);
    }
}
