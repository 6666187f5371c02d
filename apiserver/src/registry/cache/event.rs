//! One store event decoded once for every watcher: its JSON form (what watchers are sent), and
//! for the new and the previous version only what selectors read (labels and the
//! selectable fields), so that each watcher only evaluates its selectors and copies bytes.
//! Neither version is decoded beyond that ([`decode_paths_as`]); the JSON is written straight
//! from the stored bytes ([`transcode`]) unless the resource is served converted.
//! Decoded objects are not kept: a pod as a `serde_json::Value` with its managedFields is ten
//! times its JSON, and the ring holds a thousand events per resource. Most changes leave what
//! selectors read as it was (a status update, a Lease renewal), so the previous version then
//! shares the new one's instead of holding a copy (at the peak of a Deployment of 1,500 pods
//! the two were 12 MiB of the cache's 25 MiB).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use serde_json::Value;

use crate::registry::{decode_as, decode_paths_as, is_converted, transcode};

use k3rs_apimachinery::meta;
use k3rs_apimachinery::selector::field::{selectable, selectable_paths};

use crate::registry::ListOptions;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::{Event, KeyValue};

/// An object version as selectors see it.
#[derive(Debug, Clone, PartialEq)]
struct Version {
    /// The fields field selectors of the resource can read ([`selectable`]).
    fields: Value,
    labels: BTreeMap<String, String>,
}

impl Version {
    fn new(r: &Resource, object: &Value) -> Version {
        Version {
            fields: selectable(object, r),
            labels: meta::labels(object),
        }
    }

    /// A stored version, decoding only what selectors read of it.
    fn stored(r: &Resource, kv: &KeyValue) -> ApiResult<Version> {
        let paths: Vec<&str> = selectable_paths(r)
            .chain(std::iter::once("metadata.labels"))
            .collect();
        Ok(Version::new(r, &decode_paths_as(r, kv, &paths)?))
    }

    fn matches(&self, filter: &ListOptions) -> bool {
        filter.labels.matches(&self.labels) && filter.fields.matches(&self.fields)
    }
}

/// The stored object `kv` as `r` serves it at `revision`: what selectors read of it, and its
/// JSON. Where it is served as stored, both come from the stored bytes without decoding the
/// object ([`transcode`], [`decode_paths_as`]); converted, or bytes the transcoder does not
/// take, it is decoded in full (which reports the bytes' error, if any).
fn served(r: &Resource, kv: &KeyValue, revision: i64) -> ApiResult<(Version, Vec<u8>)> {
    if !is_converted(r) {
        if let Ok(json) = transcode::to_json(&kv.value, revision) {
            return Ok((Version::stored(r, kv)?, json));
        }
    }
    let mut object = decode_as(r, kv)?;
    meta::set_resource_version(&mut object, revision);
    let json = serde_json::to_vec(&object)
        .map_err(|e| ApiError::internal(format!("encoding a watch event: {e}")))?;
    Ok((Version::new(r, &object), json))
}

/// A decoded store event, shared (behind an `Arc`) by the cache ring and every watcher.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedEvent {
    /// The store key (`/registry/<resource>/<namespace>/<name>`).
    pub key: Vec<u8>,
    /// The revision of the change (for a delete, the delete revision).
    pub revision: i64,
    /// What watchers are sent: the new version, or for a delete the last version stamped
    /// with the delete revision.
    current: Arc<Version>,
    /// The version before this change (for a put; `None` when unknown or created); the same
    /// `Arc` as `current` when selectors see no difference.
    prev: Option<Arc<Version>>,
    /// A put of a key that did not exist before.
    created: bool,
    deleted: bool,
    /// The object sent (`current`'s), serialized once.
    json: Bytes,
}

impl CachedEvent {
    /// Decodes a store event as `r` serves it; `None` for a delete without its previous
    /// version (nothing to show, and never asked that way).
    pub fn decode(r: &Resource, ev: &Event) -> ApiResult<Option<CachedEvent>> {
        let ((current, json), prev, created, deleted) = match ev {
            Event::Put { kv, prev } => {
                let prev = match prev {
                    Some(p) => Some(Version::stored(r, p)?),
                    None => None,
                };
                let created = prev.is_none() && kv.version <= 1;
                (served(r, kv, kv.mod_revision)?, prev, created, false)
            }
            Event::Delete {
                prev: Some(p),
                revision,
                ..
            } => (served(r, p, *revision)?, None, false, true),
            Event::Delete { prev: None, .. } => return Ok(None),
        };
        let current = Arc::new(current);
        let prev = prev.map(|p| {
            if p == *current {
                current.clone()
            } else {
                Arc::new(p)
            }
        });
        Ok(Some(CachedEvent {
            key: ev.key().to_vec(),
            revision: ev.revision(),
            current,
            prev,
            created,
            deleted,
            json: Bytes::from(json),
        }))
    }

    /// The object sent with this event, decoded again from its JSON (for tests and
    /// diagnostics; delivery copies the bytes).
    #[cfg(test)]
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// What a watcher with `filter` is told, the way kube-apiserver's watch cache does: an
    /// object that starts matching is ADDED, one that stops matching is DELETED, one that
    /// matched neither before nor after is not sent (`None`).
    pub fn kind_for(&self, filter: &ListOptions) -> Option<&'static str> {
        let now = self.current.matches(filter);
        if self.deleted {
            return now.then_some("DELETED");
        }
        let before = match &self.prev {
            Some(p) if Arc::ptr_eq(p, &self.current) => Some(now),
            Some(p) => Some(p.matches(filter)),
            // Modified, but the previous version is unknown: assume it matched as it does now.
            None if !self.created => Some(now),
            None => None,
        };
        match (before, now) {
            (Some(true), true) => Some("MODIFIED"),
            (None | Some(false), true) => Some("ADDED"),
            (Some(true), false) => Some("DELETED"),
            (_, false) => None,
        }
    }

    /// The JSON line `{"type":<kind>,"object":<object>}\n`.
    pub fn line(&self, kind: &str) -> Bytes {
        let mut out = Vec::with_capacity(self.json.len() + kind.len() + 24);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&self.json);
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::encode;
    use k3rs_apimachinery::selector::LabelSelector;
    use k3rs_datastore::KeyValue;
    use serde_json::json;

    /// `obj` stored at `key`, written at revision `rev` as its `version`th version.
    fn stored_kv(key: &str, obj: &Value, rev: i64, version: i64) -> KeyValue {
        KeyValue {
            key: key.as_bytes().to_vec(),
            mod_revision: rev,
            version,
            value: encode(obj).unwrap(),
            ..Default::default()
        }
    }

    fn kv(labels: Value, rev: i64, version: i64) -> KeyValue {
        let obj = json!({"metadata": {"name": "x", "labels": labels}});
        stored_kv("/registry/configmaps/default/x", &obj, rev, version)
    }

    fn cms() -> &'static Resource {
        k3rs_apimachinery::catalog::lookup("", "v1", "configmaps").unwrap()
    }

    fn filter(sel: &str) -> ListOptions {
        ListOptions {
            labels: LabelSelector::parse(sel).unwrap(),
            ..Default::default()
        }
    }

    fn kind(ev: &Event, sel: &str) -> Option<&'static str> {
        CachedEvent::decode(cms(), ev)
            .unwrap()
            .unwrap()
            .kind_for(&filter(sel))
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
        let unknown_prev = Event::Put {
            kv: kv(b.clone(), 3, 2),
            prev: None,
        };
        assert_eq!(kind(&unknown_prev, "app=b"), Some("MODIFIED"));
        assert_eq!(kind(&unknown_prev, "app=a"), None);
        let deleted = Event::Delete {
            key: b"/registry/configmaps/default/x".to_vec(),
            revision: 4,
            prev: Some(kv(b, 3, 2)),
        };
        let out = CachedEvent::decode(cms(), &deleted).unwrap().unwrap();
        assert_eq!(out.kind_for(&filter("app=b")), Some("DELETED"));
        assert_eq!(out.kind_for(&filter("app=a")), None);
        assert_eq!(out.revision, 4);
        let line = out.line("DELETED");
        assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'));
        let parsed: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(parsed["type"], "DELETED");
        assert_eq!(parsed["object"]["metadata"]["resourceVersion"], "4");
        assert_eq!(parsed["object"]["metadata"]["labels"]["app"], "b");
        let gone = Event::Delete {
            key: b"k".to_vec(),
            revision: 5,
            prev: None,
        };
        assert_eq!(CachedEvent::decode(cms(), &gone).unwrap(), None);
    }

    #[test]
    fn stored_bytes_the_transcoder_refuses_are_decoded_in_full() {
        // {"metadata": {"name": "x"}, "data": {"k": "v"}}: keys out of order, as no encode
        // writes them; the full decode takes them.
        let mut value = vec![0x82];
        value.extend(rmp_serde::to_vec("metadata").unwrap());
        value.extend(
            rmp_serde::to_vec_named(&json!({"name": "x", "labels": {"app": "a"}})).unwrap(),
        );
        value.extend(rmp_serde::to_vec("data").unwrap());
        value.extend(rmp_serde::to_vec_named(&json!({"k": "v"})).unwrap());
        assert!(transcode::to_json(&value, 2).is_err());
        let kv = KeyValue {
            key: b"/registry/configmaps/default/x".to_vec(),
            mod_revision: 2,
            version: 1,
            value,
            ..Default::default()
        };
        let out = CachedEvent::decode(cms(), &Event::Put { kv, prev: None })
            .unwrap()
            .unwrap();
        assert_eq!(
            out.object(),
            json!({"metadata": {"name": "x", "labels": {"app": "a"}, "resourceVersion": "2"},
                "data": {"k": "v"}})
        );
        assert_eq!(out.kind_for(&filter("app=a")), Some("ADDED"));
    }

    #[test]
    fn an_unchanged_previous_version_is_shared_not_copied() {
        let a = json!({"app": "a"});
        let shared = |prev_labels: &Value| {
            let ev = Event::Put {
                kv: kv(a.clone(), 3, 2),
                prev: Some(kv(prev_labels.clone(), 2, 1)),
            };
            let out = CachedEvent::decode(cms(), &ev).unwrap().unwrap();
            let prev = out.prev.clone().unwrap();
            (Arc::ptr_eq(&prev, &out.current), out)
        };
        let (same, out) = shared(&a);
        assert!(same, "labels and fields unchanged: one version");
        assert_eq!(out.kind_for(&filter("app=a")), Some("MODIFIED"));
        assert_eq!(out.kind_for(&filter("app=b")), None);
        let (same, out) = shared(&json!({"app": "b"}));
        assert!(!same, "relabeled: two versions");
        assert_eq!(out.kind_for(&filter("app=a")), Some("ADDED"));
        assert_eq!(out.kind_for(&filter("app=b")), Some("DELETED"));
    }

    #[test]
    fn previous_versions_are_read_through_selectable_fields_and_conversions() {
        let pod_kv = |node: &str, phase: &str, rev: i64| {
            let pod = json!({"metadata": {"name": "p", "namespace": "default",
                "labels": {"app": "a"}}, "spec": {"nodeName": node,
                "containers": [{"name": "c"}]}, "status": {"phase": phase}});
            stored_kv("/registry/pods/default/p", &pod, rev, rev)
        };
        let pods = k3rs_apimachinery::catalog::lookup("", "v1", "pods").unwrap();
        let kind = |out: &CachedEvent, sel: &str, r: &Resource| {
            out.kind_for(&ListOptions {
                fields: k3rs_apimachinery::selector::FieldSelector::parse(sel, r).unwrap(),
                ..Default::default()
            })
        };
        let bound = Event::Put {
            kv: pod_kv("n1", "Pending", 3),
            prev: Some(pod_kv("", "Pending", 2)),
        };
        let out = CachedEvent::decode(pods, &bound).unwrap().unwrap();
        assert_eq!(kind(&out, "spec.nodeName=n1", pods), Some("ADDED"));
        assert_eq!(kind(&out, "spec.nodeName=", pods), Some("DELETED"));
        let running = Event::Put {
            kv: pod_kv("n1", "Running", 4),
            prev: Some(pod_kv("n1", "Pending", 3)),
        };
        let out = CachedEvent::decode(pods, &running).unwrap().unwrap();
        assert_eq!(kind(&out, "status.phase=Pending", pods), Some("DELETED"));
        assert_eq!(kind(&out, "status.phase=Running", pods), Some("ADDED"));
        assert_eq!(kind(&out, "spec.nodeName=n1", pods), Some("MODIFIED"));

        // events.k8s.io serves stored core Events converted: `regarding` is `involvedObject`.
        let r = k3rs_apimachinery::catalog::lookup("events.k8s.io", "v1", "events").unwrap();
        let event_kv = |pod: &str, rev: i64| {
            let event = json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": pod},
                "reason": "R"});
            stored_kv("/registry/events/default/e", &event, rev, rev)
        };
        let moved = Event::Put {
            kv: event_kv("q", 6),
            prev: Some(event_kv("p", 5)),
        };
        let out = CachedEvent::decode(r, &moved).unwrap().unwrap();
        assert_eq!(kind(&out, "regarding.name=p", r), Some("DELETED"));
        assert_eq!(kind(&out, "regarding.name=q", r), Some("ADDED"));
    }

    #[test]
    fn events_api_watchers_see_converted_events() {
        let r = k3rs_apimachinery::catalog::lookup("events.k8s.io", "v1", "events").unwrap();
        let obj = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "message": "m", "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"});
        let ev = Event::Put {
            kv: stored_kv("/registry/events/default/e", &obj, 3, 1),
            prev: None,
        };
        let f = ListOptions {
            fields: k3rs_apimachinery::selector::FieldSelector::parse("regarding.name=p", r)
                .unwrap(),
            ..Default::default()
        };
        let out = CachedEvent::decode(r, &ev).unwrap().unwrap();
        assert_eq!(out.kind_for(&f), Some("ADDED"));
        assert_eq!(
            out.object(),
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "resourceVersion": "3"},
                "note": "m", "regarding": {"kind": "Pod", "name": "p"}, "reason": "R"})
        );
    }
}
