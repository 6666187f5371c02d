//! How each binder [`Action`] changes the object it is about (pure). The shell applies them
//! to its cached copy and writes the result with that copy's resourceVersion, so a stale
//! cache fails with 409 Conflict instead of overwriting a newer object.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeStatus,
};

use super::binder::Action;
use k3rs_apimachinery::volume::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_STORAGE_PROVISIONER,
};

/// Which write an edit needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Object,
    Status,
}

fn annotate(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, k: &str) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(k.to_string(), "yes".to_string());
}

/// Applies `action` to `volume` (given the claim it may bind to); `None` when it does not
/// concern volumes.
pub fn volume(
    action: &Action,
    volume: &mut PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
) -> Option<Write> {
    match action {
        Action::BindVolume { .. } => {
            let claim = claim?;
            let spec = volume.spec.get_or_insert_with(Default::default);
            if spec.claim_ref.is_none() {
                annotate(&mut volume.metadata, ANN_BOUND_BY_CONTROLLER);
            }
            let spec = volume.spec.get_or_insert_with(Default::default);
            spec.claim_ref = Some(ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                api_version: Some("v1".into()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..ObjectReference::default()
            });
            Some(Write::Object)
        }
        Action::UnbindVolume { .. } => {
            if let Some(spec) = volume.spec.as_mut() {
                spec.claim_ref = None;
            }
            if let Some(a) = volume.metadata.annotations.as_mut() {
                a.remove(ANN_BOUND_BY_CONTROLLER);
            }
            Some(Write::Object)
        }
        Action::VolumePhase { phase, message, .. } => {
            let status = volume
                .status
                .get_or_insert_with(PersistentVolumeStatus::default);
            status.phase = Some(phase.to_string());
            status.message = message.clone();
            status.reason = message
                .as_ref()
                .map(|_| "VolumeFailed".to_string())
                .filter(|_| *phase == "Failed");
            Some(Write::Status)
        }
        _ => None,
    }
}

/// Applies `action` to `claim` (given the volume it binds to); `None` when it does not
/// concern claims.
pub fn claim(
    action: &Action,
    claim: &mut PersistentVolumeClaim,
    volume: Option<&PersistentVolume>,
) -> Option<Write> {
    match action {
        Action::BindClaim {
            volume: name,
            by_controller,
            ..
        } => {
            claim.spec.get_or_insert_with(Default::default).volume_name = Some(name.clone());
            annotate(&mut claim.metadata, ANN_BIND_COMPLETED);
            if *by_controller {
                annotate(&mut claim.metadata, ANN_BOUND_BY_CONTROLLER);
            }
            Some(Write::Object)
        }
        Action::ClaimPhase { phase, .. } => {
            let status = claim
                .status
                .get_or_insert_with(PersistentVolumeClaimStatus::default);
            status.phase = Some(phase.to_string());
            if *phase == "Bound" {
                let spec = volume.and_then(|v| v.spec.as_ref());
                status.capacity = spec.and_then(|s| s.capacity.clone());
                status.access_modes = spec.and_then(|s| s.access_modes.clone());
            }
            Some(Write::Status)
        }
        Action::AnnotateProvisioner { provisioner, .. } => {
            let a = claim.metadata.annotations.get_or_insert_with(BTreeMap::new);
            a.insert(ANN_STORAGE_PROVISIONER.into(), provisioner.clone());
            a.insert(ANN_BETA_STORAGE_PROVISIONER.into(), provisioner.clone());
            Some(Write::Object)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::binder::ClaimKey;
    use super::*;
    use k3rs_apimachinery::volume::fixtures::{pv, pvc};
    use serde_json::json;

    fn key() -> ClaimKey {
        ClaimKey {
            namespace: "ns".into(),
            name: "c".into(),
        }
    }

    #[test]
    fn binding_a_volume_sets_the_claim_ref_and_marks_the_controller() {
        let c = pvc("c", "1Gi", json!({}));
        let mut v = pv("v", "1Gi", json!({}));
        let a = Action::BindVolume {
            volume: "v".into(),
            claim: key(),
        };
        assert_eq!(volume(&a, &mut v, Some(&c)), Some(Write::Object));
        let r = v.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("ns"), Some("c"), Some("uid-c"))
        );
        assert_eq!(
            v.metadata.annotations.unwrap()[ANN_BOUND_BY_CONTROLLER],
            "yes"
        );
        // A user's pre-binding gets its UID, without the controller's mark.
        let mut v = pv(
            "v",
            "1Gi",
            json!({"spec": {"claimRef": {"namespace": "ns", "name": "c"}}}),
        );
        volume(&a, &mut v, Some(&c));
        assert_eq!(v.metadata.annotations, None);
        assert_eq!(
            v.spec.unwrap().claim_ref.unwrap().uid.as_deref(),
            Some("uid-c")
        );
    }

    #[test]
    fn bound_claim_status_copies_the_volume() {
        let mut c = pvc("c", "1Gi", json!({}));
        let v = pv("v", "5Gi", json!({}));
        let a = Action::ClaimPhase {
            claim: key(),
            phase: "Bound",
            volume: Some("v".into()),
        };
        assert_eq!(claim(&a, &mut c, Some(&v)), Some(Write::Status));
        let s = c.status.unwrap();
        assert_eq!(s.phase.as_deref(), Some("Bound"));
        assert_eq!(s.capacity.unwrap()["storage"].0, "5Gi");
        assert_eq!(s.access_modes.unwrap(), vec!["ReadWriteOnce".to_string()]);
    }

    #[test]
    fn claim_binding_and_provisioner_annotations() {
        let mut c = pvc("c", "1Gi", json!({}));
        let a = Action::BindClaim {
            claim: key(),
            volume: "v".into(),
            by_controller: true,
        };
        claim(&a, &mut c, None);
        assert_eq!(c.spec.as_ref().unwrap().volume_name.as_deref(), Some("v"));
        let ann = c.metadata.annotations.clone().unwrap();
        assert_eq!(
            (
                ann[ANN_BIND_COMPLETED].as_str(),
                ann[ANN_BOUND_BY_CONTROLLER].as_str()
            ),
            ("yes", "yes")
        );
        let a = Action::AnnotateProvisioner {
            claim: key(),
            provisioner: "rancher.io/local-path".into(),
        };
        claim(&a, &mut c, None);
        let ann = c.metadata.annotations.unwrap();
        assert_eq!(ann[ANN_STORAGE_PROVISIONER], "rancher.io/local-path");
        assert_eq!(ann[ANN_BETA_STORAGE_PROVISIONER], "rancher.io/local-path");
    }
}
