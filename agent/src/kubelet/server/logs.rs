//! `/containerLogs/{namespace}/{pod}/{container}`: the container's CRI log file (found through
//! the runtime: the newest instance, or the one before it for `previous`), rendered with
//! [`cri_log::LogWriter`], followed while the container runs when `follow` is set.
//!
//! # Guarantees
//! - `tailLines` starts at the file's last lines found by reading it backwards
//!   ([`tail::tail_start`]): the cost is the size of those lines, not of the file. Then
//!   `sinceTime`/`sinceSeconds`, `timestamps` and `limitBytes` apply to what follows, as
//!   upstream does.
//! - Only the live file is read (as upstream): rotated files (`<log>.<time>`, `.gz`) are not.
//! - A follow stream survives log rotation: once the log path names a new file, the old one
//!   is read to its end and the new one from its start.
//! - A follow stream ends when the container is no longer running and its file is read to
//!   the end, when `limitBytes` is reached, or when the client goes away.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::io::{Seek, SeekFrom};
use tokio::fs::File;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::cri_log::{self, Flow, LineBuffer, LogOptions, LogWriter};
use super::{tail, text_error, Kubelet};
use crate::cri::{pb, RuntimeService};
use crate::kubelet::plan::labels;

/// How often a followed file is looked at again.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Orders a container's instances newest first (attempt, then creation) and picks the
/// current one or, for `previous`, the one before it.
pub fn choose(mut instances: Vec<pb::Container>, previous: bool) -> Option<pb::Container> {
    instances.sort_by_key(|c| {
        std::cmp::Reverse((c.metadata.as_ref().map_or(0, |m| m.attempt), c.created_at))
    });
    instances.into_iter().nth(usize::from(previous))
}

/// The runtime's containers of pod `namespace/pod`.
pub async fn pod_containers(
    k: &Kubelet,
    namespace: &str,
    pod: &str,
) -> Result<Vec<pb::Container>, Response> {
    let filter = pb::ContainerFilter {
        label_selector: HashMap::from([
            (labels::POD_NAMESPACE.to_string(), namespace.to_string()),
            (labels::POD_NAME.to_string(), pod.to_string()),
        ]),
        ..pb::ContainerFilter::default()
    };
    k.cri
        .list_containers(Some(filter))
        .await
        .map_err(|e| text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The instances of container `name` among `all`.
pub fn named(all: &[pb::Container], name: &str) -> Vec<pb::Container> {
    all.iter()
        .filter(|c| c.labels.get(labels::CONTAINER_NAME).map(String::as_str) == Some(name))
        .cloned()
        .collect()
}

pub async fn container_logs(
    State(k): State<Arc<Kubelet>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect();
    let opts = match cri_log::parse_options(&pairs, k8s_openapi::jiff::Timestamp::now()) {
        Ok(o) => o,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let all = match pod_containers(&k, &namespace, &pod).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    if all.is_empty() {
        return text_error(
            StatusCode::NOT_FOUND,
            format!("pod \"{namespace}/{pod}\" does not exist"),
        );
    }
    let Some(chosen) = choose(named(&all, &container), opts.previous) else {
        let msg = if opts.previous {
            format!("previous terminated container \"{container}\" in pod \"{pod}\" not found")
        } else {
            format!("container \"{container}\" in pod \"{pod}\" is not available")
        };
        return text_error(StatusCode::BAD_REQUEST, msg);
    };
    let status = match k.cri.container_status(chosen.id.clone(), false).await {
        Ok(s) => s.status.unwrap_or_default(),
        Err(e) => return text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let path = PathBuf::from(&status.log_path);
    let (file, len) = match open_at_tail(path.clone(), opts.tail_lines).await {
        Ok(f) => f,
        Err(e) => {
            return text_error(
                StatusCode::BAD_REQUEST,
                format!("failed to open log file {:?}: {e}", path.display()),
            )
        }
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(stream_file(
        k.cri.clone(),
        chosen.id,
        path,
        (file, len),
        opts,
        tx,
    ));
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(body),
    )
        .into_response()
}

/// Opens `path` positioned at the start of its last `tail_lines` lines (read backwards, see
/// [`tail`]), or at its start; also returns how many bytes the file then held from there, so
/// a read that does not follow shows the file as it was (`tailLines=1` of a busy log is one
/// line, not one plus whatever the container wrote while it was read).
async fn open_at_tail(path: PathBuf, tail_lines: Option<u64>) -> std::io::Result<(File, u64)> {
    let (file, len) = tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::open(&path)?;
        let end = f.seek(SeekFrom::End(0))?;
        let start = match tail_lines {
            Some(n) => tail::tail_start(&mut f, n)?,
            None => 0,
        };
        f.seek(SeekFrom::Start(start))?;
        Ok::<_, std::io::Error>((f, end.saturating_sub(start)))
    })
    .await
    .map_err(std::io::Error::other)??;
    Ok((File::from_std(file), len))
}

async fn running(cri: &dyn RuntimeService, id: &str) -> bool {
    match cri.container_status(id.to_string(), false).await {
        Ok(s) => s
            .status
            .is_some_and(|s| s.state == pb::ContainerState::ContainerRunning as i32),
        Err(_) => false,
    }
}

/// Whether `path` now names another file than `open` (log rotation renamed it and the runtime
/// created a new one).
async fn replaced(open: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (open.metadata().await, tokio::fs::metadata(path).await) else {
        return false;
    };
    (a.dev(), a.ino()) != (b.dev(), b.ino())
}

/// Writes the unfinished last line, if any; false if the client went away.
async fn flush_rest(
    lines: &mut LineBuffer,
    writer: &mut LogWriter,
    tx: &mpsc::Sender<Vec<u8>>,
) -> bool {
    let rest = lines.take_rest();
    let mut out = Vec::new();
    if !rest.is_empty() {
        writer.write(&rest, &mut out);
    }
    out.is_empty() || tx.send(out).await.is_ok()
}

async fn stream_file(
    cri: Arc<dyn RuntimeService>,
    id: String,
    path: PathBuf,
    (mut file, len): (File, u64),
    opts: LogOptions,
    tx: mpsc::Sender<Vec<u8>>,
) {
    let follow = opts.follow;
    // Without follow, only what the file held when it was opened.
    let mut left = (!follow).then_some(len);
    let mut writer = LogWriter::new(opts);
    let mut lines = LineBuffer::default();
    let mut buf = vec![0u8; 32 * 1024];
    let mut idle = 0u32;
    let mut stopping = false;
    // A rotated file's successor was seen: the old one is read once more, then left.
    let mut successor = false;
    loop {
        let cap = left.map_or(buf.len(), |l| {
            buf.len().min(usize::try_from(l).unwrap_or(usize::MAX))
        });
        let n = match file.read(&mut buf[..cap]).await {
            Ok(n) => n,
            Err(_) => return,
        };
        if let Some(l) = left.as_mut() {
            *l -= n as u64;
        }
        if n > 0 {
            idle = 0;
            let mut out = Vec::new();
            let flow = lines.push(&buf[..n], |l| writer.write(l, &mut out));
            let gone = !out.is_empty() && tx.send(out).await.is_err();
            if gone || flow == Flow::Done {
                return;
            }
            continue;
        }
        // At the end: what is left is an unfinished last line, shown when the stream ends or
        // moves on to a rotated file's successor.
        if !follow {
            flush_rest(&mut lines, &mut writer, &tx).await;
            return;
        }
        if successor || (stopping && replaced(&file, &path).await) {
            successor = false;
            let Ok(next) = File::open(&path).await else {
                return;
            };
            if !flush_rest(&mut lines, &mut writer, &tx).await {
                return;
            }
            file = next;
            continue;
        }
        if stopping {
            flush_rest(&mut lines, &mut writer, &tx).await;
            return;
        }
        successor = replaced(&file, &path).await;
        // Keep waiting while the container runs (checked every ~1 s); once it stopped, one
        // more read catches what it wrote last.
        idle += 1;
        if !successor && idle.is_multiple_of(5) && !running(&*cri, &id).await {
            stopping = true;
            continue;
        }
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(FOLLOW_POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeRuntime;

    fn c(id: &str, name: &str, attempt: u32, created: i64) -> pb::Container {
        pb::Container {
            id: id.into(),
            metadata: Some(pb::ContainerMetadata {
                name: name.into(),
                attempt,
            }),
            created_at: created,
            labels: HashMap::from([(labels::CONTAINER_NAME.to_string(), name.to_string())]),
            ..pb::Container::default()
        }
    }

    #[test]
    fn the_newest_instance_is_current_and_the_one_before_is_previous() {
        let all = vec![
            c("a0", "a", 0, 5),
            c("a2", "a", 2, 1),
            c("a1", "a", 1, 9),
            c("b0", "b", 0, 1),
        ];
        let a = named(&all, "a");
        assert_eq!(a.len(), 3);
        assert_eq!(choose(a.clone(), false).unwrap().id, "a2");
        assert_eq!(choose(a, true).unwrap().id, "a1");
        let b = named(&all, "b");
        assert_eq!(choose(b.clone(), false).unwrap().id, "b0");
        assert_eq!(choose(b, true), None);
        assert!(named(&all, "z").is_empty());
    }

    async fn running_container(rt: &FakeRuntime) -> String {
        rt.add_image("busybox");
        let sb = rt
            .run_pod_sandbox(pb::PodSandboxConfig::default(), String::new())
            .await
            .unwrap();
        let config = pb::ContainerConfig {
            image: Some(pb::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = rt
            .create_container(sb, config, pb::PodSandboxConfig::default())
            .await
            .unwrap();
        rt.start_container(id.clone()).await.unwrap();
        id
    }

    fn entry(second: u32, text: &str) -> String {
        format!("2026-11-29T04:30:{second:02}Z stdout F {text}\n")
    }

    fn append(path: &std::path::Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// Streams `path` with the query `pairs`; the receiving end.
    async fn stream(
        rt: Arc<FakeRuntime>,
        id: &str,
        path: &std::path::Path,
        pairs: &[(&str, &str)],
    ) -> mpsc::Receiver<Vec<u8>> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let opts = cri_log::parse_options(&pairs, "2026-11-29T04:31:00Z".parse().unwrap()).unwrap();
        let opened = open_at_tail(path.to_path_buf(), opts.tail_lines)
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(stream_file(
            rt,
            id.to_string(),
            path.to_path_buf(),
            opened,
            opts,
            tx,
        ));
        rx
    }

    async fn all(mut rx: mpsc::Receiver<Vec<u8>>) -> String {
        let mut out = Vec::new();
        while let Some(b) = rx.recv().await {
            out.extend(b);
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn tail_combines_with_since_timestamps_and_limit_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("0.log");
        let text: String = (1..=5).map(|i| entry(i, &format!("line-{i}"))).collect();
        std::fs::write(&path, &text).unwrap();
        let rt = Arc::new(FakeRuntime::new());
        let logs = |pairs: &'static [(&'static str, &'static str)]| {
            let (rt, path) = (rt.clone(), path.clone());
            async move { all(stream(rt, "c", &path, pairs).await).await }
        };
        assert_eq!(logs(&[("tailLines", "2")]).await, "line-4\nline-5\n");
        assert_eq!(logs(&[("tailLines", "0")]).await, "");
        assert_eq!(
            logs(&[("tailLines", "9")]).await,
            "line-1\nline-2\nline-3\nline-4\nline-5\n"
        );
        assert_eq!(
            logs(&[("tailLines", "3"), ("sinceTime", "2026-11-29T04:30:04Z")]).await,
            "line-4\nline-5\n"
        );
        assert_eq!(
            logs(&[("tailLines", "1"), ("timestamps", "true")]).await,
            "2026-11-29T04:30:05Z line-5\n"
        );
        assert_eq!(
            logs(&[("tailLines", "2"), ("limitBytes", "9")]).await,
            "line-4\nli"
        );
        // A last line still being written is shown when not following.
        append(&path, "2026-11-29T04:30:06Z stdout P unfinished");
        assert_eq!(logs(&[("tailLines", "1")]).await, "unfinished");
        assert!(rt.calls().is_empty(), "no runtime call without follow");
    }

    #[tokio::test]
    async fn without_follow_lines_written_after_the_open_are_not_shown() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("0.log");
        let text: String = (1..=3).map(|i| entry(i, &format!("line-{i}"))).collect();
        std::fs::write(&path, &text).unwrap();
        let opts = cri_log::parse_options(
            &[("tailLines".to_string(), "1".to_string())],
            "2026-11-29T04:31:00Z".parse().unwrap(),
        )
        .unwrap();
        let opened = open_at_tail(path.clone(), opts.tail_lines).await.unwrap();
        // The container writes on between the tail and the read.
        append(&path, &entry(4, "line-4"));
        let (tx, rx) = mpsc::channel(16);
        let rt = Arc::new(FakeRuntime::new());
        tokio::spawn(stream_file(rt, "c".into(), path, opened, opts, tx));
        assert_eq!(all(rx).await, "line-3\n");
    }

    #[tokio::test]
    async fn a_follow_stream_goes_on_in_the_file_that_replaces_a_rotated_one() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("0.log");
        std::fs::write(&path, entry(1, "one") + &entry(2, "two")).unwrap();
        let rt = Arc::new(FakeRuntime::new());
        let id = running_container(&rt).await;
        let mut rx = stream(
            rt.clone(),
            &id,
            &path,
            &[("follow", "true"), ("tailLines", "1")],
        )
        .await;
        assert_eq!(rx.recv().await.unwrap(), b"two\n");
        append(&path, &entry(3, "three"));
        assert_eq!(rx.recv().await.unwrap(), b"three\n");
        // Rotation: renamed, a last write to the old file, then a new file.
        std::fs::rename(&path, tmp.path().join("0.log.20261129-043003")).unwrap();
        append(&tmp.path().join("0.log.20261129-043003"), &entry(4, "four"));
        append(&path, &entry(5, "five"));
        append(&path, &entry(6, "six"));
        rt.exit_container(&id, 0);
        let rest = tokio::time::timeout(Duration::from_secs(10), all(rx))
            .await
            .expect("the stream ends once the container stopped");
        assert_eq!(rest, "four\nfive\nsix\n");
    }
}
