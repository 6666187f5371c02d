//! The async shell around one resource's [`WatchCache`]: one datastore watch on the
//! resource's prefix, each event decoded once, deliveries pushed into per-watcher bounded
//! channels without ever waiting. A watcher whose channel is full is dropped (its stream ends
//! after what it already has, and its client watches again from its last resourceVersion),
//! so one slow client never holds up the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;

use super::event::CachedEvent;
use super::state::{Delivery, Out, Refused, WatchCache, WatcherId, WatcherSpec};
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::ApiError;
use k3rs_datastore::WatchItem;

/// How often due bookmarks are sent and departed watchers swept.
const TICK: Duration = Duration::from_secs(1);

/// Why a registration failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterError {
    Refused(Refused),
    /// The cache has stopped; make a new one.
    Stopped,
}

struct Shared {
    core: WatchCache,
    senders: HashMap<WatcherId, mpsc::Sender<Out>>,
    stopped: bool,
    dropped_slow: u64,
}

impl Shared {
    /// Hands each delivery to its watcher's channel without waiting; a full channel drops
    /// the watcher (a bookmark that does not fit is skipped instead).
    fn deliver(&mut self, deliveries: Vec<Delivery>) {
        for d in deliveries {
            let Some(tx) = self.senders.get(&d.watcher) else {
                continue;
            };
            let bookmark = matches!(d.out, Out::Bookmark { .. });
            match tx.try_send(d.out) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) if bookmark => {}
                Err(TrySendError::Full(_)) => {
                    self.dropped_slow += 1;
                    self.core.remove(d.watcher);
                    self.senders.remove(&d.watcher);
                }
                Err(TrySendError::Closed(_)) => {
                    self.core.remove(d.watcher);
                    self.senders.remove(&d.watcher);
                }
            }
        }
    }

    fn sweep(&mut self) {
        let gone: Vec<WatcherId> = self
            .senders
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.core.remove(id);
            self.senders.remove(&id);
        }
    }

    fn stop(&mut self, status: Option<serde_json::Value>) {
        if let Some(status) = status {
            let d = self.core.terminate(status);
            self.deliver(d);
        }
        self.core.terminate(serde_json::Value::Null);
        self.senders.clear();
        self.stopped = true;
    }
}

/// One resource's cache, shared by the watch requests and its feeding task.
pub struct ResourceCache {
    resource: &'static Resource,
    shared: Mutex<Shared>,
    buffer: usize,
}

impl std::fmt::Debug for ResourceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCache")
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl ResourceCache {
    /// Starts feeding a cache of `resource` that has seen everything up to `revision` from
    /// `stream` (the datastore watch from `revision + 1`), until the stream ends or `stop`
    /// fires.
    pub fn spawn(
        resource: &'static Resource,
        core: WatchCache,
        buffer: usize,
        stream: BoxStream<'static, WatchItem>,
        stop: CancellationToken,
    ) -> Arc<ResourceCache> {
        let cache = Arc::new(ResourceCache {
            resource,
            shared: Mutex::new(Shared {
                core,
                senders: HashMap::new(),
                stopped: false,
                dropped_slow: 0,
            }),
            buffer: buffer.max(1),
        });
        tokio::spawn(cache.clone().feed(stream, stop));
        cache
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a watcher; its channel starts with its backlog.
    pub fn register(&self, spec: WatcherSpec) -> Result<mpsc::Receiver<Out>, RegisterError> {
        let mut s = self.lock();
        if s.stopped {
            return Err(RegisterError::Stopped);
        }
        let (id, backlog) = s
            .core
            .register(spec, Instant::now())
            .map_err(RegisterError::Refused)?;
        let (tx, rx) = mpsc::channel(self.buffer + backlog.len());
        for out in backlog {
            // Cannot fail: the channel has room for the whole backlog and rx is alive.
            let _ = tx.try_send(out);
        }
        s.senders.insert(id, tx);
        Ok(rx)
    }

    /// Watchers currently attached.
    #[cfg(test)]
    pub fn watcher_count(&self) -> usize {
        self.lock().core.watcher_count()
    }

    /// Watchers dropped so far for not keeping up.
    #[cfg(test)]
    pub fn dropped_slow(&self) -> u64 {
        self.lock().dropped_slow
    }

    pub fn is_stopped(&self) -> bool {
        self.lock().stopped
    }

    async fn feed(
        self: Arc<Self>,
        mut stream: BoxStream<'static, WatchItem>,
        stop: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let end = loop {
            let item = tokio::select! {
                _ = stop.cancelled() => break None,
                _ = tick.tick() => {
                    let mut s = self.lock();
                    s.sweep();
                    let d = s.core.due_bookmarks(Instant::now());
                    s.deliver(d);
                    continue;
                }
                item = stream.next() => item,
            };
            match item {
                Some(WatchItem::Events(events)) => {
                    let decoded: Result<Vec<_>, _> = events
                        .iter()
                        .filter_map(|ev| CachedEvent::decode(self.resource, ev).transpose())
                        .map(|r| r.map(Arc::new))
                        .collect();
                    match decoded {
                        Ok(decoded) => {
                            let mut s = self.lock();
                            let d = s.core.apply(decoded);
                            s.deliver(d);
                        }
                        Err(e) => break Some(e),
                    }
                }
                Some(WatchItem::Progress { revision }) => self.lock().core.progress(revision),
                Some(WatchItem::Compacted { compact_revision }) => {
                    let rev = self.lock().core.revision();
                    break Some(ApiError::expired(format!(
                        "too old resource version: {rev} ({compact_revision})"
                    )));
                }
                Some(WatchItem::Failed(why)) => break Some(ApiError::internal(why)),
                None => break Some(ApiError::internal("the datastore watch ended")),
            }
        };
        self.lock().stop(end.map(|e| e.to_status()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::encode;
    use k3rs_datastore::{Event, KeyValue};
    use serde_json::json;

    fn created(name: &str, rev: i64) -> WatchItem {
        let obj = json!({"metadata": {"name": name, "namespace": "a"}});
        WatchItem::Events(vec![Event::Put {
            kv: KeyValue {
                key: format!("/registry/configmaps/a/{name}").into_bytes(),
                mod_revision: rev,
                create_revision: rev,
                version: 1,
                value: encode(&obj).unwrap(),
                ..Default::default()
            },
            prev: None,
        }])
    }

    fn spec() -> WatcherSpec {
        WatcherSpec {
            key: b"/registry/configmaps/".to_vec(),
            range_end: b"/registry/configmaps0".to_vec(),
            after: 10,
            ..Default::default()
        }
    }

    fn revision(out: Option<Out>) -> i64 {
        match out {
            Some(Out::Event { event, .. }) => event.revision,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_slow_watcher_is_dropped_without_holding_up_the_others() {
        let (feed, items) = mpsc::channel(8);
        let stream = tokio_stream::wrappers::ReceiverStream::new(items).boxed();
        let core = WatchCache::new(10, Duration::from_secs(30), 10);
        let cms = k3rs_apimachinery::catalog::lookup("", "v1", "configmaps").unwrap();
        let cache = ResourceCache::spawn(cms, core, 2, stream, CancellationToken::new());
        let mut fast = cache.register(spec()).unwrap();
        let mut slow = cache.register(spec()).unwrap();
        for rev in 11..=14 {
            feed.send(created(&format!("x{rev}"), rev)).await.unwrap();
            assert_eq!(revision(fast.recv().await), rev);
        }
        assert_eq!(cache.dropped_slow(), 1);
        assert_eq!(cache.watcher_count(), 1);
        // The slow one keeps what fitted, then its stream ends.
        assert_eq!(revision(slow.recv().await), 11);
        assert_eq!(revision(slow.recv().await), 12);
        assert_eq!(slow.recv().await, None);

        // A compaction under the cache ends it: its watchers get 410 and new ones are refused.
        feed.send(WatchItem::Compacted {
            compact_revision: 20,
        })
        .await
        .unwrap();
        match fast.recv().await {
            Some(Out::Error(status)) => assert_eq!(status["code"], 410),
            other => panic!("expected the 410, got {other:?}"),
        }
        assert_eq!(fast.recv().await, None);
        assert!(cache.is_stopped());
        assert_eq!(cache.register(spec()).unwrap_err(), RegisterError::Stopped);
    }
}
