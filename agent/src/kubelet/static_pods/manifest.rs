//! Static pod manifests → the pods the kubelet runs (upstream's file pod source,
//! `pkg/kubelet/config/file.go` and `common.go`), as a pure function of the files' contents.
//!
//! # Guarantees
//! - One pod per file, YAML or JSON; files whose name starts with `.` are ignored; a file that
//!   is not a valid Pod is reported and skipped (the others still run).
//! - The pod is named `<name>-<node name, lowercased>`, gets namespace `default` when it has
//!   none, `spec.nodeName` = the node, a toleration of every `NoExecute` taint, phase `Pending`,
//!   and the annotations `kubernetes.io/config.source: file` and `kubernetes.io/config.hash`.
//! - Its UID is that hash: derived from the manifest as written, the node and the file's path,
//!   so the same file gives the same UID on every read and any edit gives a new one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodStatus, Toleration};
use sha2::{Digest, Sha256};

/// `kubernetes.io/config.source`: where a pod came from (`file`, `http`, `api`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// `kubernetes.io/config.hash`: the static pod's UID.
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// `kubernetes.io/config.mirror`: set on mirror pods, the hash of their static pod.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `kubernetes.io/config.seen`: when the kubelet first saw the pod (RFC 3339, nanoseconds).
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// The source of manifest files.
pub const FILE_SOURCE: &str = "file";

/// One manifest file: its path and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    pub path: String,
    pub text: String,
}

/// Why a manifest file is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub path: String,
    pub reason: String,
}

/// Whether a file of the manifest directory is read (not a hidden file).
pub fn is_manifest_name(file_name: &str) -> bool {
    !file_name.starts_with('.')
}

/// The static pods of `files` for node `node_name`, ordered by path, and the files refused.
pub fn static_pods(files: &[ManifestFile], node_name: &str) -> (Vec<Pod>, Vec<Rejected>) {
    let mut files: Vec<&ManifestFile> = files.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut pods = Vec::new();
    let mut rejected = Vec::new();
    for f in files {
        match static_pod(f, node_name) {
            Ok(p) => pods.push(p),
            Err(reason) => rejected.push(Rejected {
                path: f.path.clone(),
                reason: reason.to_string(),
            }),
        }
    }
    (pods, rejected)
}

/// Why a manifest is skipped (the upstream kubelet's words).
#[derive(Debug, thiserror::Error)]
enum ManifestError {
    /// Not YAML or JSON.
    #[error("invalid pod manifest: {0}")]
    Syntax(#[source] serde_norway::Error),
    /// Not a `v1` Pod (its apiVersion and kind, JSON).
    #[error("invalid pod: expected apiVersion v1 and kind Pod, got {api_version} {kind}")]
    Kind {
        api_version: serde_json::Value,
        kind: serde_json::Value,
    },
    /// Not of the Pod's shape.
    #[error("invalid pod: {0}")]
    Shape(#[source] serde_json::Error),
    /// A required field (named) is missing.
    #[error("invalid pod: {0}: Required value")]
    Required(&'static str),
}

/// Parses one manifest (YAML is a superset of JSON) into a Pod.
fn parse(text: &str) -> Result<serde_json::Value, ManifestError> {
    let v: serde_json::Value = serde_norway::from_str(text).map_err(ManifestError::Syntax)?;
    if v["kind"] != "Pod" || v["apiVersion"] != "v1" {
        return Err(ManifestError::Kind {
            api_version: v["apiVersion"].clone(),
            kind: v["kind"].clone(),
        });
    }
    Ok(v)
}

/// The hash (and UID) of a manifest: SHA-256 over the pod as written, the node and the path,
/// hex, 32 characters (upstream: an MD5 of the same three).
pub fn manifest_hash(pod: &serde_json::Value, node_name: &str, path: &str) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(pod).unwrap_or_default());
    h.update(format!("host:{node_name}").as_bytes());
    h.update(format!("file:{path}").as_bytes());
    hex::encode(&h.finalize()[..16])
}

fn static_pod(f: &ManifestFile, node_name: &str) -> Result<Pod, ManifestError> {
    let value = parse(&f.text)?;
    let mut pod: Pod = serde_json::from_value(value.clone()).map_err(ManifestError::Shape)?;
    let name = pod
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(ManifestError::Required("metadata.name"))?;
    let spec = pod.spec.as_mut().ok_or(ManifestError::Required("spec"))?;
    if spec.containers.is_empty() {
        return Err(ManifestError::Required("spec.containers"));
    }
    let hash = match pod.metadata.uid.clone().filter(|u| !u.is_empty()) {
        Some(uid) => uid,
        None => manifest_hash(&value, node_name, &f.path),
    };
    spec.node_name = Some(node_name.to_string());
    let tolerate_no_execute = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    tolerations.retain(|t| {
        !(t.key.as_deref().unwrap_or_default().is_empty()
            && t.effect.as_deref() == Some("NoExecute"))
    });
    tolerations.push(tolerate_no_execute);
    let meta = &mut pod.metadata;
    meta.uid = Some(hash.clone());
    meta.name = Some(format!("{name}-{}", node_name.to_lowercase()));
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".into());
    }
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), hash);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.into(), FILE_SOURCE.into());
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    Ok(pod)
}

/// Whether `pod` came from a manifest file (a static pod as the kubelet runs it).
pub fn is_static(pod: &Pod) -> bool {
    annotation(pod, CONFIG_SOURCE_ANNOTATION).is_some_and(|s| s != "api")
}

/// Whether `pod` is a mirror pod (the API's copy of a static pod).
pub fn is_mirror(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

/// An annotation's value.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(path: &str, text: &str) -> ManifestFile {
        ManifestFile {
            path: path.into(),
            text: text.into(),
        }
    }

    const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\n\
                       spec:\n  containers:\n  - name: c\n    image: busybox\n";

    #[test]
    fn a_yaml_manifest_becomes_a_static_pod() {
        let (pods, rejected) = static_pods(&[file("/m/web.yaml", WEB)], "Node-1");
        assert_eq!(rejected, vec![]);
        let hash = manifest_hash(
            &serde_json::to_value(serde_norway::from_str::<serde_json::Value>(WEB).unwrap())
                .unwrap(),
            "Node-1",
            "/m/web.yaml",
        );
        assert_eq!(hash.len(), 32);
        assert_eq!(
            serde_json::to_value(&pods[0]).unwrap(),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web-node-1", "namespace": "default", "uid": hash,
                    "labels": {"app": "web"},
                    "annotations": {
                        "kubernetes.io/config.hash": hash,
                        "kubernetes.io/config.source": "file",
                    },
                },
                "spec": {
                    "containers": [{"name": "c", "image": "busybox"}],
                    "nodeName": "Node-1",
                    "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
                },
                "status": {"phase": "Pending"},
            })
        );
        assert!(is_static(&pods[0]) && !is_mirror(&pods[0]));
    }

    #[test]
    fn the_uid_follows_content_node_and_path() {
        let uid = |files: &[ManifestFile], node: &str| {
            static_pods(files, node).0[0].metadata.uid.clone().unwrap()
        };
        let base = uid(&[file("/m/web.yaml", WEB)], "n1");
        assert_eq!(base, uid(&[file("/m/web.yaml", WEB)], "n1"));
        assert_ne!(base, uid(&[file("/m/other.yaml", WEB)], "n1"));
        assert_ne!(base, uid(&[file("/m/web.yaml", WEB)], "n2"));
        let edited = WEB.replace("busybox", "busybox:1.36");
        assert_ne!(base, uid(&[file("/m/web.yaml", &edited)], "n1"));
        // A UID written in the manifest is kept.
        let with_uid = WEB.replace("name: web\n", "name: web\n  uid: fixed\n");
        assert_eq!(uid(&[file("/m/web.yaml", &with_uid)], "n1"), "fixed");
    }

    #[test]
    fn json_and_namespaces_and_bad_files() {
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"kube-system"},
            "spec":{"containers":[{"name":"c","image":"i"}],
            "tolerations":[{"operator":"Exists","effect":"NoExecute","tolerationSeconds":5},
                           {"key":"k","operator":"Exists","effect":"NoSchedule"}]}}"#;
        let files = [
            file("/m/z.json", json),
            file(
                "/m/b.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            ),
            file(
                "/m/c.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: {}\n",
            ),
            file("/m/d.yaml", "kind: [oops"),
            file(
                "/m/e.yaml",
                "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n",
            ),
        ];
        let (pods, rejected) = static_pods(&files, "n1");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("a-n1"));
        assert_eq!(pods[0].metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            serde_json::to_value(&pods[0].spec.as_ref().unwrap().tolerations).unwrap(),
            json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"},
                   {"operator": "Exists", "effect": "NoExecute"}])
        );
        let reasons: Vec<(&str, &str)> = rejected
            .iter()
            .map(|r| (r.path.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 4);
        assert_eq!(
            reasons[0],
            (
                "/m/b.yaml",
                "invalid pod: expected apiVersion v1 and kind Pod, got \"v1\" \"Service\""
            )
        );
        assert_eq!(
            reasons[1],
            ("/m/c.yaml", "invalid pod: spec.containers: Required value")
        );
        assert_eq!(reasons[2].0, "/m/d.yaml");
        assert!(reasons[2].1.starts_with("invalid pod manifest: "));
        assert_eq!(
            reasons[3],
            ("/m/e.yaml", "invalid pod: metadata.name: Required value")
        );
        assert!(is_manifest_name("web.yaml") && !is_manifest_name(".web.yaml.swp"));
    }
}
