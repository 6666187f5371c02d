//! The watch cache, in the spirit of kube-apiserver's cacher: one datastore watch per
//! resource (its whole key prefix), a bounded ring of recent events decoded once, and fan-out
//! to any number of API watchers, each filtered by its own namespace and selectors.
//!
//! A cache is made on the first watch of a resource and lives until the server stops or its
//! datastore watch ends (compaction under it, lost etcd connection: its watchers then get
//! the ERROR event they would have got from their own store watch, and the next watch makes
//! a new cache).
//!
//! # Guarantees
//! - Events reach a watcher in revision order, gap-free, each once (`state.rs`).
//! - A start the ring no longer covers is not served here ([`WatchCaches::subscribe`] returns
//!   `None`): the caller watches the datastore directly, which serves it or answers 410.
//!   So resourceVersion semantics are exactly those of a direct store watch, on both
//!   datastores.
//! - Delivery never waits for a watcher: one that falls `BUFFER` events behind is closed.

mod event;
mod resource;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use event::CachedEvent;
pub use resource::ResourceCache;
pub use state::{Out, WatcherSpec};

use resource::RegisterError;
use state::WatchCache;

use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::ApiResult;
use k3rs_datastore::{prefix_end, Datastore, Error as DsError, WatchRequest};

/// Events kept per resource for watchers that start in the past (each holds the decoded
/// object, its previous version and its JSON: a few KiB for a typical pod).
pub const RING_CAPACITY: usize = 1024;
/// Events a watcher may have queued before it is dropped as too slow.
pub const BUFFER: usize = 4096;

/// Every resource's cache, by group, version, resource and storage prefix (two resources
/// can share a prefix and decode it differently, like core and events.k8s.io events).
pub struct WatchCaches {
    caches: Mutex<HashMap<String, Arc<ResourceCache>>>,
    /// Serializes making caches (a store call each), not using them.
    making: tokio::sync::Mutex<()>,
    ring_capacity: usize,
    buffer: usize,
    bookmark_interval: Duration,
}

impl std::fmt::Debug for WatchCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCaches")
            .field("ring_capacity", &self.ring_capacity)
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl WatchCaches {
    pub fn new(ring_capacity: usize, buffer: usize, bookmark_interval: Duration) -> WatchCaches {
        WatchCaches {
            caches: Mutex::new(HashMap::new()),
            making: tokio::sync::Mutex::new(()),
            ring_capacity,
            buffer,
            bookmark_interval,
        }
    }

    fn existing(&self, id: &str) -> Option<Arc<ResourceCache>> {
        let caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        caches.get(id).filter(|c| !c.is_stopped()).cloned()
    }

    /// Attaches a watcher to the cache of `r` (making the cache if needed). `None`: the
    /// cache cannot serve `spec.after`; watch the store.
    pub async fn subscribe(
        &self,
        ds: &Arc<dyn Datastore>,
        r: &'static Resource,
        spec: WatcherSpec,
        stop: &CancellationToken,
    ) -> ApiResult<Option<mpsc::Receiver<Out>>> {
        let id = cache_id(r);
        for _ in 0..2 {
            let cache = match self.existing(&id) {
                Some(c) => c,
                None => match self.make(ds, r, &id, spec.after, stop).await? {
                    Some(c) => c,
                    None => return Ok(None),
                },
            };
            match cache.register(spec.clone()) {
                Ok(rx) => return Ok(Some(rx)),
                Err(RegisterError::Refused(_)) => return Ok(None),
                // Stopped between lookup and registration: make a new one.
                Err(RegisterError::Stopped) => continue,
            }
        }
        Ok(None)
    }

    /// Makes the cache of `r` starting at `after` when the store still has that history
    /// (and it is not too far back to replay), else at the current revision.
    async fn make(
        &self,
        ds: &Arc<dyn Datastore>,
        r: &'static Resource,
        id: &str,
        after: i64,
        stop: &CancellationToken,
    ) -> ApiResult<Option<Arc<ResourceCache>>> {
        let _making = self.making.lock().await;
        if let Some(c) = self.existing(id) {
            return Ok(Some(c));
        }
        let prefix = format!("{}/", r.storage_prefix).into_bytes();
        let current = ds.current_revision().await?;
        let replay = current.saturating_sub(after);
        let start = if (0..=self.ring_capacity as i64).contains(&replay) {
            after
        } else {
            current
        };
        let stream = match ds
            .watch(WatchRequest {
                range_end: prefix_end(&prefix),
                key: prefix,
                start_revision: start + 1,
                prev_kv: true,
                progress_notify: true,
            })
            .await
        {
            Ok(s) => s,
            Err(DsError::Compacted { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let core = WatchCache::new(self.ring_capacity, self.bookmark_interval, start);
        let cache = ResourceCache::spawn(r, core, self.buffer, stream, stop.clone());
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        caches.insert(id.to_string(), cache.clone());
        Ok(Some(cache))
    }
}

fn cache_id(r: &Resource) -> String {
    format!(
        "{}/{}/{} {}",
        r.group, r.version, r.plural, r.storage_prefix
    )
}
