//! The I/O half of [`ref_manager`](super::ref_manager) for pods: a controller adopts the
//! matching orphans of its namespace and releases its pods that stopped matching, each with a
//! guarded merge patch (upstream's `ClaimPods`); and, the other way round, which controllers
//! a pod event concerns.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::ref_manager::{self, Claim};
use super::{api_err, SyncError};

/// The pods among `candidates` (the controller's own pods and the orphans of its namespace,
/// [`PodIndex::candidates`](super::pod_index::PodIndex::candidates)) the controller `owner`
/// (being deleted: `deleting`) owns after claiming: its own that `matches`, plus the orphans
/// it adopted. A pod gone meanwhile is skipped; any other failed patch fails the claim.
pub async fn claim_pods(
    api: &Api<Pod>,
    candidates: Vec<Arc<Pod>>,
    owner: &OwnerReference,
    deleting: bool,
    matches: impl Fn(&Pod) -> bool,
) -> Result<Vec<Arc<Pod>>, SyncError> {
    let mut owned = Vec::new();
    for pod in candidates {
        let patch = match ref_manager::claim(&owner.uid, deleting, &pod.metadata, matches(&pod)) {
            Claim::Own => {
                owned.push(pod);
                continue;
            }
            Claim::Ignore => continue,
            Claim::Adopt => ref_manager::adopt_patch(&pod.metadata, owner),
            Claim::Release => ref_manager::release_patch(&pod.metadata, &owner.uid),
        };
        let adopting = ref_manager::controller_of(&pod.metadata).is_none();
        let pp = PatchParams::default();
        match api.patch(&pod.name_any(), &pp, &Patch::Merge(&patch)).await {
            Ok(p) if adopting => owned.push(Arc::new(p)),
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(api_err(format!("claiming pod {}", pod.name_any()))(e)),
        }
    }
    Ok(owned)
}

/// The controllers of kind `K` a pod event concerns: the pod's controller if it is a `K`,
/// or, for an orphan, every `K` of its namespace whose (non-empty) `selector` matches it.
pub fn owners_of<K>(
    owners: &Store<K>,
    pod: &Pod,
    selector: impl Fn(&K) -> Option<Selector>,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let ns = pod.namespace().unwrap_or_default();
    if let Some(r) = ref_manager::controller_of(&pod.metadata) {
        return if r.kind == K::kind(&()) {
            vec![ObjectRef::new(&r.name).within(&ns)]
        } else {
            Vec::new()
        };
    }
    owners
        .state()
        .iter()
        .filter(|o| o.namespace().as_deref() == Some(ns.as_str()))
        .filter(|o| selector(o).is_some_and(|s| !s.selects_all() && s.matches(pod.labels())))
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}
