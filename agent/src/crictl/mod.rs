//! `k3rs crictl`: what k3s users type `crictl` for (`ps`, `pods`, `images`, `inspect`,
//! `inspectp`, `logs`, `rmi`, `version`), built on the agent's own CRI client and talking to
//! the node's runtime socket; the output follows crictl's columns ([`table`]).

pub mod table;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::cri::{pb, ImageService, RuntimeService};
use crate::kubelet::server::{cri_log, tail};

/// A crictl command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Containers (running ones unless `all`).
    Ps { all: bool },
    /// Pod sandboxes.
    Pods,
    /// Images.
    Images,
    /// A container's status as JSON.
    Inspect { id: String },
    /// A pod sandbox's status as JSON.
    Inspectp { id: String },
    /// A container's log (its last `tail` lines).
    Logs { id: String, tail: Option<u64> },
    /// Removes images.
    Rmi { images: Vec<String> },
    /// The runtime's name and version.
    Version,
}

/// Why a crictl command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Cri(#[from] crate::cri::Error),
    #[error("no container or pod sandbox {kind} matches {id:?}")]
    NotFound { kind: &'static str, id: String },
    #[error("{id:?} matches more than one {kind}: {matches}")]
    Ambiguous {
        kind: &'static str,
        id: String,
        matches: String,
    },
    #[error("image {0:?} not found")]
    NoImage(String),
    #[error("reading the log file {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The one id among `ids` that starts with `prefix` (crictl accepts id prefixes).
fn resolve(kind: &'static str, prefix: &str, ids: Vec<String>) -> Result<String, Error> {
    let mut matches: Vec<String> = ids.into_iter().filter(|i| i.starts_with(prefix)).collect();
    match (prefix.is_empty(), matches.len()) {
        (false, 1) => Ok(matches.remove(0)),
        (false, n) if n > 1 => Err(Error::Ambiguous {
            kind,
            id: prefix.into(),
            matches: matches.join(", "),
        }),
        _ => Err(Error::NotFound {
            kind,
            id: prefix.into(),
        }),
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// Runs `cmd` against the runtime; returns what crictl would print.
pub async fn run<R>(cri: &R, cmd: Command) -> Result<String, Error>
where
    R: RuntimeService + ImageService,
{
    match cmd {
        Command::Ps { all } => {
            let filter = (!all).then(|| pb::ContainerFilter {
                state: Some(pb::ContainerStateValue {
                    state: pb::ContainerState::ContainerRunning as i32,
                }),
                ..Default::default()
            });
            let containers = cri.list_containers(filter).await?;
            let pods = cri.list_pod_sandbox(None).await?;
            Ok(table::containers(&containers, &pods, now_ns()))
        }
        Command::Pods => Ok(table::pods(&cri.list_pod_sandbox(None).await?, now_ns())),
        Command::Images => Ok(table::images(&cri.list_images(None).await?)),
        Command::Inspect { id } => {
            let id = container_id(cri, &id).await?;
            let status = cri.container_status(id, true).await?;
            Ok(pretty(&container_json(&status)))
        }
        Command::Inspectp { id } => {
            let ids = cri.list_pod_sandbox(None).await?;
            let id = resolve("pod sandbox", &id, ids.into_iter().map(|p| p.id).collect())?;
            let status = cri.pod_sandbox_status(id, true).await?;
            Ok(pretty(&sandbox_json(&status)))
        }
        Command::Logs { id, tail } => {
            let id = container_id(cri, &id).await?;
            let status = cri.container_status(id, false).await?;
            let path = PathBuf::from(status.status.unwrap_or_default().log_path);
            read_log(&path, tail).map_err(|source| Error::Log { path, source })
        }
        Command::Rmi { images } => {
            let mut out = String::new();
            for image in images {
                let spec = pb::ImageSpec {
                    image: image.clone(),
                    ..Default::default()
                };
                if cri.image_status(spec.clone(), false).await?.is_none() {
                    return Err(Error::NoImage(image));
                }
                cri.remove_image(spec).await?;
                out.push_str(&format!("Deleted: {image}\n"));
            }
            Ok(out)
        }
        Command::Version => {
            let v = cri.version().await?;
            Ok(format!(
                "Version:  {}\nRuntimeName:  {}\nRuntimeVersion:  {}\nRuntimeApiVersion:  {}\n",
                v.version, v.runtime_name, v.runtime_version, v.runtime_api_version
            ))
        }
    }
}

async fn container_id<R: RuntimeService>(cri: &R, prefix: &str) -> Result<String, Error> {
    let all = cri.list_containers(None).await?;
    resolve("container", prefix, all.into_iter().map(|c| c.id).collect())
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// The runtime's verbose `info` map: values that are JSON documents embedded as such.
fn info_json(info: &std::collections::HashMap<String, String>) -> Value {
    let map: Map<String, Value> = info
        .iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            (k.clone(), value)
        })
        .collect();
    Value::Object(map)
}

fn state_name(state: i32) -> &'static str {
    match pb::ContainerState::try_from(state) {
        Ok(pb::ContainerState::ContainerCreated) => "CONTAINER_CREATED",
        Ok(pb::ContainerState::ContainerRunning) => "CONTAINER_RUNNING",
        Ok(pb::ContainerState::ContainerExited) => "CONTAINER_EXITED",
        _ => "CONTAINER_UNKNOWN",
    }
}

/// `crictl inspect`'s document: `status` in the CRI's JSON names, `info` as the runtime gave.
fn container_json(r: &pb::ContainerStatusResponse) -> Value {
    let s = r.status.clone().unwrap_or_default();
    let meta = s.metadata.unwrap_or_default();
    json!({
        "status": {
            "id": s.id,
            "metadata": {"name": meta.name, "attempt": meta.attempt},
            "state": state_name(s.state),
            "createdAt": s.created_at,
            "startedAt": s.started_at,
            "finishedAt": s.finished_at,
            "exitCode": s.exit_code,
            "image": {"image": s.image.map(|i| i.image).unwrap_or_default()},
            "imageRef": s.image_ref,
            "reason": s.reason,
            "message": s.message,
            "labels": s.labels,
            "annotations": s.annotations,
            "logPath": s.log_path,
        },
        "info": info_json(&r.info),
    })
}

/// `crictl inspectp`'s document.
fn sandbox_json(r: &pb::PodSandboxStatusResponse) -> Value {
    let s = r.status.clone().unwrap_or_default();
    let meta = s.metadata.unwrap_or_default();
    let state = match pb::PodSandboxState::try_from(s.state) {
        Ok(pb::PodSandboxState::SandboxReady) => "SANDBOX_READY",
        _ => "SANDBOX_NOTREADY",
    };
    json!({
        "status": {
            "id": s.id,
            "metadata": {"name": meta.name, "uid": meta.uid, "namespace": meta.namespace,
                "attempt": meta.attempt},
            "state": state,
            "createdAt": s.created_at,
            "network": {"ip": s.network.map(|n| n.ip).unwrap_or_default()},
            "labels": s.labels,
            "annotations": s.annotations,
            "runtimeHandler": s.runtime_handler,
        },
        "info": info_json(&r.info),
    })
}

/// The container's log file as crictl prints it: the entries' content, partial entries
/// joined, optionally only the last `tail` file lines.
fn read_log(path: &Path, tail: Option<u64>) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let start = match tail {
        Some(n) => tail::tail_start(&mut file, n)?,
        None => 0,
    };
    file.seek(SeekFrom::Start(start))?;
    let mut raw = Vec::new();
    file.read_to_end(&mut raw)?;
    let mut out = Vec::new();
    for line in raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(entry) = cri_log::parse_line(line) {
            out.extend_from_slice(entry.content);
            if !entry.partial {
                out.push(b'\n');
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resolve_by_unique_prefix() {
        let ids = || vec!["abc123".to_string(), "abd456".to_string()];
        assert_eq!(resolve("container", "abc", ids()).unwrap(), "abc123");
        assert!(matches!(
            resolve("container", "ab", ids()),
            Err(Error::Ambiguous { .. })
        ));
        assert!(matches!(
            resolve("container", "zz", ids()),
            Err(Error::NotFound { .. })
        ));
        assert!(matches!(
            resolve("container", "", ids()),
            Err(Error::NotFound { .. })
        ));
    }

    #[test]
    fn logs_join_partial_entries_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(
            &path,
            "2026-11-29T07:00:00.000000001Z stdout F one\n\
             2026-11-29T07:00:01.000000001Z stderr P tw\n\
             2026-11-29T07:00:01.000000002Z stderr F o\n\
             not a cri line\n\
             2026-11-29T07:00:02.000000001Z stdout F three\n",
        )
        .unwrap();
        assert_eq!(read_log(&path, None).unwrap(), "one\ntwo\nthree\n");
        assert_eq!(read_log(&path, Some(1)).unwrap(), "three\n");
        assert!(read_log(&dir.path().join("missing.log"), None).is_err());
    }

    #[tokio::test]
    async fn commands_run_against_a_runtime() {
        let fake = crate::cri::fake::FakeRuntime::new();
        fake.add_image("docker.io/library/busybox:1.35");
        let images = run(&fake, Command::Images).await.unwrap();
        assert!(images.contains("docker.io/library/busybox"), "{images}");
        let out = run(
            &fake,
            Command::Rmi {
                images: vec!["docker.io/library/busybox:1.35".into()],
            },
        )
        .await
        .unwrap();
        assert_eq!(out, "Deleted: docker.io/library/busybox:1.35\n");
        let e = run(
            &fake,
            Command::Rmi {
                images: vec!["docker.io/library/busybox:1.35".into()],
            },
        )
        .await
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "image \"docker.io/library/busybox:1.35\" not found"
        );
        let ps = run(&fake, Command::Ps { all: true }).await.unwrap();
        assert_eq!(ps.lines().count(), 1, "only the header: {ps}");
        let e = run(&fake, Command::Inspect { id: "nope".into() })
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "no container or pod sandbox container matches \"nope\""
        );
    }
}
