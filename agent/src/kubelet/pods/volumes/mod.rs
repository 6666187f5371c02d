//! Pod volumes on the node: each volume's directory under `<pods dir>/<pod uid>/volumes/`
//! (upstream's `kubernetes.io~<plugin>/<name>` layout), set up before the pod's containers
//! start and bind-mounted into them through CRI mounts.
//!
//! - emptyDir: a directory (mode 0777); `medium: Memory` mounts a tmpfs there (`sizeLimit` as its
//!   size).
//! - hostPath: the host's path itself; `DirectoryOrCreate` / `FileOrCreate` create it, the
//!   other types must exist.
//! - configMap, secret, downwardAPI, projected (with service-account tokens from the
//!   TokenRequest API): files from [`files`], written by [`atomic`]; always mounted read-only.
//!
//! - persistentVolumeClaim: the bound volume's hostPath/local directory (see [`claims`]).
//!
//! Anything else (CSI, …) fails the container with a message naming the volume.

pub mod atomic;
pub mod claims;
pub mod files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::api::PodApi;
use super::cri_config::Mount;
use crate::kubelet::plan::spec::uid;
use crate::kubelet::plan::Allocatable;
use files::{volume_files, FilesError, Sources};

/// The plugin directory of a volume, `None` for hostPath and unsupported kinds.
fn plugin(v: &Volume) -> Option<&'static str> {
    if v.empty_dir.is_some() {
        Some("kubernetes.io~empty-dir")
    } else if v.config_map.is_some() {
        Some("kubernetes.io~configmap")
    } else if v.secret.is_some() {
        Some("kubernetes.io~secret")
    } else if v.downward_api.is_some() {
        Some("kubernetes.io~downward-api")
    } else if v.projected.is_some() {
        Some("kubernetes.io~projected")
    } else if v.persistent_volume_claim.is_some() {
        Some("kubernetes.io~pvc")
    } else {
        None
    }
}

/// `<pods dir>/<uid>`: everything the node keeps of a pod.
pub fn pod_dir(pods_dir: &Path, pod_uid: &str) -> PathBuf {
    pods_dir.join(pod_uid)
}

/// Why a pod's volumes could not be set up or mounted (the kubelet's messages).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A volume of a type k3rs does not support (the volume's name).
    #[error("volume {0:?}: k3rs supports emptyDir, hostPath, configMap, secret, downwardAPI, projected and persistentVolumeClaim volumes")]
    Unsupported(String),
    /// A mount names no volume of the pod.
    #[error("cannot find volume {volume:?} to mount into container {container:?}")]
    NoVolume {
        /// The mount's volume name.
        volume: String,
        /// The container.
        container: String,
    },
    /// A `subPath` that leaves the volume.
    #[error("invalid subPath {0:?}")]
    SubPath(String),
    /// A file system operation (`what`: the operation and its path) failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation and its path (`creating /x`).
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A command (`mount`, shown as debug-printed) failed.
    #[error("{command}: {reason}")]
    Command {
        /// The command.
        command: String,
        /// Its error or stderr.
        reason: String,
    },
    /// A `hostPath` whose type check failed (`what`: `is not a directory`, …).
    #[error("hostPath type check failed: {path} {what}")]
    HostPathType {
        /// The path.
        path: String,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Reading a claim, ConfigMap or Secret failed.
    #[error(transparent)]
    Api(#[from] super::api::Error),
    /// A claim's volume cannot be mounted yet.
    #[error("MountVolume.SetUp failed for volume {volume:?}: {source}")]
    Claim {
        /// The pod's volume.
        volume: String,
        /// Why.
        #[source]
        source: claims::ResolveError,
    },
    /// A claim's directory could not be linked.
    #[error("MountVolume.SetUp failed for volume {volume:?}: {source}")]
    Link {
        /// The pod's volume.
        volume: String,
        /// Why.
        #[source]
        source: claims::LinkError,
    },
    /// A file volume's files cannot be made.
    #[error("MountVolume.SetUp failed for volume {volume:?}: {source}")]
    Files {
        /// The pod's volume.
        volume: String,
        /// Why.
        #[source]
        source: FilesError,
    },
    /// A projected token could not be requested.
    #[error("requesting a token for service account {account:?}: {source}")]
    Token {
        /// The pod's service account.
        account: String,
        /// Why.
        #[source]
        source: super::api::Error,
    },
    /// A file volume could not be written.
    #[error("writing volume {volume:?}: {source}")]
    Write {
        /// The pod's volume.
        volume: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn io_error(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError {
    let what = format!("{what} {}", path.display());
    move |source| VolumeError::Io { what, source }
}

/// Where `v`'s content is on the host.
pub fn host_path(pods_dir: &Path, pod_uid: &str, v: &Volume) -> Result<PathBuf, VolumeError> {
    if let Some(h) = &v.host_path {
        return Ok(PathBuf::from(&h.path));
    }
    let plugin = plugin(v).ok_or_else(|| VolumeError::Unsupported(v.name.clone()))?;
    Ok(pod_dir(pods_dir, pod_uid)
        .join("volumes")
        .join(plugin)
        .join(&v.name))
}

/// Whether `v` is an API-data volume (mounted read-only whatever the mount says).
fn api_data(v: &Volume) -> bool {
    v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.projected.is_some()
}

/// The CRI mounts of `c`'s `volumeMounts`.
pub fn mounts(pods_dir: &Path, pod: &Pod, c: &Container) -> Result<Vec<Mount>, VolumeError> {
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    let mut out = vec![];
    for m in c.volume_mounts.iter().flatten() {
        let v = volumes
            .iter()
            .find(|v| v.name == m.name)
            .ok_or_else(|| VolumeError::NoVolume {
                volume: m.name.clone(),
                container: c.name.clone(),
            })?;
        let mut path = host_path(pods_dir, uid(pod), v)?;
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            if !atomic::valid_path(sub) {
                return Err(VolumeError::SubPath(sub.to_string()));
            }
            path = path.join(sub);
            if v.empty_dir.is_some() || v.host_path.is_some() {
                std::fs::create_dir_all(&path).map_err(io_error("creating subPath", &path))?;
            }
        }
        out.push(Mount {
            container_path: m.mount_path.clone(),
            host_path: path.display().to_string(),
            readonly: m.read_only.unwrap_or(false)
                || api_data(v)
                || v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.read_only == Some(true)),
        });
    }
    Ok(out)
}

fn is_mount_point(path: &Path) -> bool {
    let p = path.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(p.as_str()))
}

fn run(cmd: &mut std::process::Command) -> Result<(), VolumeError> {
    let command = format!("{cmd:?}");
    let failed = |reason: String| VolumeError::Command {
        command: command.clone(),
        reason,
    };
    let out = cmd.output().map_err(|e| failed(e.to_string()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

fn empty_dir(dir: &Path, v: &Volume) -> Result<(), VolumeError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(io_error("creating", dir))?;
    let e = v.empty_dir.as_ref().expect("an emptyDir volume");
    if e.medium.as_deref() == Some("Memory") && !is_mount_point(dir) {
        let mut options = "mode=0777".to_string();
        if let Some(size) = &e.size_limit {
            options.push_str(&format!(",size={}", size.0));
        }
        run(std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(dir))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
        .map_err(io_error("chmod", dir))
}

fn host_path_volume(v: &Volume) -> Result<(), VolumeError> {
    let h = v.host_path.as_ref().expect("a hostPath volume");
    let path = Path::new(&h.path);
    let kind = h.type_.as_deref().unwrap_or_default();
    let exists = path.exists();
    match kind {
        "DirectoryOrCreate" if !exists => {
            std::fs::create_dir_all(path).map_err(io_error("creating", path))
        }
        "FileOrCreate" if !exists => {
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            std::fs::write(path, b"").map_err(io_error("creating", path))
        }
        "Directory" if !path.is_dir() => Err(type_check(&h.path, "is not a directory")),
        "File" if !path.is_file() => Err(type_check(&h.path, "is not a file")),
        "Socket" | "CharDevice" | "BlockDevice" if !exists => {
            Err(type_check(&h.path, "does not exist"))
        }
        _ => Ok(()),
    }
}

fn type_check(path: &str, what: &'static str) -> VolumeError {
    VolumeError::HostPathType {
        path: path.to_string(),
        what,
    }
}

/// What the node knows that downwardAPI files may show.
#[derive(Debug, Clone, Copy)]
pub struct NodeFacts<'a> {
    pub host_ips: &'a [String],
    pub pod_ips: &'a [String],
    pub allocatable: &'a Allocatable,
}

/// Sets every volume of `pod` up (idempotent: unchanged file volumes are not rewritten).
pub async fn set_up(
    api: &dyn PodApi,
    pods_dir: &Path,
    pod: &Pod,
    facts: NodeFacts<'_>,
) -> Result<(), VolumeError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y_%m_%d_%H_%M_%S.%f")
        .to_string();
    for v in volumes {
        let dir = host_path(pods_dir, uid(pod), v)?;
        if v.empty_dir.is_some() {
            empty_dir(&dir, v)?;
            continue;
        }
        if v.host_path.is_some() {
            host_path_volume(v)?;
            continue;
        }
        if let Some(c) = &v.persistent_volume_claim {
            let (claim, volume) = api.claim_and_volume(ns, &c.claim_name).await?;
            let target = claims::resolve(ns, &c.claim_name, claim.as_ref(), volume.as_ref())
                .map_err(|source| VolumeError::Claim {
                    volume: v.name.clone(),
                    source,
                })?;
            claims::link(&target, &dir).map_err(|source| VolumeError::Link {
                volume: v.name.clone(),
                source,
            })?;
            continue;
        }
        let (mut maps, mut secrets, mut tokens) =
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let mut map_names = vec![];
        let mut secret_names = vec![];
        if let Some(c) = &v.config_map {
            map_names.push(c.name.clone());
        }
        if let Some(s) = &v.secret {
            secret_names.push(s.secret_name.clone().unwrap_or_default());
        }
        for (i, s) in v
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
            .enumerate()
        {
            if let Some(c) = &s.config_map {
                map_names.push(c.name.clone());
            }
            if let Some(c) = &s.secret {
                secret_names.push(c.name.clone());
            }
            if let Some(t) = &s.service_account_token {
                let sa = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.clone())
                    .unwrap_or_else(|| "default".into());
                let token = api
                    .token(ns, &sa, t.audience.as_deref(), t.expiration_seconds, pod)
                    .await
                    .map_err(|source| VolumeError::Token {
                        account: sa.clone(),
                        source,
                    })?;
                tokens.insert(i, token);
            }
        }
        for name in map_names {
            if let Some(m) = api.config_map(ns, &name).await? {
                maps.insert(name, m);
            }
        }
        for name in secret_names {
            if let Some(s) = api.secret(ns, &name).await? {
                secrets.insert(name, s);
            }
        }
        let sources = Sources {
            pod,
            config_maps: &maps,
            secrets: &secrets,
            tokens: &tokens,
            host_ips: facts.host_ips,
            pod_ips: facts.pod_ips,
            allocatable: facts.allocatable,
        };
        let Some(files) = volume_files(v, &sources) else {
            // Unreachable: `host_path` above refused every type that is not handled here.
            return Err(VolumeError::Unsupported(v.name.clone()));
        };
        let files = files.map_err(|source| VolumeError::Files {
            volume: v.name.clone(),
            source,
        })?;
        atomic::write(&dir, &files, &stamp).map_err(|source| VolumeError::Write {
            volume: v.name.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Removes what the node keeps of a pod (tmpfs volumes unmounted first).
pub fn remove_pod_dir(pods_dir: &Path, pod_uid: &str) {
    let dir = pod_dir(pods_dir, pod_uid);
    if pod_uid.is_empty() || !dir.exists() {
        return;
    }
    let prefix = format!("{}/", dir.display());
    let mut mounted: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(String::from))
        .filter(|m| m.starts_with(&prefix))
        .collect();
    mounted.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounted {
        if let Err(e) = run(std::process::Command::new("umount").arg(&m)) {
            tracing::warn!("unmounting a pod volume: {e}");
            return;
        }
    }
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::warn!("removing {}: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn volume_mounts_become_cri_mounts() {
        let tmp = tempfile::tempdir().unwrap();
        let pods = tmp.path();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {
                "volumes": [
                    {"name": "work", "emptyDir": {}},
                    {"name": "cfg", "configMap": {"name": "cfg"}},
                    {"name": "host", "hostPath": {"path": "/srv/data"}},
                    {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
                    {"name": "csi", "csi": {"driver": "d"}}],
                "containers": [{"name": "app", "image": "i", "volumeMounts": [
                    {"name": "work", "mountPath": "/work", "subPath": "a/b"},
                    {"name": "cfg", "mountPath": "/etc/cfg"},
                    {"name": "host", "mountPath": "/data", "readOnly": true}]},
                    {"name": "bad", "image": "i", "volumeMounts": [
                    {"name": "csi", "mountPath": "/c"}]},
                    {"name": "db", "image": "i", "volumeMounts": [
                    {"name": "claim", "mountPath": "/var/db"}]},
                    {"name": "missing", "image": "i", "volumeMounts": [
                    {"name": "nope", "mountPath": "/n"}]}]}}))
        .unwrap();
        let cs = &pod.spec.as_ref().unwrap().containers;
        let got = mounts(pods, &pod, &cs[0]).unwrap();
        let empty = pods.join("u1/volumes/kubernetes.io~empty-dir/work/a/b");
        assert_eq!(
            got,
            vec![
                Mount {
                    container_path: "/work".into(),
                    host_path: empty.display().to_string(),
                    readonly: false,
                },
                Mount {
                    container_path: "/etc/cfg".into(),
                    host_path: pods
                        .join("u1/volumes/kubernetes.io~configmap/cfg")
                        .display()
                        .to_string(),
                    readonly: true,
                },
                Mount {
                    container_path: "/data".into(),
                    host_path: "/srv/data".into(),
                    readonly: true,
                },
            ]
        );
        assert!(empty.is_dir(), "the subPath is created");
        assert!(mounts(pods, &pod, &cs[1])
            .unwrap_err()
            .to_string()
            .starts_with("volume \"csi\": k3rs supports emptyDir"));
        assert_eq!(
            mounts(pods, &pod, &cs[2]).unwrap(),
            vec![Mount {
                container_path: "/var/db".into(),
                host_path: pods
                    .join("u1/volumes/kubernetes.io~pvc/claim")
                    .display()
                    .to_string(),
                readonly: false,
            }]
        );
        assert_eq!(
            mounts(pods, &pod, &cs[3]).unwrap_err().to_string(),
            "cannot find volume \"nope\" to mount into container \"missing\""
        );
    }
}
