//! The per-node filters of upstream's default profile that look at one node only, in its
//! order: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (with `nodeSelector`),
//! NodePorts, NodeResourcesFit, VolumeRestrictions (disk conflicts), VolumeBinding (see
//! [`super::volume_binding`]). Each failure carries
//! upstream's reason text, which the `FailedScheduling` message counts.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration, Volume};

use k3rs_apimachinery::resources::pod_requests;

use k3rs_apimachinery::resources::Counting;

use super::snapshot::{host_ports, HostPort, NodeInfo};
use k3rs_apimachinery::resources::Resources;
use k3rs_apimachinery::scheduling::tolerated;
use k3rs_apimachinery::scheduling::{
    required_node_affinity, required_node_affinity_matches, untolerated_taint,
};

/// Why a node cannot take the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Preemption cannot help (upstream `UnschedulableAndUnresolvable`).
    pub unresolvable: bool,
    /// The reasons, in upstream's words.
    pub reasons: Vec<String>,
}

impl Rejection {
    /// A rejection preemption cannot help.
    pub fn unresolvable(reason: impl Into<String>) -> Rejection {
        Rejection {
            unresolvable: true,
            reasons: vec![reason.into()],
        }
    }
    /// A rejection evicting pods may cure.
    pub fn unschedulable(reason: impl Into<String>) -> Rejection {
        Rejection {
            unresolvable: false,
            reasons: vec![reason.into()],
        }
    }
}

/// NodeUnschedulable's reason.
pub const ERR_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// NodeName's reason.
pub const ERR_NODE_NAME: &str = "node(s) didn't match the requested node name";
/// NodeAffinity's reason.
pub const ERR_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// NodePorts's reason.
pub const ERR_NODE_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
/// NodeResourcesFit's reason for a full node.
pub const ERR_TOO_MANY_PODS: &str = "Too many pods";
/// VolumeRestrictions' reason.
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";

/// The pod being scheduled with what the filters and scores read from it, computed once.
#[derive(Clone, Debug)]
pub struct PodInfo {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Its requests as written (init containers and overhead counted as upstream).
    pub requests: Resources,
    /// Its requests with upstream's non-zero defaults (for scoring).
    pub non_zero_requests: Resources,
    /// The host ports it asks for.
    pub ports: Vec<HostPort>,
    /// The pod's claims and volumes as VolumeBinding's PreFilter found them (none until the
    /// shell sets them).
    pub volumes: Arc<super::volume_binding::PodVolumes>,
}

impl PodInfo {
    /// The pod with its requests and ports computed once.
    pub fn new(pod: Arc<Pod>) -> PodInfo {
        PodInfo {
            requests: pod_requests(&pod, Counting::Requested),
            non_zero_requests: pod_requests(&pod, Counting::NonZero),
            ports: host_ports(&pod),
            volumes: Arc::default(),
            pod,
        }
    }

    /// Its tolerations.
    pub fn tolerations(&self) -> &[Toleration] {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default()
    }

    /// Its namespace (`default` when unset).
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }
}

/// The filters above, in order; the first that rejects decides.
pub fn run(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    node_unschedulable(pod, node)?;
    node_name(pod, node)?;
    taint_toleration(pod, node)?;
    node_affinity(pod, node)?;
    node_ports(pod, node)?;
    node_resources_fit(pod, node)?;
    volume_restrictions(pod, node)?;
    super::volume_binding::filter(&pod.volumes, node)
}

/// A cordoned node takes only pods tolerating `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn node_unschedulable(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    // Runs for every node a decision examines: nothing is built for a node not cordoned.
    if !node.unschedulable {
        return Ok(());
    }
    let taint = Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    };
    if tolerated(pod.tolerations(), &taint) {
        Ok(())
    } else {
        Err(Rejection::unresolvable(ERR_UNSCHEDULABLE))
    }
}

/// `spec.nodeName`, when set, must be this node.
pub fn node_name(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    match pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(n) if !n.is_empty() && n != node.name() => Err(Rejection::unresolvable(ERR_NODE_NAME)),
        _ => Ok(()),
    }
}

/// The first `NoSchedule`/`NoExecute` taint (in the node's order) the pod does not tolerate.
pub fn taint_toleration(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    let untolerated = untolerated_taint(
        &node.taints,
        pod.tolerations(),
        &["NoSchedule", "NoExecute"],
    );
    match untolerated {
        Some(t) => Err(Rejection::unresolvable(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or("")
        ))),
        None => Ok(()),
    }
}

/// `nodeSelector` (every label) and required node affinity (any term).
pub fn node_affinity(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    // Most pods have neither: the node's labels (another cache miss) are then not read.
    let spec = pod.pod.spec.as_ref();
    let selector = spec.is_some_and(|s| s.node_selector.is_some());
    if !selector && required_node_affinity(spec).is_none() {
        return Ok(());
    }
    if required_node_affinity_matches(spec, node.labels(), node.name()) {
        Ok(())
    } else {
        Err(Rejection::unresolvable(ERR_NODE_AFFINITY))
    }
}

fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
    a.0 == b.0 && a.2 == b.2 && (a.1 == b.1 || any(&a.1) || any(&b.1))
}

/// Every requested host port is free on the node (same protocol and port, overlapping IP).
pub fn node_ports(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    let conflict = pod.ports.iter().any(|want| {
        node.used_ports
            .iter()
            .any(|used| ports_conflict(want, used))
    });
    if conflict {
        Err(Rejection::unschedulable(ERR_NODE_PORTS))
    } else {
        Ok(())
    }
}

/// The pod's requests fit in what the node's pods leave of its allocatable; one reason per
/// short resource ("Insufficient cpu", "Too many pods").
pub fn node_resources_fit(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    let mut reasons = Vec::new();
    if node.pods.len() as i64 + 1 > node.allocatable.allowed_pods {
        reasons.push(ERR_TOO_MANY_PODS.to_string());
    }
    let (want, have, used) = (&pod.requests, &node.allocatable, &node.requested);
    if !want.is_zero() {
        if want.milli_cpu > 0 && want.milli_cpu > have.milli_cpu - used.milli_cpu {
            reasons.push("Insufficient cpu".into());
        }
        if want.memory > 0 && want.memory > have.memory - used.memory {
            reasons.push("Insufficient memory".into());
        }
        if want.ephemeral_storage > 0
            && want.ephemeral_storage > have.ephemeral_storage - used.ephemeral_storage
        {
            reasons.push("Insufficient ephemeral-storage".into());
        }
        for (name, amount) in &want.scalar {
            let free = have.scalar.get(name).copied().unwrap_or(0)
                - used.scalar.get(name).copied().unwrap_or(0);
            if *amount > 0 && *amount > free {
                reasons.push(format!("Insufficient {name}"));
            }
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Rejection {
            unresolvable: false,
            reasons,
        })
    }
}

/// Whether two volumes name the same disk in a way that cannot be shared (upstream
/// `isVolumeConflict`: GCE PD and RBD unless both read-only, EBS always, iSCSI IQN unless both
/// read-only).
fn disk_conflict(a: &Volume, b: &Volume) -> bool {
    if let (Some(x), Some(y)) = (&a.gce_persistent_disk, &b.gce_persistent_disk) {
        return x.pd_name == y.pd_name && !(x.read_only == Some(true) && y.read_only == Some(true));
    }
    if let (Some(x), Some(y)) = (&a.aws_elastic_block_store, &b.aws_elastic_block_store) {
        return x.volume_id == y.volume_id;
    }
    if let (Some(x), Some(y)) = (&a.iscsi, &b.iscsi) {
        return x.iqn == y.iqn && !(x.read_only == Some(true) && y.read_only == Some(true));
    }
    if let (Some(x), Some(y)) = (&a.rbd, &b.rbd) {
        let shared_monitor = x.monitors.iter().any(|m| y.monitors.contains(m));
        return shared_monitor
            && x.pool == y.pool
            && x.image == y.image
            && !(x.read_only == Some(true) && y.read_only == Some(true));
    }
    false
}

/// Whether `v` is a disk [`disk_conflict`] looks at (others never conflict).
fn is_disk(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.iscsi.is_some()
        || v.rbd.is_some()
}

/// A pod's volumes, borrowed.
fn volumes(p: &Pod) -> &[Volume] {
    p.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
}

/// No volume of the pod conflicts with a volume of a pod on the node (skipped, as upstream's
/// PreFilter does, for a pod without such disks: most pods carry only their service-account
/// token volume).
pub fn volume_restrictions(pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
    let mine: Vec<&Volume> = volumes(&pod.pod).iter().filter(|v| is_disk(v)).collect();
    if mine.is_empty() {
        return Ok(());
    }
    for other in &node.pods {
        let theirs = volumes(other);
        if mine
            .iter()
            .any(|a| theirs.iter().any(|b| disk_conflict(a, b)))
        {
            return Err(Rejection::unschedulable(ERR_DISK_CONFLICT));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    pub(crate) fn node(v: Value) -> NodeInfo {
        NodeInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }
    pub(crate) fn pod(v: Value) -> PodInfo {
        PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn small_node() -> NodeInfo {
        node(
            json!({"metadata": {"name": "n1", "labels": {"disk": "ssd"}},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "2", "example.com/gpu": "1"}}}),
        )
    }
    fn needs(cpu: &str, mem: &str) -> PodInfo {
        pod(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}),
        )
    }

    #[test]
    fn resources_fit_names_each_short_resource() {
        let mut n = small_node();
        assert_eq!(node_resources_fit(&needs("1", "1Gi"), &n), Ok(()));
        n.add_pod(needs("600m", "100Mi").pod);
        assert_eq!(
            node_resources_fit(&needs("500m", "2Gi"), &n),
            Err(Rejection {
                unresolvable: false,
                reasons: vec!["Insufficient cpu".into(), "Insufficient memory".into()]
            })
        );
        n.add_pod(needs("0", "0").pod);
        let gpu = pod(
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "2"}}}]}}),
        );
        assert_eq!(
            node_resources_fit(&gpu, &n).unwrap_err().reasons,
            vec!["Too many pods", "Insufficient example.com/gpu"]
        );
    }

    #[test]
    fn taints_report_the_first_untolerated() {
        let n = node(json!({"metadata": {"name": "n1"}, "spec": {"taints": [
            {"key": "soft", "effect": "PreferNoSchedule"},
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "other", "effect": "NoExecute"}]}}));
        let p = needs("1", "1");
        assert_eq!(
            taint_toleration(&p, &n),
            Err(Rejection::unresolvable(
                "node(s) had untolerated taint {dedicated: gpu}"
            ))
        );
        let tolerant = pod(json!({"spec": {"containers": [], "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {"key": "other", "operator": "Exists"}]}}));
        assert_eq!(taint_toleration(&tolerant, &n), Ok(()));
    }

    #[test]
    fn selector_affinity_name_and_cordon() {
        let n = small_node();
        let p = |spec: Value| pod(json!({"spec": spec}));
        assert_eq!(
            node_affinity(
                &p(json!({"containers": [], "nodeSelector": {"disk": "ssd"}})),
                &n
            ),
            Ok(())
        );
        assert_eq!(
            node_affinity(
                &p(json!({"containers": [], "nodeSelector": {"disk": "hdd"}})),
                &n
            ),
            Err(Rejection::unresolvable(ERR_NODE_AFFINITY))
        );
        let affinity = p(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}));
        assert_eq!(node_affinity(&affinity, &n), Ok(()));
        assert_eq!(
            node_name(&p(json!({"containers": [], "nodeName": "n2"})), &n),
            Err(Rejection::unresolvable(ERR_NODE_NAME))
        );
        let cordoned = node(json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}}));
        assert_eq!(
            node_unschedulable(&p(json!({"containers": []})), &cordoned),
            Err(Rejection::unresolvable(ERR_UNSCHEDULABLE))
        );
        let tolerant = p(json!({"containers": [], "tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}));
        assert_eq!(node_unschedulable(&tolerant, &cordoned), Ok(()));
    }

    #[test]
    fn host_ports_conflict_on_overlapping_ips() {
        let with_port = |ip: &str, port: i32| {
            pod(json!({"spec": {"containers": [{"name": "c", "ports": [
                {"containerPort": 80, "hostPort": port, "hostIP": ip}]}]}}))
        };
        let mut n = small_node();
        n.add_pod(with_port("10.0.0.1", 8080).pod);
        assert_eq!(node_ports(&with_port("10.0.0.2", 8080), &n), Ok(()));
        assert_eq!(node_ports(&with_port("10.0.0.1", 8081), &n), Ok(()));
        assert_eq!(
            node_ports(&with_port("0.0.0.0", 8080), &n),
            Err(Rejection::unschedulable(ERR_NODE_PORTS))
        );
    }

    #[test]
    fn disk_conflicts() {
        let with_pd = |ro: bool| {
            pod(json!({"spec": {"containers": [], "volumes": [
                {"name": "v", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": ro}}]}}))
        };
        let mut n = small_node();
        n.add_pod(with_pd(true).pod);
        assert_eq!(volume_restrictions(&with_pd(true), &n), Ok(()));
        assert_eq!(
            volume_restrictions(&with_pd(false), &n),
            Err(Rejection::unschedulable(ERR_DISK_CONFLICT))
        );
    }
}
