//! `persistentVolumeClaim` volumes: the claim must be bound, and its PersistentVolume must be
//! of type hostPath or local; the volume's directory (created for hostPath `DirectoryOrCreate`,
//! mode 0777 as the local-path provisioner makes it) is linked from
//! `<pod dir>/volumes/kubernetes.io~pvc/<volume>`, which the container mounts (the runtime
//! resolves the link). Removing the pod's directory removes the link, never the data.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

/// Where a claim's volume is on the node, and whether to create it when missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPath {
    pub path: PathBuf,
    pub create: bool,
}

/// Why a claim's volume cannot be mounted yet (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The claim does not exist.
    #[error("persistentvolumeclaim \"{0}\" not found")]
    ClaimNotFound(String),
    /// The claim is not bound (yet).
    #[error("PVC {namespace}/{name} has non-bound phase (\"{phase}\") or empty pvc.Spec.VolumeName (\"{volume}\")")]
    NotBound {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
        /// Its phase.
        phase: String,
        /// Its `spec.volumeName`.
        volume: String,
    },
    /// The bound volume does not exist.
    #[error("persistentvolume \"{0}\" not found")]
    VolumeNotFound(String),
    /// The volume is of a type the kubelet cannot mount.
    #[error("persistentvolume \"{0}\": k3rs mounts persistent volumes of type hostPath or local")]
    VolumeType(String),
}

/// Why a claim's directory could not be linked into the pod.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The volume's path is missing and may not be created.
    #[error("path {} does not exist", .0.display())]
    Missing(PathBuf),
    /// A file system operation (`what` a path) failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation and its path (`creating /x`).
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Resolves claim `name` (of namespace `ns`) to its volume's path (pure); `Err` says why the
/// volume cannot be mounted yet.
pub fn resolve(
    ns: &str,
    name: &str,
    claim: Option<&PersistentVolumeClaim>,
    volume: Option<&PersistentVolume>,
) -> Result<ClaimPath, ResolveError> {
    let claim = claim.ok_or_else(|| ResolveError::ClaimNotFound(name.to_string()))?;
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let pv_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("");
    if phase != "Bound" || pv_name.is_empty() {
        return Err(ResolveError::NotBound {
            namespace: ns.to_string(),
            name: name.to_string(),
            phase: phase.to_string(),
            volume: pv_name.to_string(),
        });
    }
    let volume = volume.ok_or_else(|| ResolveError::VolumeNotFound(pv_name.to_string()))?;
    let spec = volume.spec.as_ref();
    if let Some(h) = spec.and_then(|s| s.host_path.as_ref()) {
        return Ok(ClaimPath {
            path: PathBuf::from(&h.path),
            create: h.type_.as_deref() == Some("DirectoryOrCreate"),
        });
    }
    if let Some(l) = spec.and_then(|s| s.local.as_ref()) {
        return Ok(ClaimPath {
            path: PathBuf::from(&l.path),
            create: false,
        });
    }
    Err(ResolveError::VolumeType(pv_name.to_string()))
}

/// Makes the volume's directory (if `create`) and points `link` at it.
pub fn link(target: &ClaimPath, link: &Path) -> Result<(), LinkError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |what: &str, path: &Path| {
        let what = format!("{what} {}", path.display());
        move |source| LinkError::Io { what, source }
    };
    if !target.path.exists() {
        if !target.create {
            return Err(LinkError::Missing(target.path.clone()));
        }
        std::fs::create_dir_all(&target.path).map_err(io("creating", &target.path))?;
        std::fs::set_permissions(&target.path, std::fs::Permissions::from_mode(0o777))
            .map_err(io("chmod", &target.path))?;
    }
    if std::fs::read_link(link).ok().as_deref() == Some(target.path.as_path()) {
        return Ok(());
    }
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
    }
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(&target.path, link).map_err(io("linking", link))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(phase: &str, volume: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeName": volume}, "status": {"phase": phase}}))
        .unwrap()
    }

    fn pv(spec: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": spec})).unwrap()
    }

    #[test]
    fn bound_host_path_and_local_volumes_resolve() {
        let hp = pv(json!({"hostPath": {"path": "/s/v", "type": "DirectoryOrCreate"}}));
        assert_eq!(
            resolve("ns", "c", Some(&claim("Bound", "v")), Some(&hp)),
            Ok(ClaimPath {
                path: "/s/v".into(),
                create: true
            })
        );
        let local = pv(json!({"local": {"path": "/mnt/disk"}}));
        assert_eq!(
            resolve("ns", "c", Some(&claim("Bound", "v")), Some(&local)),
            Ok(ClaimPath {
                path: "/mnt/disk".into(),
                create: false
            })
        );
    }

    #[test]
    fn unbound_missing_and_foreign_volumes_wait() {
        assert_eq!(
            resolve("ns", "c", None, None).unwrap_err().to_string(),
            "persistentvolumeclaim \"c\" not found"
        );
        assert_eq!(
            resolve("ns", "c", Some(&claim("Pending", "")), None)
                .unwrap_err()
                .to_string(),
            "PVC ns/c has non-bound phase (\"Pending\") or empty pvc.Spec.VolumeName (\"\")"
        );
        assert_eq!(
            resolve("ns", "c", Some(&claim("Bound", "v")), None)
                .unwrap_err()
                .to_string(),
            "persistentvolume \"v\" not found"
        );
        let nfs = pv(json!({"nfs": {"server": "s", "path": "/"}}));
        assert_eq!(
            resolve("ns", "c", Some(&claim("Bound", "v")), Some(&nfs))
                .unwrap_err()
                .to_string(),
            "persistentvolume \"v\": k3rs mounts persistent volumes of type hostPath or local"
        );
    }

    #[test]
    fn link_creates_the_directory_and_points_at_it() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("storage/pvc-1");
        let l = tmp.path().join("pod/volumes/kubernetes.io~pvc/data");
        let target = ClaimPath {
            path: data.clone(),
            create: true,
        };
        link(&target, &l).unwrap();
        link(&target, &l).unwrap();
        assert!(data.is_dir());
        assert_eq!(std::fs::read_link(&l).unwrap(), data);
        std::fs::write(l.join("f"), "x").unwrap();
        assert_eq!(std::fs::read_to_string(data.join("f")).unwrap(), "x");
        let missing = ClaimPath {
            path: tmp.path().join("nope"),
            create: false,
        };
        assert!(link(&missing, &l)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }
}
