//! What one scheduling cycle decides on: every node with the pods assigned (or assumed) to
//! it, their summed requests, used host ports and images — upstream's `NodeInfo`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::resources::{pod_requests, Counting, Resources};

/// A host port in use: (protocol, host IP, port). An empty or `0.0.0.0` IP means every
/// address.
pub type HostPort = (String, String, i32);

/// One node and its pods.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    pub pods: Vec<Arc<Pod>>,
    pub allocatable: Resources,
    /// Requests as written, summed over `pods`.
    pub requested: Resources,
    /// Requests with upstream's non-zero defaults, summed over `pods`.
    pub non_zero_requested: Resources,
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
        NodeInfo {
            node,
            pods: Vec::new(),
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
            self.requested.sub(&pod_requests(&pod, Counting::Requested));
            self.non_zero_requested
                .sub(&pod_requests(&pod, Counting::NonZero));
            self.used_ports = self.pods.iter().flat_map(|p| host_ports(p)).collect();
        }
    }
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
}
