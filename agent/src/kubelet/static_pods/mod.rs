//! Static pods: pods the kubelet runs from manifest files in its pod-manifest directory
//! (upstream's `--pod-manifest-path`; k3s's `<data-dir>/agent/pod-manifests`), without the API
//! server, each shown in the API as a mirror pod that carries its status.
//!
//! - [`manifest`]: files → static pods (pure);
//! - [`mirror`]: static pods + the API's mirror pods → creates and deletes (pure);
//! - [`Source`]: the directory, read every second; the executor runs its pods next to the
//!   API's (see [`crate::kubelet::pods::run`]), writing their status to their mirror pods;
//! - [`run_mirrors`]: keeps the mirror pods in line with the static pods.

pub mod manifest;
pub mod mirror;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

pub use manifest::{is_mirror, is_static, ManifestFile};
pub use mirror::{status_target, with_mirror_status, MirrorAction, NodeRef};

/// How often the manifest directory is read and the mirror pods are checked.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The static pods of the node, as last read from the manifest directory.
#[derive(Clone, Default)]
pub struct Source {
    pods: Arc<RwLock<Vec<Pod>>>,
}

impl Source {
    /// The current static pods.
    pub fn pods(&self) -> Vec<Pod> {
        self.pods.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, pods: Vec<Pod>) {
        *self.pods.write().unwrap_or_else(|e| e.into_inner()) = pods;
    }
}

/// The manifest files of `dir` (hidden files and directories skipped; a missing directory
/// has none).
pub fn read_dir(dir: &Path) -> Vec<ManifestFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !manifest::is_manifest_name(&name) || !e.path().is_file() {
            continue;
        }
        match std::fs::read_to_string(e.path()) {
            Ok(text) => files.push(ManifestFile {
                path: e.path().display().to_string(),
                text,
            }),
            Err(err) => {
                tracing::warn!(file = %e.path().display(), "reading a static pod manifest: {err}")
            }
        }
    }
    files
}

/// Reads `dir` every [`PERIOD`] until `stop`, keeping `source` up to date and waking `changed`
/// when the static pods change. A pod keeps the `kubernetes.io/config.seen` time of its
/// first reading.
pub async fn run_source(
    dir: PathBuf,
    node_name: String,
    source: Source,
    changed: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
    let mut current: Vec<String> = Vec::new();
    loop {
        let (mut pods, rejected) = manifest::static_pods(&read_dir(&dir), &node_name);
        for r in &rejected {
            if reported.insert((r.path.clone(), r.reason.clone())) {
                tracing::warn!(file = %r.path, "static pod manifest skipped: {}", r.reason);
            }
        }
        let uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        seen.retain(|uid, _| uids.contains(uid));
        for p in &mut pods {
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let at = seen
                .entry(uid)
                .or_insert_with(|| k8s_openapi::jiff::Timestamp::now().to_string());
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(manifest::CONFIG_SEEN_ANNOTATION.into(), at.clone());
        }
        if uids != current {
            tracing::info!(dir = %dir.display(), pods = ?pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>(), "static pods");
            source.set(pods);
            current = uids;
            changed.notify_one();
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// Keeps the mirror pods in line with `source` every [`PERIOD`] until `stop`; `pods` lists
/// the API's pods bound to this node (the executor's informer).
pub async fn run_mirrors(
    client: watch::Receiver<kube::Client>,
    node_name: String,
    source: Source,
    pods: Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>,
    stop: CancellationToken,
) {
    let mut node: Option<NodeRef> = None;
    loop {
        let kube = client.borrow().clone();
        if node.is_none() {
            node = match Api::<Node>::all(kube.clone()).get(&node_name).await {
                Ok(n) => n.metadata.uid.map(|uid| NodeRef {
                    name: node_name.clone(),
                    uid,
                }),
                Err(e) => {
                    tracing::debug!(node = %node_name, "mirror pods wait for the Node: {e}");
                    None
                }
            };
        }
        if let Some(node) = &node {
            let mirrors: Vec<Pod> = pods()
                .iter()
                .filter(|p| is_mirror(p))
                .map(|p| (**p).clone())
                .collect();
            for action in mirror::plan(&source.pods(), &mirrors, node) {
                if let Err(e) = apply(&kube, &action).await {
                    tracing::warn!("mirror pod: {e}");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

async fn apply(kube: &kube::Client, action: &MirrorAction) -> Result<(), kube::Error> {
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
    match action {
        MirrorAction::Create(pod) => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            tracing::info!(pod = %name, namespace = %ns, "creating a mirror pod");
            match Api::<Pod>::namespaced(kube.clone(), ns)
                .create(&PostParams::default(), pod)
                .await
            {
                Ok(_) => Ok(()),
                // Already there (the informer lags): nothing to do.
                Err(e) if gone(&e) => Ok(()),
                Err(e) => Err(e),
            }
        }
        MirrorAction::Delete {
            namespace,
            name,
            uid,
        } => {
            tracing::info!(pod = %name, namespace = %namespace, "deleting a mirror pod");
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match Api::<Pod>::namespaced(kube.clone(), namespace)
                .delete(name, &params)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if gone(&e) => Ok(()),
                Err(e) => Err(e),
            }
        }
    }
}
