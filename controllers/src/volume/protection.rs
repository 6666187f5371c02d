//! The storage-object-in-use protection controllers (`persistentvolumeclaim-protection`,
//! `persistentvolume-protection`): a claim being deleted keeps its
//! `kubernetes.io/pvc-protection` finalizer while a pod that has not terminated uses it; a
//! volume being deleted keeps `kubernetes.io/pv-protection` while it is Bound. The admission
//! plugin `StorageObjectInUseProtection` adds the finalizers on create.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, PostParams};
use kube::ResourceExt;

use crate::{informer, Context};
use k3rs_apimachinery::volume::{claims_of, PVC_PROTECTION, PV_PROTECTION};

/// The claim protection controller's `--controllers` name and identity.
pub const PVC_CONTROLLER: &str = "persistentvolumeclaim-protection";
pub const PVC_NAME: &str = "pvc-protection-controller";
/// The volume protection controller's `--controllers` name and identity.
pub const PV_CONTROLLER: &str = "persistentvolume-protection";
pub const PV_NAME: &str = "pv-protection-controller";

const PASS: Duration = Duration::from_secs(1);

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

/// Runs the claim protection controller until `cx.stop`.
pub async fn run_claims(cx: Context) {
    let claims = informer::<PersistentVolumeClaim>(&cx.informers).await;
    let pods = informer::<Pod>(&cx.informers).await;
    let pass = async {
        let _ = tokio::join!(claims.wait_until_ready(), pods.wait_until_ready());
        loop {
            let all_pods: Vec<Pod> = pods.state().iter().map(|p| (**p).clone()).collect();
            for c in claims.state() {
                if !claim_releasable(&c, &all_pods) {
                    continue;
                }
                // Pods created since the cache was read: ask the API before letting go.
                let api: Api<Pod> =
                    Api::namespaced(cx.client.clone(), &c.namespace().unwrap_or_default());
                let Ok(live) = api.list(&Default::default()).await else {
                    continue;
                };
                if !claim_releasable(&c, &live.items) {
                    continue;
                }
                let mut c = (*c).clone();
                without(&mut c.metadata.finalizers, PVC_PROTECTION);
                let api: Api<PersistentVolumeClaim> =
                    Api::namespaced(cx.client.clone(), &c.namespace().unwrap_or_default());
                if let Err(e) = api.replace(&c.name_any(), &PostParams::default(), &c).await {
                    tracing::debug!(error = %e, "pvc protection: retrying");
                }
            }
            tokio::time::sleep(PASS).await;
        }
    };
    tokio::select! {
        _ = cx.stop.cancelled() => {}
        _ = pass => {}
    }
}

/// Runs the volume protection controller until `cx.stop`.
pub async fn run_volumes(cx: Context) {
    let volumes = informer::<PersistentVolume>(&cx.informers).await;
    let api: Api<PersistentVolume> = Api::all(cx.client.clone());
    let pass = async {
        volumes.wait_until_ready().await.ok();
        loop {
            for v in volumes.state() {
                if !volume_releasable(&v) {
                    continue;
                }
                let mut v = (*v).clone();
                without(&mut v.metadata.finalizers, PV_PROTECTION);
                if let Err(e) = api.replace(&v.name_any(), &PostParams::default(), &v).await {
                    tracing::debug!(error = %e, "pv protection: retrying");
                }
            }
            tokio::time::sleep(PASS).await;
        }
    };
    tokio::select! {
        _ = cx.stop.cancelled() => {}
        _ = pass => {}
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
