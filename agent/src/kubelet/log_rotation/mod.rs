//! Container log rotation (upstream's kubelet container log manager): every
//! [`MONITOR_INTERVAL`], each running container whose log file reached the policy's
//! `max_size` (`--kubelet-arg container-log-max-size`, 10Mi) has it renamed to
//! `<log>.<timestamp>` and the runtime told to reopen it (CRI `ReopenContainerLog`); older
//! rotated files are gzipped and the oldest removed so that at most `max_files`
//! (`container-log-max-files`, 5) files of the container's log remain. [`plan`] decides,
//! without I/O; this module executes.
//!
//! # Guarantees
//! - Only running containers are rotated (a stopped one writes nothing more).
//! - If the runtime does not reopen the log, the rotated file is renamed back, so no output
//!   is lost and the next round tries again.
//! - A running container whose log file is missing (a reopen that failed before) is asked to
//!   reopen it.
//! - One container's failure is logged and does not stop the others' rotation; a failed
//!   round is logged and the loop goes on.

pub mod files;
pub mod plan;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::cri::{self, pb, RuntimeService};
use crate::report::error_chain;
pub use plan::{LogRotatePolicy, Step};

/// How often the logs are looked at (upstream's `containerLogMonitorInterval` default).
pub const MONITOR_INTERVAL: Duration = Duration::from_secs(10);

/// Why a rotation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the running containers")]
    ListContainers(#[source] cri::Error),
    #[error("reading the status of container {id}")]
    ContainerStatus {
        id: String,
        #[source]
        source: cri::Error,
    },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("removing {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("compressing {path}")]
    Compress {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("renaming {from} to {to}")]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("asking the runtime to reopen the log of container {id}")]
    Reopen {
        id: String,
        #[source]
        source: cri::Error,
    },
    #[error("a blocking file task failed: {0}")]
    Blocking(String),
}

/// Rotates the running containers' logs every [`MONITOR_INTERVAL`] until `stop`.
pub async fn run(cri: Arc<dyn RuntimeService>, policy: LogRotatePolicy, stop: CancellationToken) {
    let mut tick = tokio::time::interval(MONITOR_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = rotate_all(&*cri, policy, Timestamp::now()).await {
            tracing::warn!("container log rotation: {}", error_chain(&e));
        }
    }
}

/// One round: every running container's log, rotated if it must be; the ids of those
/// rotated.
pub async fn rotate_all(
    cri: &dyn RuntimeService,
    policy: LogRotatePolicy,
    now: Timestamp,
) -> Result<Vec<String>, Error> {
    let filter = pb::ContainerFilter {
        state: Some(pb::ContainerStateValue {
            state: pb::ContainerState::ContainerRunning as i32,
        }),
        ..pb::ContainerFilter::default()
    };
    let running = cri
        .list_containers(Some(filter))
        .await
        .map_err(Error::ListContainers)?;
    let mut rotated = Vec::new();
    for c in running {
        match rotate_container(cri, &c.id, policy, now).await {
            Ok(true) => rotated.push(c.id),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(container = %c.id, "container log rotation: {}", error_chain(&e))
            }
        }
    }
    Ok(rotated)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Blocking(e.to_string()))?
}

fn rename(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::rename(from, to).map_err(|source| Error::Rename {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        source,
    })
}

/// The size of `path`, or `None` if it does not exist.
fn size_of(path: &Path) -> Result<Option<u64>, Error> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The file names in `dir`.
fn names_in(dir: &Path) -> Result<Vec<String>, Error> {
    let read = |source| Error::Read {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::read_dir(dir)
        .map_err(read)?
        .map(|e| Ok(e.map_err(read)?.file_name().to_string_lossy().into_owned()))
        .collect()
}

/// Rotates container `id`'s log if it reached `policy.max_size`; whether it did.
pub async fn rotate_container(
    cri: &dyn RuntimeService,
    id: &str,
    policy: LogRotatePolicy,
    now: Timestamp,
) -> Result<bool, Error> {
    let reopen = |id: &str| {
        let id = id.to_string();
        async move {
            cri.reopen_container_log(id.clone())
                .await
                .map_err(|source| Error::Reopen { id, source })
        }
    };
    let status = cri
        .container_status(id.to_string(), false)
        .await
        .map_err(|source| Error::ContainerStatus {
            id: id.to_string(),
            source,
        })?
        .status
        .unwrap_or_default();
    let path = PathBuf::from(&status.log_path);
    let (Some(dir), Some(log)) = (
        path.parent().map(Path::to_path_buf),
        path.file_name().map(|n| n.to_string_lossy().into_owned()),
    ) else {
        return Ok(false);
    };
    let size = match blocking({
        let path = path.clone();
        move || size_of(&path)
    })
    .await?
    {
        Some(size) => size,
        None => {
            reopen(id).await?;
            return Ok(false);
        }
    };
    let names = blocking({
        let dir = dir.clone();
        move || names_in(&dir)
    })
    .await?;
    let steps = plan::plan(&log, size, &names, policy, now);
    for step in steps {
        match step {
            Step::Remove(name) => {
                let dir = dir.clone();
                blocking(move || files::remove(&dir, &name)).await?
            }
            Step::Compress(name) => {
                let dir = dir.clone();
                blocking(move || files::compress(&dir, &name)).await?
            }
            Step::Rotate { from, to } => {
                let (from, to) = (dir.join(from), dir.join(to));
                rename(&from, &to)?;
                if let Err(e) = reopen(id).await {
                    // Put it back: the runtime still writes to it; the next round retries.
                    if let Err(back) = rename(&to, &from) {
                        tracing::error!(container = %id, "{}", error_chain(&back));
                    }
                    return Err(e);
                }
                tracing::debug!(container = %id, rotated = %to.display(), "container log rotated");
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::{Call, FakeRuntime};

    fn sandbox(log_directory: &Path) -> pb::PodSandboxConfig {
        pb::PodSandboxConfig {
            metadata: Some(pb::PodSandboxMetadata {
                name: "web".into(),
                uid: "u1".into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            log_directory: log_directory.to_string_lossy().into_owned(),
            ..Default::default()
        }
    }

    /// A running container logging to `<dir>/app/0.log`; its id.
    async fn running(rt: &FakeRuntime, dir: &Path) -> String {
        rt.add_image("busybox");
        let sb = rt
            .run_pod_sandbox(sandbox(dir), String::new())
            .await
            .unwrap();
        let config = pb::ContainerConfig {
            metadata: Some(pb::ContainerMetadata {
                name: "app".into(),
                attempt: 0,
            }),
            image: Some(pb::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            log_path: "app/0.log".into(),
            ..Default::default()
        };
        let id = rt.create_container(sb, config, sandbox(dir)).await.unwrap();
        rt.start_container(id.clone()).await.unwrap();
        std::fs::create_dir_all(dir.join("app")).unwrap();
        std::fs::write(dir.join("app/0.log"), "").unwrap();
        id
    }

    fn append(path: &Path, bytes: usize) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(&vec![b'x'; bytes]).unwrap();
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut n = names_in(dir).unwrap();
        n.sort();
        n
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const POLICY: LogRotatePolicy = LogRotatePolicy {
        max_size: 100,
        max_files: 3,
    };

    #[tokio::test]
    async fn rounds_rotate_compress_and_prune_and_the_runtime_reopens() {
        let tmp = tempfile::tempdir().unwrap();
        let rt = FakeRuntime::new();
        let id = running(&rt, tmp.path()).await;
        let dir = tmp.path().join("app");
        let log = dir.join("0.log");

        append(&log, 99);
        assert!(rotate_all(&rt, POLICY, at("2026-11-29T04:30:00Z"))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(listing(&dir), vec!["0.log"]);

        append(&log, 1);
        rt.clear_calls();
        let rotated = rotate_all(&rt, POLICY, at("2026-11-29T04:30:10Z"))
            .await
            .unwrap();
        assert_eq!(rotated, vec![id.clone()]);
        assert_eq!(
            rt.calls(),
            vec![
                Call::ListContainers,
                Call::ContainerStatus(id.clone()),
                Call::ReopenContainerLog(id.clone()),
            ]
        );
        assert_eq!(listing(&dir), vec!["0.log", "0.log.20261129-043010"]);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0, "reopened anew");

        append(&log, 150);
        rotate_all(&rt, POLICY, at("2026-11-29T04:30:20Z"))
            .await
            .unwrap();
        assert_eq!(
            listing(&dir),
            vec!["0.log", "0.log.20261129-043010.gz", "0.log.20261129-043020"]
        );

        append(&log, 150);
        rotate_all(&rt, POLICY, at("2026-11-29T04:30:30Z"))
            .await
            .unwrap();
        assert_eq!(
            listing(&dir),
            vec!["0.log", "0.log.20261129-043020.gz", "0.log.20261129-043030"]
        );
        assert_eq!(
            std::fs::metadata(dir.join("0.log.20261129-043030"))
                .unwrap()
                .len(),
            150
        );
    }

    #[tokio::test]
    async fn a_failed_reopen_puts_the_log_back() {
        let tmp = tempfile::tempdir().unwrap();
        let rt = FakeRuntime::new();
        let id = running(&rt, tmp.path()).await;
        let dir = tmp.path().join("app");
        append(&dir.join("0.log"), 200);
        rt.fail_next("ReopenContainerLog", tonic::Status::unavailable("busy"));
        let err = rotate_container(&rt, &id, POLICY, at("2026-11-29T04:30:10Z"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Reopen { .. }), "{err}");
        assert_eq!(listing(&dir), vec!["0.log"]);
        assert_eq!(std::fs::metadata(dir.join("0.log")).unwrap().len(), 200);
    }

    #[tokio::test]
    async fn a_missing_log_is_reopened_and_stopped_containers_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let rt = FakeRuntime::new();
        let id = running(&rt, tmp.path()).await;
        let dir = tmp.path().join("app");
        std::fs::remove_file(dir.join("0.log")).unwrap();
        assert!(
            !rotate_container(&rt, &id, POLICY, at("2026-11-29T04:30:10Z"))
                .await
                .unwrap()
        );
        assert_eq!(listing(&dir), vec!["0.log"]);

        append(&dir.join("0.log"), 200);
        rt.exit_container(&id, 0);
        rt.clear_calls();
        assert!(rotate_all(&rt, POLICY, at("2026-11-29T04:30:20Z"))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(rt.calls(), vec![Call::ListContainers]);
        assert_eq!(listing(&dir), vec!["0.log"]);
    }
}
