//! What one scheduling cycle decides on: every node with the pods assigned (or assumed) to
//! it, their summed requests, used host ports and images — upstream's `NodeInfo`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use k3rs_apimachinery::resources::pod_requests;

use k3rs_apimachinery::resources::Counting;

use k3rs_apimachinery::resources::Resources;

/// A host port in use: (protocol, host IP, port). An empty or `0.0.0.0` IP means every
/// address.
pub type HostPort = (String, String, i32);

/// One node and its pods.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// The node.
    pub node: Arc<Node>,
    /// Its `spec.unschedulable` (cordoned): the filters read this and [`NodeInfo::taints`]
    /// for every node a decision examines, so they are kept here, beside the counts, rather
    /// than read from the node (another cache miss per node).
    pub unschedulable: bool,
    /// Its `spec.taints` (empty for most nodes).
    pub taints: Vec<Taint>,
    /// The pods bound (or assumed) to it.
    pub pods: Vec<Arc<Pod>>,
    /// The `pods` with pod affinity or anti-affinity (upstream's `PodsWithAffinity`): the
    /// only ones whose terms a decision for a pod without terms of its own must look at.
    pub with_affinity: Vec<Arc<Pod>>,
    /// The `pods` with required anti-affinity (`PodsWithRequiredAntiAffinity`).
    pub with_required_anti_affinity: Vec<Arc<Pod>>,
    /// Its allocatable resources.
    pub allocatable: Resources,
    /// Requests as written, summed over `pods`.
    pub requested: Resources,
    /// Requests with upstream's non-zero defaults, summed over `pods`.
    pub non_zero_requested: Resources,
    /// The host ports its pods use.
    pub used_ports: BTreeSet<HostPort>,
    /// Image name (every name the node reports) → size in bytes.
    pub images: BTreeMap<String, i64>,
}

impl NodeInfo {
    /// A node without pods.
    pub fn new(node: Arc<Node>) -> NodeInfo {
        let status = node.status.as_ref();
        let allocatable = Resources::from_list(status.and_then(|s| s.allocatable.as_ref()));
        let mut images = BTreeMap::new();
        for image in status.and_then(|s| s.images.as_ref()).into_iter().flatten() {
            for name in image.names.iter().flatten() {
                images.insert(name.clone(), image.size_bytes.unwrap_or(0));
            }
        }
        let spec = node.spec.as_ref();
        NodeInfo {
            unschedulable: spec.and_then(|s| s.unschedulable) == Some(true),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            node,
            pods: Vec::new(),
            with_affinity: Vec::new(),
            with_required_anti_affinity: Vec::new(),
            allocatable,
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            used_ports: BTreeSet::new(),
            images,
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }

    /// The node's labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Counts `pod` as running here.
    pub fn add_pod(&mut self, pod: Arc<Pod>) {
        self.requested.add(&pod_requests(&pod, Counting::Requested));
        self.non_zero_requested
            .add(&pod_requests(&pod, Counting::NonZero));
        self.used_ports.extend(host_ports(&pod));
        if has_pod_affinity(&pod) {
            self.with_affinity.push(pod.clone());
        }
        if !super::interpod::anti_affinity_terms(&pod).is_empty() {
            self.with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// Stops counting the pod with `uid` (what preemption does to its victims).
    pub fn remove_pod(&mut self, uid: &str) {
        if let Some(i) = self
            .pods
            .iter()
            .position(|p| p.metadata.uid.as_deref() == Some(uid))
        {
            let pod = self.pods.remove(i);
            let other = |p: &Arc<Pod>| !Arc::ptr_eq(p, &pod);
            self.with_affinity.retain(other);
            self.with_required_anti_affinity.retain(other);
            self.requested.sub(&pod_requests(&pod, Counting::Requested));
            self.non_zero_requested
                .sub(&pod_requests(&pod, Counting::NonZero));
            self.used_ports = self.pods.iter().flat_map(|p| host_ports(p)).collect();
        }
    }
}

/// Whether `pod` has pod affinity or anti-affinity terms (required or preferred).
pub fn has_pod_affinity(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
}

/// The host ports a pod's containers ask for (`hostPort` > 0).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            Some((
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.host_ip.clone().unwrap_or_default(),
                port,
            ))
        })
        .collect()
}

/// All nodes of one cycle, in a stable order (by name).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The nodes, in a stable order.
    pub nodes: Vec<NodeInfo>,
}

impl Snapshot {
    /// Nodes with their assigned pods; pods naming an unknown node are ignored.
    pub fn new<'a>(
        nodes: impl IntoIterator<Item = Arc<Node>>,
        pods: impl IntoIterator<Item = &'a Arc<Pod>>,
    ) -> Snapshot {
        let mut nodes: Vec<NodeInfo> = nodes.into_iter().map(NodeInfo::new).collect();
        nodes.sort_by(|a, b| a.name().cmp(b.name()));
        for pod in pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            if let Ok(i) = nodes.binary_search_by(|n| n.name().cmp(node)) {
                nodes[i].add_pod(pod.clone());
            }
        }
        Snapshot { nodes }
    }

    /// Every assigned pod with the node it runs on.
    pub fn pods(&self) -> impl Iterator<Item = (&NodeInfo, &Arc<Pod>)> {
        self.nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(move |p| (n, p)))
    }

    /// The assigned pods with pod affinity or anti-affinity, with their nodes.
    pub fn pods_with_affinity(&self) -> impl Iterator<Item = (&NodeInfo, &Arc<Pod>)> {
        self.nodes
            .iter()
            .flat_map(|n| n.with_affinity.iter().map(move |p| (n, p)))
    }

    /// The assigned pods with required anti-affinity, with their nodes.
    pub fn pods_with_required_anti_affinity(&self) -> impl Iterator<Item = (&NodeInfo, &Arc<Pod>)> {
        self.nodes
            .iter()
            .flat_map(|n| n.with_required_anti_affinity.iter().map(move |p| (n, p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, affinity: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": uid, "uid": uid},
                "spec": {"containers": [], "affinity": affinity}}))
            .unwrap(),
        )
    }

    #[test]
    fn pods_with_affinity_are_kept_apart_and_forgotten_on_removal() {
        let node = Arc::new(serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap());
        let mut info = NodeInfo::new(node);
        let term = json!([{"topologyKey": "zone", "labelSelector": {}}]);
        info.add_pod(pod("plain", json!(null)));
        info.add_pod(pod(
            "anti",
            json!({"podAntiAffinity":
            {"requiredDuringSchedulingIgnoredDuringExecution": term}}),
        ));
        info.add_pod(pod(
            "aff",
            json!({"podAffinity":
            {"requiredDuringSchedulingIgnoredDuringExecution": term}}),
        ));
        let uids = |v: &[Arc<Pod>]| -> Vec<String> {
            v.iter().map(|p| p.metadata.uid.clone().unwrap()).collect()
        };
        assert_eq!(uids(&info.with_affinity), ["anti", "aff"]);
        assert_eq!(uids(&info.with_required_anti_affinity), ["anti"]);
        info.remove_pod("anti");
        assert_eq!(uids(&info.with_affinity), ["aff"]);
        assert!(info.with_required_anti_affinity.is_empty());
        assert_eq!(uids(&info.pods), ["plain", "aff"]);
    }
}
