//! The Node object a kubelet registers and the status it reports (upstream kubelet's
//! `initialNode` and node status setters): labels, taints, addresses, capacity and
//! allocatable, `nodeInfo`, the kubelet endpoint and the conditions. Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;

pub use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k3rs_apimachinery::labels;

use super::conditions::{MEMORY_AVAILABLE_MIN, NODEFS_AVAILABLE_MIN_PERCENT};
use super::machine::Machine;

/// The kubelet version nodes report (the server's `gitVersion`).
pub const KUBELET_VERSION: &str = k3rs_apimachinery::version::GIT_VERSION;

/// The machine's architecture in Go's (and so Kubernetes') words.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// How the node registers itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The Node's name (`--node-name`, else the hostname); the agent's client certificate is
    /// for `system:node:<name>`.
    pub name: String,
    /// InternalIPs, in order.
    pub ips: Vec<IpAddr>,
    /// ExternalIPs (`--node-external-ip`), in order, reported after the InternalIPs.
    pub external_ips: Vec<IpAddr>,
    /// `--node-label`s.
    pub labels: BTreeMap<String, String>,
    /// `--node-taint`s (registered as `spec.taints`).
    pub taints: Vec<Taint>,
    /// The agent runs inside a server: the node gets the control-plane (and, as k3s, master)
    /// role labels.
    pub control_plane: bool,
    /// The pod capacity reported (`--kubelet-arg=max-pods`, upstream's default 110).
    pub max_pods: u32,
    /// The kubelet API's port, published as `status.daemonEndpoints.kubeletEndpoint.Port`
    /// (upstream's 10250).
    pub kubelet_port: i32,
    /// What `system-reserved` and `kube-reserved` keep from pods.
    pub reserved: Reserved,
}

/// Resources kept from pods (`--kubelet-arg=system-reserved=…` plus `kube-reserved=…`):
/// node allocatable is capacity less these (and less the default hard eviction thresholds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reserved {
    /// Millicores (`cpu=500m` is 500).
    pub cpu_millis: u64,
    /// Bytes.
    pub memory: u64,
    /// Bytes.
    pub ephemeral_storage: u64,
}

impl Reserved {
    /// Both reservations together.
    pub fn plus(self, other: Reserved) -> Reserved {
        Reserved {
            cpu_millis: self.cpu_millis + other.cpu_millis,
            memory: self.memory + other.memory,
            ephemeral_storage: self.ephemeral_storage + other.ephemeral_storage,
        }
    }
}

impl NodeConfig {
    /// A node named `name` at `ips` with upstream's defaults (110 pods, port 10250).
    pub fn new(name: &str, ips: Vec<IpAddr>) -> NodeConfig {
        NodeConfig {
            name: name.to_string(),
            ips,
            external_ips: Vec::new(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            control_plane: false,
            max_pods: 110,
            kubelet_port: 10250,
            reserved: Reserved::default(),
        }
    }
}

/// A `--node-label` the kubelet refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// No `=`.
    #[error("invalid node label {0:?}: expected key=value")]
    NotKeyValue(String),
    /// An empty key.
    #[error("invalid node label {0:?}: the key is empty")]
    EmptyKey(String),
    /// A `kubernetes.io`/`k8s.io` label (the key) a kubelet may not set.
    #[error("unknown 'kubernetes.io' or 'k8s.io' label {key:?} specified with --node-label: labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})", labels::KUBELET_LABEL_DOMAINS.join(", "), labels::KUBELET_LABELS.join(", "))]
    Restricted {
        /// The label's key.
        key: String,
    },
}

/// A `--node-taint` the kubelet refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    /// No `:Effect`.
    #[error("invalid node taint {0:?}: expected key=value:Effect")]
    NoEffect(String),
    /// An effect other than the three.
    #[error("invalid node taint {0:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute")]
    Effect(String),
    /// An empty key.
    #[error("invalid node taint {0:?}: the key is empty")]
    EmptyKey(String),
}

/// Parses a `--node-label` `key=value`, refusing what upstream kubelet refuses: labels in the
/// `kubernetes.io`/`k8s.io` domains that a kubelet may not set itself.
pub fn parse_label(s: &str) -> Result<(String, String), LabelError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| LabelError::NotKeyValue(s.to_string()))?;
    if k.is_empty() {
        return Err(LabelError::EmptyKey(s.to_string()));
    }
    if labels::restricted_for_kubelet(k) {
        return Err(LabelError::Restricted { key: k.to_string() });
    }
    Ok((k.to_string(), v.to_string()))
}

/// Parses a `--node-taint` `key=value:Effect` or `key:Effect`.
pub fn parse_taint(s: &str) -> Result<Taint, TaintError> {
    let (kv, effect) = s
        .rsplit_once(':')
        .ok_or_else(|| TaintError::NoEffect(s.to_string()))?;
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(TaintError::Effect(s.to_string()));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (kv, None),
    };
    if key.is_empty() {
        return Err(TaintError::EmptyKey(s.to_string()));
    }
    Ok(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

/// The node's labels: the kubelet's own, the role labels of a server, then `--node-label`s.
pub(crate) fn labels(cfg: &NodeConfig) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = [
        ("beta.kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", go_arch()),
        ("kubernetes.io/hostname", cfg.name.as_str()),
        ("kubernetes.io/os", "linux"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if cfg.control_plane {
        l.insert(
            "node-role.kubernetes.io/control-plane".into(),
            "true".into(),
        );
        l.insert("node-role.kubernetes.io/master".into(), "true".into());
    }
    l.extend(cfg.labels.clone());
    l
}

/// Capacity and allocatable (capacity minus `reserved` and the default hard eviction
/// thresholds), in the units upstream reports (memory and storage capacity in Ki, allocatable
/// storage in bytes, reserved CPU in millicores).
pub(crate) fn resources(
    m: &Machine,
    max_pods: u32,
    reserved: Reserved,
) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let q = |s: String| Quantity(s);
    let common = |cpu: String, memory: String, storage: String| {
        [
            ("cpu", cpu),
            ("ephemeral-storage", storage),
            ("hugepages-1Gi", "0".to_string()),
            ("hugepages-2Mi", "0".to_string()),
            ("memory", memory),
            ("pods", max_pods.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), q(v)))
        .collect::<BTreeMap<_, _>>()
    };
    let capacity = common(
        m.cpus.to_string(),
        format!("{}Ki", m.memory_bytes / 1024),
        format!("{}Ki", m.fs_bytes / 1024),
    );
    let cpu = match reserved.cpu_millis {
        0 => m.cpus.to_string(),
        r => format!("{}m", (m.cpus * 1000).saturating_sub(r)),
    };
    let memory = m
        .memory_bytes
        .saturating_sub(MEMORY_AVAILABLE_MIN)
        .saturating_sub(reserved.memory);
    let storage = (m.fs_bytes - m.fs_bytes * NODEFS_AVAILABLE_MIN_PERCENT / 100)
        .saturating_sub(reserved.ephemeral_storage);
    let allocatable = common(cpu, format!("{}Ki", memory / 1024), storage.to_string());
    (capacity, allocatable)
}

/// `status.nodeInfo`.
pub(crate) fn node_info(m: &Machine, runtime_version: &str) -> NodeSystemInfo {
    NodeSystemInfo {
        architecture: go_arch().into(),
        boot_id: m.boot_id.clone(),
        container_runtime_version: runtime_version.into(),
        kernel_version: m.kernel_version.clone(),
        kube_proxy_version: String::new(),
        kubelet_version: KUBELET_VERSION.into(),
        machine_id: m.machine_id.clone(),
        operating_system: "linux".into(),
        os_image: m.os_image.clone(),
        system_uuid: m.system_uuid.clone(),
        swap: None,
    }
}

/// The node's status: addresses, resources, nodeInfo, the kubelet endpoint and `conditions`.
pub(crate) fn status(
    cfg: &NodeConfig,
    m: &Machine,
    runtime_version: &str,
    conditions: Vec<NodeCondition>,
) -> NodeStatus {
    let (capacity, allocatable) = resources(m, cfg.max_pods, cfg.reserved);
    let typed = |type_: &str, ips: &[IpAddr]| {
        ips.iter()
            .map(|ip| NodeAddress {
                type_: type_.into(),
                address: ip.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let mut addresses = typed("InternalIP", &cfg.ips);
    addresses.extend(typed("ExternalIP", &cfg.external_ips));
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: cfg.name.clone(),
    });
    NodeStatus {
        addresses: Some(addresses),
        allocatable: Some(allocatable),
        capacity: Some(capacity),
        conditions: Some(conditions),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: cfg.kubelet_port,
            }),
        }),
        node_info: Some(node_info(m, runtime_version)),
        ..NodeStatus::default()
    }
}

/// The Node to register: labels, the kubelet's annotations, the taints and `status`.
pub(crate) fn node_object(cfg: &NodeConfig, status: NodeStatus) -> Node {
    let annotations = [
        ("node.alpha.kubernetes.io/ttl", "0"),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach",
            "true",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(cfg.name.clone()),
            labels: Some(labels(cfg)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!cfg.taints.is_empty()).then(|| cfg.taints.clone()),
            ..NodeSpec::default()
        }),
        status: Some(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine() -> Machine {
        Machine {
            cpus: 4,
            memory_bytes: 16_393_056 * 1024,
            memory_available_bytes: 8 << 30,
            fs_bytes: 100 * 1024 * 1024 * 1024,
            fs_available_bytes: 50 * 1024 * 1024 * 1024,
            kernel_version: "6.1.0".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
            machine_id: "m".into(),
            system_uuid: "u".into(),
            boot_id: "b".into(),
        }
    }

    #[test]
    fn labels_and_taints_are_parsed_like_the_kubelets_flags() {
        assert_eq!(parse_label("tier=edge"), Ok(("tier".into(), "edge".into())));
        assert_eq!(
            parse_label("node.kubernetes.io/pool=a"),
            Ok(("node.kubernetes.io/pool".into(), "a".into()))
        );
        assert!(parse_label("node-role.kubernetes.io/worker=true")
            .unwrap_err()
            .to_string()
            .starts_with(
                "unknown 'kubernetes.io' or 'k8s.io' label \"node-role.kubernetes.io/worker\""
            ));
        assert!(parse_label("novalue").is_err());
        assert_eq!(
            parse_taint("dedicated=edge:NoSchedule"),
            Ok(Taint {
                key: "dedicated".into(),
                value: Some("edge".into()),
                effect: "NoSchedule".into(),
                time_added: None
            })
        );
        assert_eq!(parse_taint("gpu:NoExecute").unwrap().value, None);
        assert!(parse_taint("a=b:Sometimes").is_err());
        assert!(parse_taint("a=b").is_err());
    }

    #[test]
    fn servers_get_the_role_labels_and_flags_come_last() {
        let mut cfg = NodeConfig::new("n1", vec![]);
        cfg.control_plane = true;
        cfg.labels.insert("tier".into(), "edge".into());
        let l = labels(&cfg);
        let arch = go_arch();
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            json!({
                "beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch, "kubernetes.io/hostname": "n1",
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/control-plane": "true",
                "node-role.kubernetes.io/master": "true",
                "tier": "edge",
            })
        );
        assert!(!labels(&NodeConfig::new("n1", vec![]))
            .contains_key("node-role.kubernetes.io/control-plane"));
    }

    #[test]
    fn allocatable_is_capacity_minus_the_eviction_thresholds() {
        let (cap, alloc) = resources(&machine(), 110, Reserved::default());
        let v = |m: &BTreeMap<String, Quantity>| serde_json::to_value(m).unwrap();
        assert_eq!(
            v(&cap),
            json!({"cpu": "4", "ephemeral-storage": "104857600Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "16393056Ki", "pods": "110"})
        );
        assert_eq!(
            v(&alloc),
            json!({"cpu": "4", "ephemeral-storage": "96636764160", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "16290656Ki", "pods": "110"})
        );
        let reserved = Reserved {
            cpu_millis: 500,
            memory: 1 << 30,
            ephemeral_storage: 1 << 30,
        };
        let (_, alloc) = resources(&machine(), 110, reserved);
        assert_eq!(
            v(&alloc),
            json!({"cpu": "3500m", "ephemeral-storage": "95563022336",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "15242080Ki",
                "pods": "110"})
        );
    }

    #[test]
    fn the_node_carries_addresses_info_taints_and_the_endpoint() {
        let mut cfg = NodeConfig::new("n1", vec!["10.0.0.5".parse().unwrap()]);
        cfg.taints.push(parse_taint("k=v:NoSchedule").unwrap());
        let n = node_object(&cfg, status(&cfg, &machine(), "containerd://2.0.5", vec![]));
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(
            v["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "Hostname", "address": "n1"}])
        );
        assert_eq!(
            v["spec"]["taints"],
            json!([{"key": "k", "value": "v", "effect": "NoSchedule"}])
        );
        // --node-external-ip: after the InternalIPs, before the Hostname (the kubelet's order).
        cfg.external_ips = vec!["203.0.113.5".parse().unwrap()];
        let s = status(&cfg, &machine(), "containerd://2.0.5", vec![]);
        assert_eq!(
            serde_json::to_value(s.addresses).unwrap(),
            json!([{"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "ExternalIP", "address": "203.0.113.5"},
                {"type": "Hostname", "address": "n1"}])
        );
        assert_eq!(
            v["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 10250}})
        );
        assert_eq!(
            v["status"]["nodeInfo"],
            json!({"architecture": go_arch(), "bootID": "b",
                "containerRuntimeVersion": "containerd://2.0.5", "kernelVersion": "6.1.0",
                "kubeProxyVersion": "", "kubeletVersion": KUBELET_VERSION, "machineID": "m",
                "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
                "systemUUID": "u"})
        );
        assert_eq!(
            v["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"],
            json!("0")
        );
    }
}
