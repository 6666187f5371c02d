//! k3s's built-in local-path provisioner (rancher's `local-path-provisioner`), pure: the
//! `local-path` StorageClass, the hostPath volume for a claim on its selected node, and the
//! steps of deleting a released volume's directory through a helper pod on that node.

use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::json;

use k3rs_apimachinery::volume::{ANN_PROVISIONED_BY, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER};

/// The provisioner's name, as rancher's.
pub const PROVISIONER: &str = "rancher.io/local-path";
/// The class k3s installs.
pub const CLASS: &str = "local-path";
/// The annotation that makes a class the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// Where helper pods run.
pub const HELPER_NAMESPACE: &str = "kube-system";
/// The helper pods' image (built by `scripts/build-images.sh`, imported by the agent), under
/// `--system-default-registry` when given ([`helper_image`]).
pub const HELPER_IMAGE: &str = "docker.io/library/busybox:latest";

/// The helper pods' image: [`HELPER_IMAGE`] moved to `system_default_registry`, if any.
pub fn helper_image(system_default_registry: Option<&str>) -> String {
    k3rs_apimachinery::system_image::with_registry(
        system_default_registry.unwrap_or_default(),
        HELPER_IMAGE,
    )
}

/// The `local-path` StorageClass: default, WaitForFirstConsumer, reclaim Delete.
pub fn storage_class() -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("a StorageClass")
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    k: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(k).map(String::as_str)
}

/// The volume's name for a claim: `pvc-<uid>`, as every external provisioner names it.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// The claims the provisioner owes a volume: annotated for it, Pending without a volume, not
/// being deleted, with no volume of their name yet.
pub fn to_provision<'a>(
    claims: &'a [PersistentVolumeClaim],
    volumes: &[PersistentVolume],
) -> Vec<&'a PersistentVolumeClaim> {
    claims
        .iter()
        .filter(|c| annotation(&c.metadata, ANN_STORAGE_PROVISIONER) == Some(PROVISIONER))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            c.spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .is_none_or(str::is_empty)
        })
        .filter(|c| {
            let name = volume_name(c);
            !volumes
                .iter()
                .any(|v| v.metadata.name.as_deref() == Some(&name))
        })
        .collect()
}

/// Why no volume can be made for a claim.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The claim names no selected node (rancher's message).
    #[error("configuration error, no node was specified")]
    NoNode,
    /// The volume built does not decode as a PersistentVolume.
    #[error("{0}")]
    Volume(#[from] serde_json::Error),
}

/// The hostPath volume at `<base>/pvc-<uid>_<namespace>_<name>` on the claim's selected node
/// (node affinity on `kubernetes.io/hostname`), pre-bound to the claim, with the class's
/// reclaim policy; `Err` is rancher's message when no node was selected.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    base: &Path,
) -> Result<PersistentVolume, ProvisionError> {
    let node = annotation(&claim.metadata, ANN_SELECTED_NODE)
        .filter(|n| !n.is_empty())
        .ok_or(ProvisionError::NoNode)?;
    let name = volume_name(claim);
    let ns = claim.metadata.namespace.as_deref().unwrap_or("");
    let claim_name = claim.metadata.name.as_deref().unwrap_or("");
    let path = base.join(format!("{name}_{ns}_{claim_name}"));
    let spec = claim.spec.clone().unwrap_or_default();
    let size = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "0".into());
    let v = json!({
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: PROVISIONER, "local.path.provisioner/selected-node": node}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.access_modes.unwrap_or_default(),
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "storageClassName": class.metadata.name,
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "hostPath": {"path": path.to_string_lossy(), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                         "name": claim_name, "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
        },
    });
    Ok(serde_json::from_value(v)?)
}

/// What a helper pod's name starts with; the volume's name follows.
pub const HELPER_PREFIX: &str = "helper-pod-delete-";

/// The helper pod's name for a volume.
pub fn helper_name(volume: &str) -> String {
    format!("{HELPER_PREFIX}{volume}")
}

/// The next step of deleting a released volume.
#[derive(Clone, Debug, PartialEq)]
pub enum Teardown {
    /// Not ours, or not to delete (yet).
    None,
    /// Start the helper pod that removes the directory.
    CreateHelper(Box<Pod>),
    /// The helper is still running.
    Wait,
    /// The directory is gone: delete the helper and the volume.
    Finish,
    /// The helper failed: delete it (the next pass starts another).
    Retry,
}

/// The node and directory of one of our hostPath volumes.
fn placement(volume: &PersistentVolume) -> Option<(String, &Path)> {
    let spec = volume.spec.as_ref()?;
    let path = Path::new(spec.host_path.as_ref()?.path.as_str());
    let node = spec
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms
        .first()?
        .match_expressions
        .as_ref()?
        .iter()
        .find(|e| e.key == "kubernetes.io/hostname")?
        .values
        .as_ref()?
        .first()?
        .clone();
    Some((node, path))
}

/// What to do about `volume` given the helper pod for it, if any (a new one runs `image`).
pub fn teardown(volume: &PersistentVolume, helper: Option<&Pod>, image: &str) -> Teardown {
    let ours = annotation(&volume.metadata, ANN_PROVISIONED_BY) == Some(PROVISIONER);
    let spec = volume.spec.as_ref();
    let delete = spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    if !(ours && delete && released) || volume.metadata.deletion_timestamp.is_some() {
        return Teardown::None;
    }
    match helper
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.as_deref())
    {
        Some("Succeeded") => return Teardown::Finish,
        Some("Failed") => return Teardown::Retry,
        _ if helper.is_some() => return Teardown::Wait,
        _ => {}
    }
    let Some((node, path)) = placement(volume) else {
        return Teardown::None;
    };
    let (Some(parent), Some(dir)) = (path.parent(), path.file_name()) else {
        return Teardown::None;
    };
    let name = volume.metadata.name.clone().unwrap_or_default();
    let pod = json!({
        "metadata": {"name": helper_name(&name), "namespace": HELPER_NAMESPACE,
                     "labels": {"app": "local-path-provisioner-helper"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "helper-pod", "image": image, "imagePullPolicy": "IfNotPresent",
                "command": ["rm", "-rf", format!("/data/{}", dir.to_string_lossy())],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "hostPath": {"path": parent.to_string_lossy(), "type": "DirectoryOrCreate"}}],
        },
    });
    match serde_json::from_value(pod) {
        Ok(p) => Teardown::CreateHelper(Box::new(p)),
        Err(_) => Teardown::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::volume::fixtures::{pv, pvc};
    use std::collections::BTreeMap;

    /// The default-class annotation map.
    fn default_annotation() -> BTreeMap<String, String> {
        BTreeMap::from([(DEFAULT_CLASS_ANNOTATION.to_string(), "true".to_string())])
    }

    fn claim() -> PersistentVolumeClaim {
        pvc(
            "data",
            "2Gi",
            json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: PROVISIONER, ANN_SELECTED_NODE: "n1"}},
                   "spec": {"storageClassName": "local-path"}}),
        )
    }

    #[test]
    fn the_class_is_default_wffc_and_deletes() {
        let c = storage_class();
        assert_eq!(c.metadata.name.as_deref(), Some("local-path"));
        assert_eq!(c.metadata.annotations, Some(default_annotation()));
        assert_eq!(c.provisioner, PROVISIONER);
        assert_eq!(c.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(
            c.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
    }

    #[test]
    fn volume_on_the_selected_node() {
        let v = volume_for(
            &claim(),
            &storage_class(),
            Path::new("/var/lib/k3rs/storage"),
        )
        .unwrap();
        let got = serde_json::to_value(&v).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "pvc-uid-data", "annotations": {ANN_PROVISIONED_BY: PROVISIONER, "local.path.provisioner/selected-node": "n1"}},
                "spec": {
                    "capacity": {"storage": "2Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "volumeMode": "Filesystem",
                    "storageClassName": "local-path",
                    "persistentVolumeReclaimPolicy": "Delete",
                    "hostPath": {"path": "/var/lib/k3rs/storage/pvc-uid-data_ns_data", "type": "DirectoryOrCreate"},
                    "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "ns", "name": "data", "uid": "uid-data"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
                },
            })
        );
        let mut no_node = claim();
        no_node
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(ANN_SELECTED_NODE);
        assert_eq!(
            volume_for(&no_node, &storage_class(), Path::new("/s"))
                .unwrap_err()
                .to_string(),
            "configuration error, no node was specified"
        );
    }

    #[test]
    fn provisions_each_annotated_claim_once() {
        let c = [claim(), pvc("other", "1Gi", json!({}))];
        assert_eq!(to_provision(&c, &[]).len(), 1);
        let made = volume_for(&c[0], &storage_class(), Path::new("/s")).unwrap();
        assert!(to_provision(&c, &[made]).is_empty());
    }

    #[test]
    fn teardown_steps() {
        let mut v = volume_for(&claim(), &storage_class(), Path::new("/s")).unwrap();
        assert_eq!(
            teardown(&v, None, HELPER_IMAGE),
            Teardown::None,
            "not released yet"
        );
        v.status = Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
            phase: Some("Released".into()),
            ..Default::default()
        });
        let Teardown::CreateHelper(pod) = teardown(&v, None, HELPER_IMAGE) else {
            panic!("expected a helper pod")
        };
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            pod.metadata.name.as_deref(),
            Some("helper-pod-delete-pvc-uid-data")
        );
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("docker.io/library/busybox:latest")
        );
        let Teardown::CreateHelper(mirrored) =
            teardown(&v, None, &helper_image(Some("registry.local:5000")))
        else {
            panic!("expected a helper pod")
        };
        assert_eq!(
            mirrored.spec.unwrap().containers[0].image.as_deref(),
            Some("registry.local:5000/library/busybox:latest")
        );
        assert_eq!(
            spec.containers[0].command.as_deref().unwrap(),
            ["rm", "-rf", "/data/pvc-uid-data_ns_data"]
        );
        assert_eq!(
            spec.volumes.as_ref().unwrap()[0]
                .host_path
                .as_ref()
                .unwrap()
                .path,
            "/s"
        );
        let with = |phase: &str| {
            let mut p = (*pod).clone();
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            });
            p
        };
        assert_eq!(
            teardown(&v, Some(&with("Running")), HELPER_IMAGE),
            Teardown::Wait
        );
        assert_eq!(
            teardown(&v, Some(&with("Succeeded")), HELPER_IMAGE),
            Teardown::Finish
        );
        assert_eq!(
            teardown(&v, Some(&with("Failed")), HELPER_IMAGE),
            Teardown::Retry
        );
        // A static volume is never ours to delete.
        let mut static_pv = pv(
            "s",
            "1Gi",
            json!({"spec": {"persistentVolumeReclaimPolicy": "Delete"}}),
        );
        static_pv.status.as_mut().unwrap().phase = Some("Released".into());
        assert_eq!(teardown(&static_pv, None, HELPER_IMAGE), Teardown::None);
    }
}
