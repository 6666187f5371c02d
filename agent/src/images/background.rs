//! The air-gap tarballs imported in the background (k3s: the agent joins and turns Ready
//! without waiting on image imports): the embedded pause image is still imported before the
//! runtime is handed out (every sandbox needs it), the tarballs of `<data-dir>/agent/images`
//! after, while the node registers and reports Ready.
//!
//! # Guarantees
//! - [`ImportsDone::wait`] returns once the import pass is over (successful or not) or its
//!   task is gone; a pod needing an image that is not present waits for it before pulling
//!   from a registry, so an image being imported is never pulled instead.
//! - [`ImportsDone::done`] is an already finished pass (an external runtime, tests).

use std::path::PathBuf;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{import_dir, Ctr};
use crate::report::error_chain;

/// Whether the air-gap import pass is over.
#[derive(Debug, Clone)]
pub struct ImportsDone(watch::Receiver<bool>);

impl ImportsDone {
    /// A pass that is already over.
    pub fn done() -> ImportsDone {
        ImportsDone(watch::channel(true).1)
    }

    /// A pass still running; the sender marks it over (or dropping it does).
    pub fn pending() -> (watch::Sender<bool>, ImportsDone) {
        let (tx, rx) = watch::channel(false);
        (tx, ImportsDone(rx))
    }

    /// Whether the pass is still running.
    pub fn is_pending(&self) -> bool {
        !*self.0.borrow() && self.0.has_changed().is_ok()
    }

    /// Waits until the pass is over.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        // An error: the sender is gone, the pass with it.
        let _ = rx.wait_for(|done| *done).await;
    }
}

/// Imports the tarballs of `dir` with `ctr`, logs what happened and marks the pass over on
/// `done` (also when stopped first).
pub async fn import(ctr: Ctr, dir: PathBuf, done: watch::Sender<bool>, stop: CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        report = import_dir(&ctr, &dir) => match report {
            Ok(report) => {
                for (tarball, images) in &report.imported {
                    tracing::info!(tarball = %tarball.display(), ?images, "imported");
                }
                tracing::info!(
                    imported = report.imported.len(),
                    unchanged = report.skipped.len(),
                    failed = report.failed.len(),
                    "air-gap images: import pass done"
                );
            }
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                "importing the air-gap images: {}",
                error_chain(&e)
            ),
        }
    }
    done.send_replace(true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waiting_ends_when_the_pass_is_over_or_gone() {
        assert!(!ImportsDone::done().is_pending());
        ImportsDone::done().wait().await;
        let (tx, imports) = ImportsDone::pending();
        assert!(imports.is_pending());
        let waiter = tokio::spawn({
            let imports = imports.clone();
            async move { imports.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "waits while the pass runs");
        tx.send_replace(true);
        waiter.await.unwrap();
        assert!(!imports.is_pending());
        let (tx, imports) = ImportsDone::pending();
        drop(tx);
        assert!(!imports.is_pending());
        imports.wait().await;
    }

    #[tokio::test]
    async fn a_missing_directory_is_a_finished_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, imports) = ImportsDone::pending();
        // No tarballs: `ctr` is never run.
        import(
            Ctr::new(&dir.path().join("no.sock"), "overlayfs"),
            dir.path().join("images"),
            tx,
            CancellationToken::new(),
        )
        .await;
        assert!(!imports.is_pending());
    }
}
