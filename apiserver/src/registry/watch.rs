//! WATCH: JSON lines of `{"type","object"}`. Without a resourceVersion (or "0") the current
//! state is sent first as ADDED events; then store events are translated through the
//! selectors the way kube-apiserver's watch cache does (an object that starts matching is
//! ADDED, one that stops matching is DELETED). Watchers are fed from the resource's watch
//! cache (`cache/`) when it covers their start, else from their own datastore watch. A
//! start that was compacted away yields an ERROR event with a 410 Expired Status.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cache::{CachedEvent, Out, WatcherSpec};
use super::{keys, ListOptions, Registry, Target};
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::{prefix_end, Error as DsError, WatchItem, WatchRequest};

/// How often a watch that asked for bookmarks gets one.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// A watch request's options.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The selectors (the list options' paging fields are not used).
    pub filter: ListOptions,
    /// `resourceVersion`: events after it; `None` or `0` starts with the current objects
    /// (as synthetic ADDED events).
    pub resource_version: Option<String>,
    /// `timeoutSeconds` (30 min when the client sets none).
    pub timeout: Duration,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
}

/// One event for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: &'static str,
    pub object: Value,
}

impl WatchEvent {
    /// The JSON line (with its newline).
    pub fn to_line(&self) -> Bytes {
        let mut s = json!({ "type": self.kind, "object": self.object }).to_string();
        s.push('\n');
        Bytes::from(s)
    }
}

fn expired_event(message: String) -> WatchEvent {
    WatchEvent {
        kind: "ERROR",
        object: ApiError::expired(message).to_status(),
    }
}

fn bookmark_line(kind: &str, api_version: &str, revision: i64) -> Bytes {
    WatchEvent {
        kind: "BOOKMARK",
        object: json!({"kind": kind, "apiVersion": api_version,
            "metadata": {"resourceVersion": revision.to_string()}}),
    }
    .to_line()
}

impl Registry {
    /// Starts a watch; the returned channel yields JSON lines until the timeout, `stop`, a
    /// compaction or the client going away.
    pub async fn watch(
        self: Arc<Self>,
        t: Target,
        opts: WatchOptions,
        stop: CancellationToken,
    ) -> ApiResult<mpsc::Receiver<Bytes>> {
        let r = t.resource;
        let (key, range_end) = match t.name.as_deref() {
            Some(_) => (t.key(), Vec::new()),
            None => {
                let p = keys::list_prefix(r, t.namespace.as_deref());
                let e = prefix_end(&p);
                (p, e)
            }
        };
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let mut initial = Vec::new();
        let start =
            match rv {
                None | Some("0") => {
                    let mut list_target = t.clone();
                    list_target.name = None;
                    let listed = self
                        .list(
                            &list_target,
                            ListOptions {
                                limit: 0,
                                continue_token: None,
                                resource_version: None,
                                ..opts.filter.clone()
                            },
                        )
                        .await?;
                    for item in listed["items"].as_array().into_iter().flatten() {
                        if t.name
                            .as_deref()
                            .is_none_or(|n| k3rs_apimachinery::meta::name(item) == n)
                        {
                            initial.push(
                                WatchEvent {
                                    kind: "ADDED",
                                    object: item.clone(),
                                }
                                .to_line(),
                            );
                        }
                    }
                    listed["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|s| s.parse::<i64>().ok())
                        .unwrap_or(0)
                }
                Some(v) => v.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ApiError::bad_request(format!("invalid resource version {v:?}"))
                })?,
            };
        let spec = WatcherSpec {
            key: key.clone(),
            range_end: range_end.clone(),
            filter: opts.filter.clone(),
            after: start,
            bookmarks: opts.bookmarks,
        };
        let (tx, rx) = mpsc::channel::<Bytes>(64);
        let (kind, api_version) = (r.kind, r.group_version());
        if let Some(events) = self
            .watch_caches
            .subscribe(&self.ds, r, spec, &stop)
            .await?
        {
            tokio::spawn(serve_from_cache(
                initial,
                events,
                tx,
                opts.timeout,
                stop,
                (kind, api_version),
            ));
            return Ok(rx);
        }
        let stream = self
            .ds
            .watch(WatchRequest {
                key,
                range_end,
                start_revision: start + 1,
                prev_kv: true,
                progress_notify: opts.bookmarks,
            })
            .await;
        let stream = match stream {
            Ok(s) => s,
            Err(DsError::Compacted { compact_revision }) => {
                let ev = expired_event(format!(
                    "too old resource version: {start} ({compact_revision})"
                ));
                let _ = tx.try_send(ev.to_line());
                return Ok(rx);
            }
            Err(e) => return Err(e.into()),
        };
        tokio::spawn(serve_from_store(
            r,
            initial,
            stream,
            start,
            opts,
            tx,
            stop,
            (kind, api_version),
        ));
        Ok(rx)
    }
}

/// Sends `line`; false when the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, line: Bytes) -> bool {
    tx.send(line).await.is_ok()
}

/// A watcher fed by the watch cache.
async fn serve_from_cache(
    initial: Vec<Bytes>,
    mut events: mpsc::Receiver<Out>,
    tx: mpsc::Sender<Bytes>,
    timeout: Duration,
    stop: CancellationToken,
    (kind, api_version): (&'static str, String),
) {
    for line in initial {
        if !send(&tx, line).await {
            return;
        }
    }
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        let out = tokio::select! {
            _ = &mut deadline => return,
            _ = stop.cancelled() => return,
            _ = tx.closed() => return,
            out = events.recv() => out,
        };
        let line = match out {
            Some(Out::Event { kind, event }) => event.line(kind),
            Some(Out::Bookmark { revision }) => bookmark_line(kind, &api_version, revision),
            Some(Out::Error(status)) => {
                let ev = WatchEvent {
                    kind: "ERROR",
                    object: status,
                };
                let _ = send(&tx, ev.to_line()).await;
                return;
            }
            // Dropped by the cache for falling behind: the client watches again.
            None => return,
        };
        if !send(&tx, line).await {
            return;
        }
    }
}

/// A watcher with its own datastore watch (its start is older than the cache's window).
async fn serve_from_store(
    r: &'static Resource,
    initial: Vec<Bytes>,
    mut stream: futures::stream::BoxStream<'static, WatchItem>,
    start: i64,
    opts: WatchOptions,
    tx: mpsc::Sender<Bytes>,
    stop: CancellationToken,
    (kind, api_version): (&'static str, String),
) {
    for line in initial {
        if !send(&tx, line).await {
            return;
        }
    }
    let mut last = start;
    let deadline = tokio::time::sleep(opts.timeout);
    tokio::pin!(deadline);
    let mut bookmarks = tokio::time::interval(BOOKMARK_INTERVAL);
    bookmarks.tick().await;
    loop {
        let item = tokio::select! {
            _ = &mut deadline => return,
            _ = stop.cancelled() => return,
            _ = tx.closed() => return,
            _ = bookmarks.tick(), if opts.bookmarks => {
                if !send(&tx, bookmark_line(kind, &api_version, last)).await {
                    return;
                }
                continue;
            }
            item = stream.next() => item,
        };
        match item {
            Some(WatchItem::Events(events)) => {
                for ev in &events {
                    last = last.max(ev.revision());
                    let line = match CachedEvent::decode(r, ev) {
                        Ok(Some(c)) => match c.kind_for(&opts.filter) {
                            Some(k) => c.line(k),
                            None => continue,
                        },
                        Ok(None) => continue,
                        Err(e) => {
                            let ev = WatchEvent {
                                kind: "ERROR",
                                object: e.to_status(),
                            };
                            let _ = send(&tx, ev.to_line()).await;
                            return;
                        }
                    };
                    if !send(&tx, line).await {
                        return;
                    }
                }
            }
            Some(WatchItem::Progress { revision }) => last = last.max(revision),
            Some(WatchItem::Compacted { compact_revision }) => {
                let ev = expired_event(format!(
                    "too old resource version: {last} ({compact_revision})"
                ));
                let _ = send(&tx, ev.to_line()).await;
                return;
            }
            Some(WatchItem::Failed(why)) => {
                let ev = WatchEvent {
                    kind: "ERROR",
                    object: ApiError::internal(why).to_status(),
                };
                let _ = send(&tx, ev.to_line()).await;
                return;
            }
            None => return,
        }
    }
}
