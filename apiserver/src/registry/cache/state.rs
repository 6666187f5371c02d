//! The watch cache's decision core (no I/O, no clock): a bounded ring of recent events of one
//! resource and the watchers fed from it. The async shell (`resource.rs`) feeds it store
//! events and the time, and delivers what it returns.
//!
//! # Guarantees
//! - A watcher registered with `after = n` receives, in revision order, exactly the events
//!   after `n` that concern it (its key range, translated through its selectors), once each:
//!   first the backlog from the ring, then live events.
//! - Registration is refused ([`Refused::TooOld`]) when events after `n` have already left the
//!   ring; the caller then watches the datastore directly (which answers 410 if compacted).
//! - A bookmark carries a revision no older than any event already delivered to its watcher.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::event::CachedEvent;
use crate::registry::ListOptions;

/// A watcher's handle in the cache.
pub type WatcherId = u64;

/// What a watcher wants.
#[derive(Debug, Clone, Default)]
pub struct WatcherSpec {
    /// Keys in `[key, range_end)`; an empty `range_end` means exactly `key`.
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
    pub filter: ListOptions,
    /// Only events with a revision above this one.
    pub after: i64,
    /// Whether it gets BOOKMARK events.
    pub bookmarks: bool,
}

impl WatcherSpec {
    fn covers(&self, key: &[u8]) -> bool {
        if self.range_end.is_empty() {
            key == self.key.as_slice()
        } else {
            key >= self.key.as_slice() && key < self.range_end.as_slice()
        }
    }

    fn kind_for(&self, ev: &CachedEvent) -> Option<&'static str> {
        if ev.revision <= self.after || !self.covers(&ev.key) {
            return None;
        }
        ev.kind_for(&self.filter)
    }
}

/// One thing for one watcher's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Event {
        kind: &'static str,
        event: Arc<CachedEvent>,
    },
    Bookmark {
        revision: i64,
    },
    /// The cache stopped (its store watch ended); the watcher gets this Status as an ERROR
    /// event and its stream ends.
    Error(Value),
}

/// An [`Out`] addressed to a watcher.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub watcher: WatcherId,
    pub out: Out,
}

/// Why a watcher cannot be served from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Events after the requested revision already left the ring; the oldest start served is
    /// `oldest`.
    TooOld { oldest: i64 },
}

#[derive(Debug)]
struct Watcher {
    spec: WatcherSpec,
    next_bookmark: Instant,
}

/// The state of one resource's cache.
#[derive(Debug)]
pub struct WatchCache {
    capacity: usize,
    bookmark_interval: Duration,
    ring: VecDeque<Arc<CachedEvent>>,
    /// Every event after this revision is in the ring.
    window_start: i64,
    /// The newest revision seen (events or progress notifications).
    revision: i64,
    watchers: BTreeMap<WatcherId, Watcher>,
    next_id: WatcherId,
}

impl WatchCache {
    /// An empty cache that has seen everything up to `revision`.
    pub fn new(capacity: usize, bookmark_interval: Duration, revision: i64) -> WatchCache {
        WatchCache {
            capacity: capacity.max(1),
            bookmark_interval,
            ring: VecDeque::new(),
            window_start: revision,
            revision,
            watchers: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// The newest revision seen.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The oldest `after` a new watcher may ask for.
    #[cfg(test)]
    pub fn window_start(&self) -> i64 {
        self.window_start
    }

    /// Watchers registered.
    #[cfg(test)]
    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// Adds a watcher; returns its id and its backlog (the ring's events after `spec.after`
    /// that concern it, in order).
    pub fn register(
        &mut self,
        spec: WatcherSpec,
        now: Instant,
    ) -> Result<(WatcherId, Vec<Out>), Refused> {
        if spec.after < self.window_start {
            return Err(Refused::TooOld {
                oldest: self.window_start,
            });
        }
        let backlog = self
            .ring
            .iter()
            .filter_map(|ev| {
                spec.kind_for(ev).map(|kind| Out::Event {
                    kind,
                    event: ev.clone(),
                })
            })
            .collect();
        let id = self.next_id;
        self.next_id += 1;
        let next_bookmark = now + self.bookmark_interval;
        self.watchers.insert(
            id,
            Watcher {
                spec,
                next_bookmark,
            },
        );
        Ok((id, backlog))
    }

    /// Forgets a watcher (gone, or too slow).
    pub fn remove(&mut self, id: WatcherId) {
        self.watchers.remove(&id);
    }

    /// Appends the events of whole revisions (in order) and returns what each watcher gets.
    pub fn apply(&mut self, events: Vec<Arc<CachedEvent>>) -> Vec<Delivery> {
        let mut out = Vec::new();
        for ev in events {
            self.revision = self.revision.max(ev.revision);
            for (id, w) in &self.watchers {
                if let Some(kind) = w.spec.kind_for(&ev) {
                    out.push(Delivery {
                        watcher: *id,
                        out: Out::Event {
                            kind,
                            event: ev.clone(),
                        },
                    });
                }
            }
            self.ring.push_back(ev);
            while self.ring.len() > self.capacity {
                if let Some(old) = self.ring.pop_front() {
                    self.window_start = self.window_start.max(old.revision);
                }
            }
        }
        out
    }

    /// The store has delivered everything up to `revision`.
    pub fn progress(&mut self, revision: i64) {
        self.revision = self.revision.max(revision);
    }

    /// Bookmarks for the watchers that asked for them and are due at `now`.
    pub fn due_bookmarks(&mut self, now: Instant) -> Vec<Delivery> {
        let mut out = Vec::new();
        for (id, w) in &mut self.watchers {
            if w.spec.bookmarks && w.next_bookmark <= now {
                w.next_bookmark = now + self.bookmark_interval;
                out.push(Delivery {
                    watcher: *id,
                    out: Out::Bookmark {
                        revision: self.revision.max(w.spec.after),
                    },
                });
            }
        }
        out
    }

    /// The cache stops: every watcher gets `status` as its last event and is forgotten.
    pub fn terminate(&mut self, status: Value) -> Vec<Delivery> {
        std::mem::take(&mut self.watchers)
            .into_keys()
            .map(|watcher| Delivery {
                watcher,
                out: Out::Error(status.clone()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::encode;
    use k3rs_apimachinery::selector::LabelSelector;
    use k3rs_datastore::{Event, KeyValue};
    use serde_json::json;

    const SEC: Duration = Duration::from_secs(1);

    fn cms() -> &'static k3rs_apimachinery::catalog::Resource {
        k3rs_apimachinery::catalog::lookup("", "v1", "configmaps").unwrap()
    }

    fn kv(ns: &str, name: &str, app: &str, rev: i64, version: i64) -> KeyValue {
        let obj = json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}}});
        KeyValue {
            key: format!("/registry/configmaps/{ns}/{name}").into_bytes(),
            mod_revision: rev,
            version,
            value: encode(&obj).unwrap(),
            ..Default::default()
        }
    }

    fn put(ns: &str, name: &str, app: &str, rev: i64, prev: Option<KeyValue>) -> Arc<CachedEvent> {
        let version = prev.as_ref().map_or(1, |p| p.version + 1);
        let ev = Event::Put {
            kv: kv(ns, name, app, rev, version),
            prev,
        };
        Arc::new(CachedEvent::decode(cms(), &ev).unwrap().unwrap())
    }

    fn del(prev: KeyValue, rev: i64) -> Arc<CachedEvent> {
        let ev = Event::Delete {
            key: prev.key.clone(),
            revision: rev,
            prev: Some(prev),
        };
        Arc::new(CachedEvent::decode(cms(), &ev).unwrap().unwrap())
    }

    fn spec(ns: Option<&str>, sel: &str, after: i64) -> WatcherSpec {
        let key = match ns {
            Some(ns) => format!("/registry/configmaps/{ns}/"),
            None => "/registry/configmaps/".to_string(),
        }
        .into_bytes();
        WatcherSpec {
            range_end: k3rs_datastore::prefix_end(&key),
            key,
            filter: ListOptions {
                labels: LabelSelector::parse(sel).unwrap(),
                ..Default::default()
            },
            after,
            bookmarks: false,
        }
    }

    /// (watcher, kind, revision, name) of each delivery, or ("BOOKMARK", rev, "").
    fn summary(d: &[Delivery]) -> Vec<(WatcherId, &'static str, i64, String)> {
        d.iter()
            .map(|d| match &d.out {
                Out::Event { kind, event } => (
                    d.watcher,
                    *kind,
                    event.revision,
                    event.object()["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                ),
                Out::Bookmark { revision } => (d.watcher, "BOOKMARK", *revision, String::new()),
                Out::Error(s) => (
                    d.watcher,
                    "ERROR",
                    s["code"].as_i64().unwrap(),
                    String::new(),
                ),
            })
            .collect()
    }

    fn backlog(out: &[Out]) -> Vec<(&'static str, i64)> {
        out.iter()
            .map(|o| match o {
                Out::Event { kind, event } => (*kind, event.revision),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn fans_out_through_each_watchers_scope_and_selector() {
        let now = Instant::now();
        let mut c = WatchCache::new(100, 30 * SEC, 10);
        let (all, _) = c.register(spec(None, "", 10), now).unwrap();
        let (app_a, _) = c.register(spec(None, "app=a", 10), now).unwrap();
        let (ns_b, _) = c.register(spec(Some("b"), "", 10), now).unwrap();
        let (later, _) = c.register(spec(None, "", 12), now).unwrap();
        let x1 = kv("a", "x", "a", 11, 1);
        let x2 = kv("a", "x", "b", 12, 2);
        let d = c.apply(vec![
            put("a", "x", "a", 11, None),
            put("b", "y", "a", 11, None),
        ]);
        assert_eq!(
            summary(&d),
            vec![
                (all, "ADDED", 11, "x".into()),
                (app_a, "ADDED", 11, "x".into()),
                (all, "ADDED", 11, "y".into()),
                (app_a, "ADDED", 11, "y".into()),
                (ns_b, "ADDED", 11, "y".into()),
            ]
        );
        let d = c.apply(vec![put("a", "x", "b", 12, Some(x1))]);
        assert_eq!(
            summary(&d),
            vec![
                (all, "MODIFIED", 12, "x".into()),
                (app_a, "DELETED", 12, "x".into()),
            ]
        );
        let d = c.apply(vec![del(x2, 13)]);
        assert_eq!(
            summary(&d),
            vec![
                (all, "DELETED", 13, "x".into()),
                (later, "DELETED", 13, "x".into()),
            ]
        );
        assert_eq!(c.revision(), 13);
        c.remove(all);
        assert_eq!(c.watcher_count(), 3);
    }

    #[test]
    fn backlog_from_the_ring_then_too_old_once_evicted() {
        let now = Instant::now();
        let mut c = WatchCache::new(3, 30 * SEC, 10);
        let x1 = kv("a", "x", "a", 11, 1);
        c.apply(vec![put("a", "x", "a", 11, None)]);
        c.apply(vec![put("a", "x", "b", 12, Some(x1))]);
        c.apply(vec![put("a", "y", "a", 13, None)]);
        assert_eq!(c.window_start(), 10);
        let (_, b) = c.register(spec(None, "", 10), now).unwrap();
        assert_eq!(
            backlog(&b),
            vec![("ADDED", 11), ("MODIFIED", 12), ("ADDED", 13)]
        );
        let (_, b) = c.register(spec(None, "app=a", 11), now).unwrap();
        assert_eq!(backlog(&b), vec![("DELETED", 12), ("ADDED", 13)]);
        let (_, b) = c.register(spec(None, "", 13), now).unwrap();
        assert_eq!(backlog(&b), vec![]);
        // A future start: nothing until the store gets there.
        let (future, b) = c.register(spec(None, "", 20), now).unwrap();
        assert_eq!(backlog(&b), vec![]);
        let d = c.apply(vec![put("a", "z", "a", 14, None)]);
        assert!(d.iter().all(|d| d.watcher != future));
        // The ring holds 3: revision 11 leaves, so a start at 10 cannot be served any more.
        assert_eq!(c.window_start(), 11);
        assert_eq!(
            c.register(spec(None, "", 10), now).unwrap_err(),
            Refused::TooOld { oldest: 11 }
        );
        assert!(c.register(spec(None, "", 11), now).is_ok());
    }

    #[test]
    fn a_revision_split_by_eviction_is_not_served_from_its_middle() {
        let now = Instant::now();
        let mut c = WatchCache::new(2, 30 * SEC, 10);
        // One transaction, two keys, one revision.
        c.apply(vec![
            put("a", "x", "a", 11, None),
            put("a", "y", "a", 11, None),
        ]);
        c.apply(vec![put("a", "z", "a", 12, None)]);
        assert_eq!(c.window_start(), 11);
        assert_eq!(
            c.register(spec(None, "", 10), now).unwrap_err(),
            Refused::TooOld { oldest: 11 }
        );
        let (_, b) = c.register(spec(None, "", 11), now).unwrap();
        assert_eq!(backlog(&b), vec![("ADDED", 12)]);
    }

    #[test]
    fn bookmarks_only_when_asked_and_due_with_the_newest_revision() {
        let t0 = Instant::now();
        let mut c = WatchCache::new(10, 30 * SEC, 10);
        let mut with = spec(None, "app=none", 10);
        with.bookmarks = true;
        let (b, _) = c.register(with, t0).unwrap();
        let (_quiet, _) = c.register(spec(None, "", 10), t0).unwrap();
        assert_eq!(c.due_bookmarks(t0 + 29 * SEC), vec![]);
        // Events the watcher does not see still move its bookmark forward.
        c.apply(vec![put("a", "x", "a", 11, None)]);
        c.progress(15);
        assert_eq!(
            summary(&c.due_bookmarks(t0 + 30 * SEC)),
            vec![(b, "BOOKMARK", 15, String::new())]
        );
        assert_eq!(c.due_bookmarks(t0 + 59 * SEC), vec![]);
        assert_eq!(c.due_bookmarks(t0 + 60 * SEC).len(), 1);
    }

    #[test]
    fn terminate_tells_every_watcher_once() {
        let now = Instant::now();
        let mut c = WatchCache::new(10, 30 * SEC, 10);
        let (a, _) = c.register(spec(None, "", 10), now).unwrap();
        let (b, _) = c.register(spec(None, "", 10), now).unwrap();
        let d = c.terminate(json!({"code": 410}));
        assert_eq!(
            summary(&d),
            vec![
                (a, "ERROR", 410, String::new()),
                (b, "ERROR", 410, String::new())
            ]
        );
        assert_eq!(c.watcher_count(), 0);
        assert_eq!(c.apply(vec![put("a", "x", "a", 11, None)]), vec![]);
    }
}
