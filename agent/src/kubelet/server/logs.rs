//! `/containerLogs/{namespace}/{pod}/{container}`: the container's CRI log file (found through
//! the runtime: the newest instance, or the one before it for `previous`), rendered with
//! [`cri_log::LogWriter`], followed while the container runs when `follow` is set.
//!
//! # Guarantees
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
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use super::cri_log::{self, Flow, LogOptions, LogWriter};
use super::{text_error, Kubelet};
use crate::cri::pb;
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
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
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
    let file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) => {
            return text_error(
                StatusCode::BAD_REQUEST,
                format!("failed to open log file {:?}: {e}", path.display()),
            )
        }
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(stream_file(k.clone(), chosen.id, file, opts, tx));
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

async fn running(k: &Kubelet, id: &str) -> bool {
    match k.cri.container_status(id.to_string(), false).await {
        Ok(s) => s
            .status
            .is_some_and(|s| s.state == pb::ContainerState::ContainerRunning as i32),
        Err(_) => false,
    }
}

async fn stream_file(
    k: Arc<Kubelet>,
    id: String,
    mut file: tokio::fs::File,
    opts: LogOptions,
    tx: mpsc::Sender<Vec<u8>>,
) {
    if let Some(n) = opts.tail_lines {
        let mut all = Vec::new();
        if file.read_to_end(&mut all).await.is_err() {
            return;
        }
        let start = cri_log::tail_start(&all, n);
        if file
            .seek(std::io::SeekFrom::Start(start as u64))
            .await
            .is_err()
        {
            return;
        }
    }
    let follow = opts.follow;
    let mut writer = LogWriter::new(opts);
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut idle = 0u32;
    let mut stopping = false;
    loop {
        let n = match file.read(&mut buf).await {
            Ok(n) => n,
            Err(_) => return,
        };
        if n > 0 {
            idle = 0;
            pending.extend_from_slice(&buf[..n]);
            let mut out = Vec::new();
            let mut done = false;
            let mut consumed = 0;
            while let Some(nl) = pending[consumed..].iter().position(|b| *b == b'\n') {
                let line = &pending[consumed..consumed + nl];
                consumed += nl + 1;
                if writer.write(line, &mut out) == Flow::Done {
                    done = true;
                    break;
                }
            }
            pending.drain(..consumed);
            if !out.is_empty() && tx.send(out).await.is_err() {
                return;
            }
            if done {
                return;
            }
            continue;
        }
        if !follow {
            return;
        }
        // At the end: keep waiting while the container runs (checked every ~1 s); once it
        // stopped, one more read catches what it wrote last.
        if stopping {
            return;
        }
        idle += 1;
        if idle.is_multiple_of(5) && !running(&k, &id).await {
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
}
