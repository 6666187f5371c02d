//! Which claims and volumes a change concerns (the volume controllers' event handlers,
//! upstream's `enqueueWork` calls), pure: each maps one changed object (applied or deleted) to
//! the keys of the objects whose decision may change with it. The controllers reconcile those
//! keys through a per-key queue (kube-runtime's `Controller`, with [`crate::backoff`]).
//!
//! # Guarantees
//! - A volume concerns the claim its `claimRef` names; a volume free for matching (no
//!   `claimRef`, or one without a UID) concerns too every claim still waiting for a volume,
//!   since it may now fit one of them.
//! - A StorageClass concerns the waiting claims of that class (its binding mode and
//!   provisioner decide theirs), a Node the waiting claims selected for it (its labels decide
//!   which volumes' node affinity admits it).
//! - A claim concerns the volume it names and every volume whose `claimRef` names it (a
//!   deleted claim releases them).
//! - A pod concerns the claims its volumes name, in its namespace (a claim being deleted
//!   waits for its pods).
//! - A local-path helper pod concerns the volume it tears down.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;

use super::local_path;
use k3rs_apimachinery::volume::matching::claim_class;
use k3rs_apimachinery::volume::{claims_of, ANN_BIND_COMPLETED, ANN_SELECTED_NODE};

fn claim_ref(namespace: &str, name: &str) -> ObjectRef<PersistentVolumeClaim> {
    ObjectRef::new(name).within(namespace)
}

/// Whether a claim still waits for a volume: never bound, not being deleted.
fn waiting(claim: &PersistentVolumeClaim) -> bool {
    let bound = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED));
    !bound && claim.metadata.deletion_timestamp.is_none()
}

fn waiting_where<'a>(
    claims: impl IntoIterator<Item = &'a Arc<PersistentVolumeClaim>>,
    also: impl Fn(&PersistentVolumeClaim) -> bool,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    claims
        .into_iter()
        .filter(|c| waiting(c) && also(c))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The claims a change of `volume` concerns, among `claims` (the cache).
pub fn claims_of_volume<'a>(
    volume: &PersistentVolume,
    claims: impl IntoIterator<Item = &'a Arc<PersistentVolumeClaim>>,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let bound_to = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let mut keys: Vec<_> = bound_to
        .and_then(|r| Some(claim_ref(r.namespace.as_deref()?, r.name.as_deref()?)))
        .into_iter()
        .collect();
    let free = bound_to.is_none_or(|r| r.uid.as_deref().is_none_or(str::is_empty));
    if free {
        for k in waiting_where(claims, |_| true) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// The claims a change of `class` concerns, among `claims`.
pub fn claims_of_class<'a>(
    class: &StorageClass,
    claims: impl IntoIterator<Item = &'a Arc<PersistentVolumeClaim>>,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let name = class.name_any();
    waiting_where(claims, |c| claim_class(c) == name)
}

/// The claims a change of `node` concerns, among `claims`.
pub fn claims_of_node<'a>(
    node: &Node,
    claims: impl IntoIterator<Item = &'a Arc<PersistentVolumeClaim>>,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let name = node.name_any();
    waiting_where(claims, |c| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE))
            == Some(&name)
    })
}

/// The volumes a change of `claim` concerns, among `volumes`.
pub fn volumes_of_claim<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a Arc<PersistentVolume>>,
) -> Vec<ObjectRef<PersistentVolume>> {
    let named = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    let mut keys: Vec<_> = named
        .filter(|n| !n.is_empty())
        .map(ObjectRef::new)
        .into_iter()
        .collect();
    let (ns, name) = (claim.namespace(), claim.metadata.name.clone());
    for v in volumes {
        let r = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if r.is_some_and(|r| r.namespace == ns && r.name == name) {
            let k = ObjectRef::from_obj(v.as_ref());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// The claim a volume's `claimRef` names (the local-path provisioner's concern).
pub fn claim_of_volume(volume: &PersistentVolume) -> Option<ObjectRef<PersistentVolumeClaim>> {
    let r = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(claim_ref(r.namespace.as_deref()?, r.name.as_deref()?))
}

/// The claims a change of `pod` concerns: those its volumes name, in its namespace.
pub fn claims_of_pod(pod: &Pod) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let ns = pod.namespace().unwrap_or_default();
    claims_of(pod).iter().map(|c| claim_ref(&ns, c)).collect()
}

/// The volume a local-path helper pod tears down, if `pod` is one.
pub fn volume_of_helper(pod: &Pod) -> Option<ObjectRef<PersistentVolume>> {
    if pod.namespace().as_deref() != Some(local_path::HELPER_NAMESPACE) {
        return None;
    }
    let name = pod.name_any();
    let volume = name.strip_prefix(local_path::HELPER_PREFIX)?;
    (!volume.is_empty()).then(|| ObjectRef::new(volume))
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;
