//! VolumeBinding (upstream's plugin, simplified): a pod's PersistentVolumeClaims decide where
//! it may run. PreFilter: every claim must exist and not be being deleted, and an unbound claim
//! of an `Immediate` class must wait for the binder. Filter: a bound claim's volume must admit
//! the node (its node affinity); an unbound `WaitForFirstConsumer` claim needs, on that node, a
//! free volume that fits — or a class with a provisioner. PreBind (in the shell): the unbound
//! delayed claims get `volume.kubernetes.io/selected-node` = the chosen node, which the binder
//! and the provisioner act on.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use super::filters::Rejection;
use super::snapshot::NodeInfo;
use k3rs_apimachinery::volume::matching::{claim_class, find_match, node_affinity_admits, NodeRef};
use k3rs_apimachinery::volume::{delayed_binding, NO_PROVISIONER};

/// A bound volume's node affinity excludes the node.
pub const ERR_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// No free volume on the node fits a delayed claim.
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// A claim is bound to a volume that does not exist.
pub const ERR_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// An Immediate claim is not bound yet.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// Why VolumeBinding's PreFilter leaves a pod unschedulable on every node (upstream's text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreFilterError {
    /// A claim the pod uses does not exist.
    #[error("persistentvolumeclaim \"{0}\" not found")]
    ClaimNotFound(String),
    /// A claim the pod uses is being deleted.
    #[error("persistentvolumeclaim \"{0}\" is being deleted")]
    ClaimDeleting(String),
    /// An unbound claim of an `Immediate` class waits for the binder.
    #[error("{ERR_UNBOUND_IMMEDIATE}")]
    UnboundImmediate,
}

/// The claims and volumes the scheduler knows.
#[derive(Clone, Copy, Debug)]
pub struct Storage<'a> {
    /// The claims.
    pub claims: &'a [PersistentVolumeClaim],
    /// The volumes.
    pub volumes: &'a [PersistentVolume],
    /// The StorageClasses.
    pub classes: &'a [StorageClass],
}

/// What the filter checks per node for one pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodVolumes {
    /// The volumes of the pod's bound claims (`None`: the claim names a volume that is gone).
    pub bound: Vec<Option<PersistentVolume>>,
    /// The unbound delayed claims, and whether their class can provision a volume.
    pub delayed: Vec<(PersistentVolumeClaim, bool)>,
    /// The volumes a delayed claim without a provisioner may bind to.
    pub candidates: Vec<PersistentVolume>,
}

impl PodVolumes {
    /// `namespace/name` of the claims the shell annotates with the chosen node.
    pub fn to_select(&self) -> Vec<(String, String)> {
        self.delayed
            .iter()
            .map(|(c, _)| {
                (
                    c.metadata.namespace.clone().unwrap_or_default(),
                    c.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// The names of the claims a pod's volumes use (ephemeral volumes: `<pod>-<volume>`).
fn claim_names(pod: &Pod) -> Vec<String> {
    k3rs_apimachinery::volume::claims_of(pod)
}

/// PreFilter: the pod's claims, or upstream's message why no node can take it.
pub fn pre_filter(pod: &Pod, s: Storage<'_>) -> Result<PodVolumes, PreFilterError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = PodVolumes::default();
    for name in claim_names(pod) {
        let claim = s.claims.iter().find(|c| {
            c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(&name)
        });
        let Some(claim) = claim else {
            return Err(PreFilterError::ClaimNotFound(name));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(PreFilterError::ClaimDeleting(name));
        }
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        if let Some(v) = volume_name {
            out.bound.push(
                s.volumes
                    .iter()
                    .find(|pv| pv.metadata.name.as_deref() == Some(v))
                    .cloned(),
            );
            continue;
        }
        if !delayed_binding(claim, s.classes) {
            return Err(PreFilterError::UnboundImmediate);
        }
        let provisioner = s
            .classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(claim_class(claim)))
            .is_some_and(|c| c.provisioner != NO_PROVISIONER);
        out.delayed.push((claim.clone(), provisioner));
    }
    if out.delayed.iter().any(|(_, p)| !p) {
        out.candidates = s
            .volumes
            .iter()
            .filter(|v| v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none()))
            .cloned()
            .collect();
    }
    Ok(out)
}

/// Filter: whether `node` can take the pod's volumes.
pub fn filter(v: &PodVolumes, node: &NodeInfo) -> Result<(), Rejection> {
    if v.bound.is_empty() && v.delayed.is_empty() {
        return Ok(());
    }
    let node_ref = NodeRef {
        name: node.name().to_string(),
        labels: node.node.metadata.labels.clone().unwrap_or_default(),
    };
    for pv in &v.bound {
        match pv {
            None => return Err(Rejection::unresolvable(ERR_PV_NOT_EXIST)),
            Some(pv) if !node_affinity_admits(pv, &node_ref) => {
                return Err(Rejection::unresolvable(ERR_NODE_CONFLICT))
            }
            Some(_) => {}
        }
    }
    // Each claim without a provisioner needs its own volume on this node.
    let mut taken: Vec<String> = Vec::new();
    for (claim, provisioner) in &v.delayed {
        if *provisioner {
            continue;
        }
        let free: Vec<PersistentVolume> = v
            .candidates
            .iter()
            .filter(|pv| !taken.contains(pv.metadata.name.as_ref().unwrap_or(&String::new())))
            .cloned()
            .collect();
        match find_match(claim, &free, Some(&node_ref)) {
            Some(pv) => taken.push(pv.metadata.name.clone().unwrap_or_default()),
            None => return Err(Rejection::unresolvable(ERR_BIND_CONFLICT)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::volume::fixtures::{delayed_class, pv, pvc};
    use serde_json::json;
    use std::sync::Arc;

    fn pod(claims: &[&str]) -> Pod {
        let vols: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": vols}}))
        .unwrap()
    }

    fn node(name: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"kubernetes.io/hostname": name}}}))
            .unwrap(),
        ))
    }

    fn on(n: &str) -> serde_json::Value {
        json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}}})
    }

    #[test]
    fn missing_deleting_and_unbound_immediate_claims_stop_the_pod() {
        let none = Storage {
            claims: &[],
            volumes: &[],
            classes: &[],
        };
        assert_eq!(
            pre_filter(&pod(&["data"]), none).unwrap_err().to_string(),
            "persistentvolumeclaim \"data\" not found"
        );
        let deleting = [pvc(
            "data",
            "1Gi",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        )];
        let s = Storage {
            claims: &deleting,
            ..none
        };
        assert_eq!(
            pre_filter(&pod(&["data"]), s).unwrap_err().to_string(),
            "persistentvolumeclaim \"data\" is being deleted"
        );
        let unbound = [pvc("data", "1Gi", json!({}))];
        let s = Storage {
            claims: &unbound,
            ..none
        };
        assert_eq!(
            pre_filter(&pod(&["data"]), s).unwrap_err().to_string(),
            ERR_UNBOUND_IMMEDIATE
        );
        assert_eq!(pre_filter(&pod(&[]), s), Ok(PodVolumes::default()));
    }

    #[test]
    fn bound_volume_affinity_picks_the_node() {
        let claims = [pvc("data", "1Gi", json!({"spec": {"volumeName": "v"}}))];
        let volumes = [pv("v", "1Gi", json!({"spec": on("n2")}))];
        let s = Storage {
            claims: &claims,
            volumes: &volumes,
            classes: &[],
        };
        let v = pre_filter(&pod(&["data"]), s).unwrap();
        assert_eq!(
            filter(&v, &node("n1")),
            Err(Rejection::unresolvable(ERR_NODE_CONFLICT))
        );
        assert_eq!(filter(&v, &node("n2")), Ok(()));
        let gone = Storage { volumes: &[], ..s };
        let v = pre_filter(&pod(&["data"]), gone).unwrap();
        assert_eq!(
            filter(&v, &node("n1")),
            Err(Rejection::unresolvable(ERR_PV_NOT_EXIST))
        );
    }

    #[test]
    fn delayed_claims_need_a_provisioner_or_a_local_volume() {
        let classes = [
            delayed_class("local-path", "rancher.io/local-path"),
            delayed_class("manual", NO_PROVISIONER),
        ];
        let claims = [
            pvc(
                "lp",
                "1Gi",
                json!({"spec": {"storageClassName": "local-path"}}),
            ),
            pvc("m", "1Gi", json!({"spec": {"storageClassName": "manual"}})),
        ];
        let mut aff = on("n2");
        aff["storageClassName"] = json!("manual");
        let volumes = [pv("local-n2", "1Gi", json!({"spec": aff}))];
        let s = Storage {
            claims: &claims,
            volumes: &volumes,
            classes: &classes,
        };
        let lp = pre_filter(&pod(&["lp"]), s).unwrap();
        assert_eq!(filter(&lp, &node("n1")), Ok(()));
        assert_eq!(lp.to_select(), vec![("ns".to_string(), "lp".to_string())]);
        let m = pre_filter(&pod(&["m"]), s).unwrap();
        assert_eq!(
            filter(&m, &node("n1")),
            Err(Rejection::unresolvable(ERR_BIND_CONFLICT))
        );
        assert_eq!(filter(&m, &node("n2")), Ok(()));
    }
}
