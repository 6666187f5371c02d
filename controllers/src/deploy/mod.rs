//! Auto-deploying manifests (k3s's deploy controller): the YAML and JSON files under
//! `<data-dir>/server/manifests` are applied to the cluster at start and whenever their
//! content changes, and what a file applied is pruned when the file goes away.
//!
//! # Guarantees
//! - Files ending in `.yaml`, `.yml` or `.json`, in the directory and its subdirectories
//!   (hidden ones left out), are read every [`INTERVAL`] (k3s's 15 s) and once at start; a
//!   file `X.skip` next to `X` means `X` is not applied (as in k3s). Multi-document YAML and
//!   `List` kinds are understood.
//! - A file is applied when the sha256 of its content differs from the one recorded for it,
//!   with server-side apply as field manager `k3rs-deploy`, conflicts forced. Namespaced
//!   objects that name no namespace go to `kube-system`, like k3s's.
//! - What each file applied is recorded in a ConfigMap `kube-system/k3rs-manifest-…`
//!   (label `deploy.k3rs.io/manifest-record=true`), so pruning survives restarts. Removing a
//!   file, or adding its `.skip`, deletes the objects it applied; an edit deletes the ones
//!   it no longer declares. An object another file still declares is never deleted.
//! - Runs only on the server holding the controller-manager Lease (servers share the store).
//!
//! # Errors
//! A file that cannot be read (bad YAML, a document without `kind`), or whose objects the API
//! refuses (unknown kind, invalid object), is logged and reported once per distinct failure
//! as a Warning Event in `kube-system` about its record, and retried on every pass; the other
//! files go on. Event reasons (k3s's names): `AppliedManifest`, `ApplyManifestFailed`,
//! `DeletedManifest`, `DeleteManifestFailed`.

pub(crate) mod apply;
pub(crate) mod manifest;
pub(crate) mod plan;
pub(crate) mod record;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::users;
use manifest::Manifest;

/// How often the directory is read (k3s's deploy controller resyncs every 15 s).
pub(crate) const INTERVAL: Duration = Duration::from_secs(15);
/// Where the records live.
pub(crate) const RECORD_NAMESPACE: &str = "kube-system";
/// The namespace of namespaced objects that name none.
pub(crate) const DEFAULT_NAMESPACE: &str = "kube-system";
/// Who applies: a cluster admin, as k3s's deploy controller.
pub(crate) const USER: &str = "system:k3rs-deploy";
/// The Events' reporting component.
pub(crate) const COMPONENT: &str = "k3rs-deploy";

/// The Event reasons.
pub(crate) mod reason {
    pub const APPLIED: &str = "AppliedManifest";
    pub const APPLY_FAILED: &str = "ApplyManifestFailed";
    pub const DELETED: &str = "DeletedManifest";
    pub const DELETE_FAILED: &str = "DeleteManifestFailed";
}

/// Applies `dir` every [`INTERVAL`] until `stop`, as [`USER`] (a cluster admin).
pub async fn run(clients: Arc<dyn ClientBuilder>, dir: PathBuf, stop: CancellationToken) {
    let client = clients.user(USER, &[users::SYSTEM_MASTERS], RECORD_NAMESPACE);
    let events = crate::EventRecorder::new(
        client.clone(),
        COMPONENT,
        &k3rs_apimachinery::net::hostname(),
    );
    let mut applier = apply::Applier::new(client, events);
    tracing::info!(dir = %dir.display(), "applying the manifests dir");
    loop {
        pass(&mut applier, &dir).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

/// One pass: read the files and the records, then apply and prune.
async fn pass(applier: &mut apply::Applier, dir: &Path) {
    let read = {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || read_dir(&dir)).await
    };
    let manifests = match read {
        Ok(Ok(m)) => m,
        // Never prune from a directory that could not be read.
        Ok(Err(e)) => {
            return tracing::warn!(dir = %dir.display(), error = %e, "reading the manifests dir")
        }
        Err(e) => return tracing::warn!(error = %e, "reading the manifests dir"),
    };
    let records = match applier.records().await {
        Ok(r) => r,
        Err(e) => return tracing::warn!(error = %e, "listing the manifest records"),
    };
    for step in plan::plan(&manifests, &records) {
        applier.execute(step).await;
    }
}

/// The manifests under `dir` (created if missing), sorted by path, `.skip`ped ones left out.
/// A file that cannot be read is a manifest with an error, not a missing one.
pub(crate) fn read_dir(dir: &Path) -> std::io::Result<Vec<Manifest>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    Ok(files
        .iter()
        .filter(|path| !skip_file(path).exists())
        .map(|path| {
            let source = path
                .strip_prefix(dir)
                .unwrap_or(path)
                .to_string_lossy()
                .into_owned();
            match std::fs::read(path) {
                Ok(bytes) => Manifest::parse(&source, &bytes),
                Err(e) => Manifest {
                    source,
                    checksum: String::new(),
                    objects: Err(manifest::ManifestError::Read(e.to_string())),
                },
            }
        })
        .collect())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else if is_manifest(&name) {
            out.push(path);
        }
    }
    Ok(())
}

/// Whether a file name is a manifest's (k3s: `.yaml`, `.yml`, `.json`).
pub(crate) fn is_manifest(name: &str) -> bool {
    [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| name.len() > ext.len() && name.ends_with(ext))
}

/// `X.skip` for `X`.
fn skip_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".skip");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_names() {
        assert!(is_manifest("a.yaml") && is_manifest("b.yml") && is_manifest("c.json"));
        assert!(!is_manifest("a.yaml.skip") && !is_manifest(".yaml") && !is_manifest("README"));
    }

    #[test]
    fn reads_files_recursively_skipping_skipped_and_hidden_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("manifests");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
        std::fs::write(root.join("a.yaml"), cm).unwrap();
        std::fs::write(root.join("sub/b.json"), "{\"kind\": 1}").unwrap();
        std::fs::write(root.join("c.yaml"), cm).unwrap();
        std::fs::write(root.join("c.yaml.skip"), "").unwrap();
        std::fs::write(root.join(".hidden/d.yaml"), cm).unwrap();
        std::fs::write(root.join("notes.txt"), "x").unwrap();
        let got = read_dir(&root).unwrap();
        let sources: Vec<&str> = got.iter().map(|m| m.source.as_str()).collect();
        assert_eq!(sources, ["a.yaml", "sub/b.json"]);
        assert_eq!(got[0].objects.as_ref().unwrap().len(), 1);
        assert_eq!(
            got[1].objects.as_ref().map_err(|e| e.to_string()).err(),
            Some("document 1: apiVersion is missing".to_string())
        );
        assert_eq!(read_dir(&dir.path().join("new")).unwrap(), vec![]);
    }
}
