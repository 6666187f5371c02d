//! Persistent volumes as both the scheduler and the volume controllers see them (upstream's
//! `pkg/controller/volume/persistentvolume/util`): the well-known annotations and finalizers,
//! which claims a pod uses, whether a claim's class delays binding, and matching a claim to a
//! volume ([`matching`]).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

pub mod matching;

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;

/// On a claim: its binding is complete (`yes`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or volume: the controller, not the user, bound it (`yes`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a claim: the node the scheduler picked for its first consumer.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On a claim: the provisioner expected to create its volume.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta spelling of [`ANN_STORAGE_PROVISIONER`], written too as upstream does.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a volume: the provisioner that created it.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The finalizer that keeps a claim while pods use it.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a volume while it is bound.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The provisioner that provisions nothing (statically provisioned local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The claims a pod's volumes name (`persistentVolumeClaim.claimName`, and the
/// `<pod>-<volume>` claim of each generic ephemeral volume).
pub fn claims_of(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some(c.claim_name.clone())
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| format!("{pod_name}-{}", v.name))
            }
        })
        .collect()
}

/// Whether the claim's class binds only once a pod using it is scheduled.
pub fn delayed_binding(claim: &PersistentVolumeClaim, classes: &[StorageClass]) -> bool {
    class_of(claim, classes)
        .and_then(|c| c.volume_binding_mode.as_deref())
        .is_some_and(|m| m == "WaitForFirstConsumer")
}

/// The StorageClass a claim names, if it exists.
pub fn class_of<'a>(
    claim: &PersistentVolumeClaim,
    classes: &'a [StorageClass],
) -> Option<&'a StorageClass> {
    let name = matching::claim_class(claim);
    if name.is_empty() {
        return None;
    }
    classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
}
