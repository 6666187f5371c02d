//! WATCH: JSON lines of `{"type","object"}`. Without a resourceVersion (or "0") the current
//! state is sent first as ADDED events; then store events are translated through the
//! selectors the way kube-apiserver's watch cache does (an object that starts matching is
//! ADDED, one that stops matching is DELETED). A start that was compacted away yields an
//! ERROR event with a 410 Expired Status.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{decode_as, keys, ListOptions, Registry, Target};
use crate::apiserver::resources::catalog::Resource;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::datastore::{prefix_end, Error as DsError, Event, KeyValue, WatchItem, WatchRequest};

/// How often a watch that asked for bookmarks gets one.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// A watch request's options.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub filter: ListOptions,
    pub resource_version: Option<String>,
    pub timeout: Duration,
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

/// Translates one store event for a watcher with `filter` (None = skip it).
pub fn translate(r: &Resource, ev: &Event, filter: &ListOptions) -> ApiResult<Option<WatchEvent>> {
    let decode = |kv: &KeyValue| decode_as(r, kv);
    let decode_at = |kv: &KeyValue, rev: i64| -> ApiResult<Value> {
        let mut obj = decode(kv)?;
        super::meta::set_resource_version(&mut obj, rev);
        Ok(obj)
    };
    Ok(match ev {
        Event::Put { kv, prev } => {
            let cur = decode(kv)?;
            let now = filter.matches(&cur);
            let before = match prev {
                Some(p) => Some(filter.matches(&decode(p)?)),
                None if kv.version > 1 => Some(now),
                None => None,
            };
            match (before, now) {
                (Some(true), true) => Some(WatchEvent {
                    kind: "MODIFIED",
                    object: cur,
                }),
                (None | Some(false), true) => Some(WatchEvent {
                    kind: "ADDED",
                    object: cur,
                }),
                (Some(true), false) => Some(WatchEvent {
                    kind: "DELETED",
                    object: cur,
                }),
                (_, false) => None,
            }
        }
        Event::Delete {
            prev: Some(p),
            revision,
            ..
        } => {
            let obj = decode_at(p, *revision)?;
            filter.matches(&obj).then_some(WatchEvent {
                kind: "DELETED",
                object: obj,
            })
        }
        // Without the previous version there is nothing to show (never asked that way).
        Event::Delete { prev: None, .. } => None,
    })
}

fn expired_event(message: String) -> WatchEvent {
    WatchEvent {
        kind: "ERROR",
        object: ApiError::expired(message).to_status(),
    }
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
                            .is_none_or(|n| super::meta::name(item) == n)
                        {
                            initial.push(WatchEvent {
                                kind: "ADDED",
                                object: item.clone(),
                            });
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
        let (tx, rx) = mpsc::channel::<Bytes>(64);
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
        let mut stream = match stream {
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
        let (kind, api_version) = (r.kind, r.group_version());
        tokio::spawn(async move {
            for ev in initial {
                if tx.send(ev.to_line()).await.is_err() {
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
                        let ev = WatchEvent {
                            kind: "BOOKMARK",
                            object: json!({"kind": kind, "apiVersion": api_version,
                                "metadata": {"resourceVersion": last.to_string()}}),
                        };
                        if tx.send(ev.to_line()).await.is_err() { return; }
                        continue;
                    }
                    item = stream.next() => item,
                };
                match item {
                    Some(WatchItem::Events(events)) => {
                        for ev in &events {
                            last = last.max(ev.revision());
                            match translate(r, ev, &opts.filter) {
                                Ok(Some(out)) => {
                                    if tx.send(out.to_line()).await.is_err() {
                                        return;
                                    }
                                }
                                Ok(None) => {}
                                Err(e) => {
                                    let ev = WatchEvent {
                                        kind: "ERROR",
                                        object: e.to_status(),
                                    };
                                    let _ = tx.send(ev.to_line()).await;
                                    return;
                                }
                            }
                        }
                    }
                    Some(WatchItem::Progress { revision }) => last = last.max(revision),
                    Some(WatchItem::Compacted { compact_revision }) => {
                        let ev = expired_event(format!(
                            "too old resource version: {last} ({compact_revision})"
                        ));
                        let _ = tx.send(ev.to_line()).await;
                        return;
                    }
                    Some(WatchItem::Failed(why)) => {
                        let ev = WatchEvent {
                            kind: "ERROR",
                            object: ApiError::internal(why).to_status(),
                        };
                        let _ = tx.send(ev.to_line()).await;
                        return;
                    }
                    None => return,
                }
            }
        });
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::encode;
    use crate::apiserver::registry::selector::LabelSelector;

    fn kv(labels: Value, rev: i64, version: i64) -> KeyValue {
        let obj = json!({"metadata": {"name": "x", "labels": labels}});
        KeyValue {
            key: b"/registry/configmaps/default/x".to_vec(),
            mod_revision: rev,
            version,
            value: encode(&obj).unwrap(),
            ..Default::default()
        }
    }

    fn cms() -> &'static Resource {
        crate::apiserver::resources::catalog::lookup("", "v1", "configmaps").unwrap()
    }

    fn filter(sel: &str) -> ListOptions {
        ListOptions {
            labels: LabelSelector::parse(sel).unwrap(),
            ..Default::default()
        }
    }

    fn kind(ev: &Event, sel: &str) -> Option<&'static str> {
        translate(cms(), ev, &filter(sel)).unwrap().map(|e| e.kind)
    }

    #[test]
    fn selector_transitions_like_the_watch_cache() {
        let a = json!({"app": "a"});
        let b = json!({"app": "b"});
        let created = Event::Put {
            kv: kv(a.clone(), 2, 1),
            prev: None,
        };
        assert_eq!(kind(&created, ""), Some("ADDED"));
        assert_eq!(kind(&created, "app=b"), None);
        let relabeled = Event::Put {
            kv: kv(b.clone(), 3, 2),
            prev: Some(kv(a.clone(), 2, 1)),
        };
        assert_eq!(kind(&relabeled, ""), Some("MODIFIED"));
        assert_eq!(kind(&relabeled, "app=a"), Some("DELETED"));
        assert_eq!(kind(&relabeled, "app=b"), Some("ADDED"));
        let deleted = Event::Delete {
            key: b"k".to_vec(),
            revision: 4,
            prev: Some(kv(b, 3, 2)),
        };
        let out = translate(cms(), &deleted, &filter("app=b"))
            .unwrap()
            .unwrap();
        assert_eq!(out.kind, "DELETED");
        assert_eq!(out.object["metadata"]["resourceVersion"], "4");
        assert_eq!(kind(&deleted, "app=a"), None);
        let line = out.to_line();
        assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'));
    }

    #[test]
    fn events_api_watchers_see_converted_events() {
        let r =
            crate::apiserver::resources::catalog::lookup("events.k8s.io", "v1", "events").unwrap();
        let obj = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "message": "m", "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"});
        let ev = Event::Put {
            kv: KeyValue {
                key: b"/registry/events/default/e".to_vec(),
                mod_revision: 3,
                version: 1,
                value: encode(&obj).unwrap(),
                ..Default::default()
            },
            prev: None,
        };
        let f = ListOptions {
            fields: crate::apiserver::registry::selector::FieldSelector::parse(
                "regarding.name=p",
                r,
            )
            .unwrap(),
            ..Default::default()
        };
        let out = translate(r, &ev, &f).unwrap().unwrap();
        assert_eq!(out.kind, "ADDED");
        assert_eq!(
            out.object,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "resourceVersion": "3"},
                "note": "m", "regarding": {"kind": "Pod", "name": "p"}, "reason": "R"})
        );
    }
}
