//! The storage-object-in-use protection controllers (`persistentvolumeclaim-protection`,
//! `persistentvolume-protection`): a claim being deleted keeps its
//! `kubernetes.io/pvc-protection` finalizer while a pod that has not terminated uses it; a
//! volume being deleted keeps `kubernetes.io/pv-protection` while it is Bound. The admission
//! plugin `StorageObjectInUseProtection` adds the finalizers on create. A claim is looked
//! at when it or a pod naming it changes, a volume when it changes; a failed release is
//! retried after the object's backoff.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use super::triggers;
use crate::backoff::ErrorBackoff;
use crate::{informer, Context};
use k3rs_apimachinery::volume::{claims_of, PVC_PROTECTION, PV_PROTECTION};

/// The claim protection controller's `--controllers` name and identity.
pub const PVC_CONTROLLER: &str = "persistentvolumeclaim-protection";
pub const PVC_NAME: &str = "pvc-protection-controller";
/// The volume protection controller's `--controllers` name and identity.
pub const PV_CONTROLLER: &str = "persistentvolume-protection";
pub const PV_NAME: &str = "pv-protection-controller";

/// Whether a pod still counts as using its claims: it has not terminated (Succeeded/Failed).
fn pod_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// Whether the claim's protection finalizer may go: it is being deleted, has the finalizer,
/// and no active pod of its namespace uses it.
pub fn claim_releasable(claim: &PersistentVolumeClaim, pods: &[Pod]) -> bool {
    let name = claim.name_any();
    let ns = claim.namespace();
    claim.metadata.deletion_timestamp.is_some()
        && claim.finalizers().iter().any(|f| f == PVC_PROTECTION)
        && !pods
            .iter()
            .any(|p| p.namespace() == ns && pod_active(p) && claims_of(p).contains(&name))
}

/// Whether the volume's protection finalizer may go: it is being deleted, has the finalizer,
/// and is not Bound.
pub fn volume_releasable(volume: &PersistentVolume) -> bool {
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    volume.metadata.deletion_timestamp.is_some()
        && volume.finalizers().iter().any(|f| f == PV_PROTECTION)
        && phase != Some("Bound")
}

fn without(finalizers: &mut Option<Vec<String>>, f: &str) {
    if let Some(list) = finalizers.as_mut() {
        list.retain(|x| x != f);
    }
}

/// Why releasing a finalizer failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the pods of namespace {namespace}: {source}")]
    ListPods {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("removing the finalizer of {name}: {source}")]
    Release {
        name: String,
        #[source]
        source: kube::Error,
    },
}

struct Claims {
    client: kube::Client,
    pods: Store<Pod>,
}

/// Runs the claim protection controller until `cx.stop`: a claim is looked at when it
/// changes and when a pod naming it changes (a claim's last pod going away releases it).
pub async fn run_claims(cx: Context) {
    let claims = informer::<PersistentVolumeClaim>(&cx.informers).await;
    let pods = informer::<Pod>(&cx.informers).await;
    let backoff = ErrorBackoff::new(PVC_CONTROLLER);
    let touched = cx.informers.informer::<PersistentVolumeClaim>().touched();
    backoff
        .drive(
            Controller::for_shared_stream(touched, claims)
                .watches_shared_stream(cx.informers.informer::<Pod>().touched(), |p| {
                    triggers::claims_of_pod(&p)
                }),
            release_claim,
            Arc::new(Claims {
                client: cx.client,
                pods,
            }),
            cx.stop,
        )
        .await;
}

async fn release_claim(
    claim: Arc<PersistentVolumeClaim>,
    cx: Arc<Claims>,
) -> Result<Action, Error> {
    let namespace = claim.namespace().unwrap_or_default();
    let cached: Vec<Pod> = (cx.pods.state().iter())
        .filter(|p| p.namespace().as_deref() == Some(namespace.as_str()))
        .map(|p| (**p).clone())
        .collect();
    if !claim_releasable(&claim, &cached) {
        return Ok(Action::await_change());
    }
    // Pods created since the cache was read: ask the API before letting go.
    let api: Api<Pod> = Api::namespaced(cx.client.clone(), &namespace);
    let live = (api.list(&Default::default()).await).map_err(|source| Error::ListPods {
        namespace: namespace.clone(),
        source,
    })?;
    if !claim_releasable(&claim, &live.items) {
        return Ok(Action::await_change());
    }
    let mut c = (*claim).clone();
    without(&mut c.metadata.finalizers, PVC_PROTECTION);
    let api: Api<PersistentVolumeClaim> = Api::namespaced(cx.client.clone(), &namespace);
    match api.replace(&c.name_any(), &PostParams::default(), &c).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(Error::Release {
            name: format!("{namespace}/{}", c.name_any()),
            source,
        }),
        Ok(_) => Ok(Action::await_change()),
    }
}

/// Runs the volume protection controller until `cx.stop`: a volume is looked at when it
/// changes.
pub async fn run_volumes(cx: Context) {
    let volumes = informer::<PersistentVolume>(&cx.informers).await;
    let backoff = ErrorBackoff::new(PV_CONTROLLER);
    let touched = cx.informers.informer::<PersistentVolume>().touched();
    backoff
        .drive(
            Controller::for_shared_stream(touched, volumes),
            release_volume,
            Arc::new(cx.client),
            cx.stop,
        )
        .await;
}

async fn release_volume(
    volume: Arc<PersistentVolume>,
    client: Arc<kube::Client>,
) -> Result<Action, Error> {
    if !volume_releasable(&volume) {
        return Ok(Action::await_change());
    }
    let mut v = (*volume).clone();
    without(&mut v.metadata.finalizers, PV_PROTECTION);
    let api: Api<PersistentVolume> = Api::all((*client).clone());
    match api.replace(&v.name_any(), &PostParams::default(), &v).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(Error::Release {
            name: v.name_any(),
            source,
        }),
        Ok(_) => Ok(Action::await_change()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::volume::fixtures::{pv, pvc};
    use serde_json::json;

    fn pod(name: &str, claim: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
            "status": {"phase": phase}}))
        .unwrap()
    }

    #[test]
    fn pods_name_their_claims_and_ephemeral_ones() {
        assert_eq!(
            claims_of(&pod("web", "c", "Running")),
            vec!["c".to_string(), "web-scratch".to_string()]
        );
    }

    #[test]
    fn claim_is_released_once_no_running_pod_uses_it() {
        let deleting = pvc(
            "c",
            "1Gi",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": [PVC_PROTECTION]}}),
        );
        assert!(!claim_releasable(&deleting, &[pod("p", "c", "Running")]));
        assert!(!claim_releasable(&deleting, &[pod("p", "c", "Pending")]));
        assert!(claim_releasable(&deleting, &[pod("p", "c", "Succeeded")]));
        assert!(claim_releasable(&deleting, &[pod("p", "other", "Running")]));
        assert!(claim_releasable(&deleting, &[]));
        let live = pvc(
            "c",
            "1Gi",
            json!({"metadata": {"finalizers": [PVC_PROTECTION]}}),
        );
        assert!(!claim_releasable(&live, &[]));
    }

    #[test]
    fn volume_is_released_unless_bound() {
        let meta = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": [PV_PROTECTION]}});
        let mut bound = meta.clone();
        bound["status"] = json!({"phase": "Bound"});
        assert!(!volume_releasable(&pv("v", "1Gi", bound)));
        assert!(volume_releasable(&pv("v", "1Gi", meta)));
        assert!(!volume_releasable(&pv("v", "1Gi", json!({}))));
    }
}
