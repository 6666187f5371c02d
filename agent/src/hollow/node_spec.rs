//! The objects a hollow kubelet writes about its node: the Node it registers and the status it
//! reports (its Lease is the real kubelet's, [`crate::kubelet::node_status::lease`]); pure
//! builders, no I/O.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k3rs_apimachinery::labels::HOLLOW_NODE_ANNOTATION;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

pub use crate::kubelet::node_status::node::{go_arch, KUBELET_VERSION};

/// Label every hollow node carries (the node's instance type), which the agent's node watch
/// selects on.
pub const HOLLOW_LABEL: (&str, &str) = ("node.kubernetes.io/instance-type", "hollow");

/// What every hollow node of one agent reports (its capacity, also its allocatable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShape {
    /// `cpu` (a quantity, default 4).
    pub cpu: String,
    /// `memory` (default 16Gi).
    pub memory: String,
    /// `pods` (default 110, the kubelet's `max-pods`).
    pub pods: String,
    /// `ephemeral-storage` (default 100Gi).
    pub ephemeral_storage: String,
}

impl Default for NodeShape {
    fn default() -> Self {
        NodeShape {
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: "110".into(),
            ephemeral_storage: "100Gi".into(),
        }
    }
}

/// One hollow node: its name, its address and its place among the agent's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HollowNode {
    /// `<name_prefix><index>`.
    pub name: String,
    /// Its place among the agent's nodes, from 0.
    pub index: usize,
    /// Its InternalIP.
    pub ip: IpAddr,
}

/// The InternalIP of the node with `index`: the `index+1`-th address of 198.18.0.0/15 (the
/// benchmarking range), wrapping after 131,070 nodes. Nothing answers there, and a host's
/// default route may still carry packets to it: the Node's [`HOLLOW_NODE_ANNOTATION`] keeps
/// the API server from dialing it.
pub fn node_ip(index: usize) -> IpAddr {
    let base = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0));
    IpAddr::V4(base.wrapping_add((index as u32 % 131_070) + 1).into())
}

fn time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The Node object to register (metadata, no spec, the initial status).
pub fn node_object(node: &HollowNode, shape: &NodeShape, now: Timestamp) -> Node {
    let labels: BTreeMap<&str, &str> = [
        ("beta.kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", go_arch()),
        ("kubernetes.io/hostname", node.name.as_str()),
        ("kubernetes.io/os", "linux"),
        HOLLOW_LABEL,
    ]
    .into_iter()
    .collect();
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                HOLLOW_NODE_ANNOTATION: "true",
            },
        },
        "spec": {},
    });
    obj["status"] = node_status(node, shape, now, now)["status"].take();
    serde_json::from_value(obj).expect("a hollow Node is a valid Node")
}

/// A merge patch of the node's full status: conditions healthy since `since`, heartbeat at
/// `now`.
pub fn node_status(
    node: &HollowNode,
    shape: &NodeShape,
    since: Timestamp,
    now: Timestamp,
) -> Value {
    let resources = json!({
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": shape.pods,
        "ephemeral-storage": shape.ephemeral_storage,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    });
    let cond = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": time(now),
            "lastTransitionTime": time(since),
        })
    };
    json!({ "status": {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            { "type": "InternalIP", "address": node.ip.to_string() },
            { "type": "Hostname", "address": node.name },
        ],
        "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "",
            "osImage": "k3rs hollow node",
            "containerRuntimeVersion": "hollow://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": go_arch(),
        },
    }})
}

/// Whether the node's status must be reported now: it is due (`every` since the last report),
/// or the node as stored says something else than the kubelet would (someone marked it not
/// Ready, e.g. the node lifecycle controller after missed heartbeats).
pub fn status_due(
    stored: Option<&Node>,
    last_report: Timestamp,
    now: Timestamp,
    every: Duration,
) -> bool {
    let elapsed = now.duration_since(last_report);
    if elapsed.is_negative() || elapsed.unsigned_abs() >= every {
        return true;
    }
    let Some(node) = stored else { return false };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    ready != Some("True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hollow(i: usize) -> HollowNode {
        HollowNode {
            name: format!("hollow-{i}"),
            index: i,
            ip: node_ip(i),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn node_ips_count_up_from_198_18_0_1() {
        assert_eq!(node_ip(0).to_string(), "198.18.0.1");
        assert_eq!(node_ip(256).to_string(), "198.18.1.1");
    }

    #[test]
    fn the_registered_node_is_ready_with_its_shape() {
        let n = node_object(
            &hollow(2),
            &NodeShape::default(),
            at("2026-01-01T00:00:00Z"),
        );
        let v = serde_json::to_value(&n).unwrap();
        let arch = go_arch();
        assert_eq!(
            v["metadata"]["labels"],
            json!({
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": "hollow-2",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "hollow",
            })
        );
        assert_eq!(v["metadata"]["annotations"]["k3rs.io/hollow-node"], "true");
        assert_eq!(
            v["status"]["capacity"],
            json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"})
        );
        assert_eq!(v["status"]["allocatable"], v["status"]["capacity"]);
        assert_eq!(
            v["status"]["conditions"][3],
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
        );
        assert_eq!(
            v["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "198.18.0.3"},
                {"type": "Hostname", "address": "hollow-2"}])
        );
        assert_eq!(
            v["status"]["nodeInfo"]["kubeletVersion"],
            json!(KUBELET_VERSION)
        );
    }

    #[test]
    fn status_is_due_after_the_period_or_when_not_ready() {
        let every = Duration::from_secs(300);
        let last = at("2026-01-01T00:00:00Z");
        assert!(!status_due(None, last, at("2026-01-01T00:04:59Z"), every));
        assert!(status_due(None, last, at("2026-01-01T00:05:00Z"), every));
        let ready = node_object(&hollow(0), &NodeShape::default(), last);
        assert!(!status_due(
            Some(&ready),
            last,
            at("2026-01-01T00:01:00Z"),
            every
        ));
        let mut unknown = ready.clone();
        let conds = unknown
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap();
        conds[3].status = "Unknown".into();
        assert!(status_due(
            Some(&unknown),
            last,
            at("2026-01-01T00:01:00Z"),
            every
        ));
    }
}
