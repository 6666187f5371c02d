//! Shared informers (client-go's `SharedInformerFactory`): one watch and one cache per
//! resource type for a whole process, shared by every consumer in it (in `k3rs server`: the
//! scheduler and the controllers), instead of one reflector per consumer.
//!
//! # Guarantees
//! - [`SharedInformerFactory::informer`] starts the watch of `K` on first use (list, then
//!   watch, with kube-runtime's backoff); later calls share it. It runs until the factory's
//!   stop token is cancelled.
//! - Cached objects have `metadata.managedFields` removed (client-go's transform). A cached
//!   object written back whole has no `managedFields` at all, which the API server takes as
//!   "keep the recorded ones", as kube-apiserver does.
//! - [`Informer::subscribe`] yields what a `watcher` yields, objects shared with the cache
//!   (`Arc`): first a complete list (`Init`, `InitApply` of every cached object, `InitDone`)
//!   as soon as the cache is ready, then `Apply`/`Delete` per change, and a complete list
//!   again after the watch relisted or when the subscriber fell more than [`BUFFER`]
//!   changes behind (like a watch that expired; objects deleted meanwhile are not announced
//!   as deletions, as a relist does not announce them either).
//!
//! # Assumptions
//! - The factory's client may list and watch every type asked for, cluster-wide (in the
//!   server: `system:kube-controller-manager`, which may `list`/`watch` `*`).
//!
//! kube-runtime's own shared reflector (`reflector::store_shared` with
//! `Writer::subscribe`) is not used: its subscribers are told of applied objects only, not of
//! deletions, and one that subscribes after the initial list is not told of the objects
//! already listed; the controllers need both.

mod subscription;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use subscription::Subscription;

/// How many changes a subscriber may fall behind before it is given a complete list instead.
pub const BUFFER: usize = 4096;

/// What a resource type needs to be cached.
pub trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// The watches and caches of one process; cheap to clone (clones share them).
#[derive(Clone)]
pub struct SharedInformerFactory {
    client: kube::Client,
    stop: CancellationToken,
    informers: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
}

impl Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactory {
    /// Informers that list and watch through `client` until `stop`.
    pub fn new(client: kube::Client, stop: CancellationToken) -> SharedInformerFactory {
        SharedInformerFactory {
            client,
            stop,
            informers: Arc::default(),
        }
    }

    /// The informer of every `K` in the cluster, started on first use (within a Tokio
    /// runtime).
    pub fn informer<K: Cached>(&self) -> Informer<K> {
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = informers
            .get(&TypeId::of::<K>())
            .and_then(|i| i.downcast_ref::<Informer<K>>())
        {
            return i.clone();
        }
        let (informer, feed) = Informer::new();
        let api = Api::<K>::all(self.client.clone());
        tokio::spawn(run(api, feed, self.stop.clone()));
        informers.insert(TypeId::of::<K>(), Box::new(informer.clone()));
        informer
    }
}

/// One resource type's cache and its change notifications; cheap to clone.
pub struct Informer<K: Cached> {
    store: Store<K>,
    changes: broadcast::Sender<Change<K>>,
}

impl<K: Cached> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            store: self.store.clone(),
            changes: self.changes.clone(),
        }
    }
}

/// What the informer tells its subscribers.
#[derive(Debug)]
enum Change<K> {
    Apply(Arc<K>),
    Delete(Arc<K>),
    /// The cache was (re)listed: subscribers take a complete list from it.
    Listed,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Apply(o) => Change::Apply(o.clone()),
            Change::Delete(o) => Change::Delete(o.clone()),
            Change::Listed => Change::Listed,
        }
    }
}

impl<K: Cached> Informer<K> {
    /// An informer not yet fed, and what feeds it.
    fn new() -> (Informer<K>, Feed<K>) {
        let (store, writer) = reflector::store();
        let (changes, _) = broadcast::channel(BUFFER);
        let informer = Informer {
            store: store.clone(),
            changes: changes.clone(),
        };
        let feed = Feed {
            writer,
            store,
            changes,
        };
        (informer, feed)
    }

    /// The cache (empty until the first list completes: `Store::wait_until_ready`).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// The cache's changes as a watcher's events (see the module's guarantees).
    pub fn subscribe(&self) -> Subscription<K> {
        Subscription::new(self.changes.subscribe(), self.store.clone())
    }

    /// Every object a change touches (applied, deleted, or listed), for kube-runtime's
    /// `Controller::{for,owns,watches}_shared_stream`.
    pub fn touched(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        self.subscribe().filter_map(|e| {
            futures::future::ready(match e {
                watcher::Event::Apply(o)
                | watcher::Event::InitApply(o)
                | watcher::Event::Delete(o) => Some(o),
                watcher::Event::Init | watcher::Event::InitDone => None,
            })
        })
    }
}

/// The writing side of an informer: applies a watch's events to the cache and tells the
/// subscribers.
struct Feed<K: Cached> {
    writer: reflector::store::Writer<K>,
    store: Store<K>,
    changes: broadcast::Sender<Change<K>>,
}

impl<K: Cached> Feed<K> {
    fn apply(&mut self, mut event: watcher::Event<K>) {
        strip(&mut event);
        self.writer.apply_watcher_event(&event);
        // A send fails only when nobody subscribes, which is fine.
        let _ = match event {
            watcher::Event::Apply(o) => {
                let cached = self.store.get(&ObjectRef::from_obj(&o));
                self.changes
                    .send(Change::Apply(cached.unwrap_or_else(|| Arc::new(o))))
            }
            watcher::Event::Delete(o) => self.changes.send(Change::Delete(Arc::new(o))),
            watcher::Event::InitDone => self.changes.send(Change::Listed),
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
    }
}

/// Drops what no consumer reads: `managedFields`.
fn strip<K: Resource>(event: &mut watcher::Event<K>) {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => {
            o.meta_mut().managed_fields = None;
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

/// Feeds `feed` from a watch of `api` until `stop`.
async fn run<K: Cached>(api: Api<K>, mut feed: Feed<K>, stop: CancellationToken) {
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            e = events.next() => e,
        };
        match event {
            Some(Ok(e)) => feed.apply(e),
            Some(Err(e)) => tracing::debug!(error = %e, "shared informer: watch error (retrying)"),
            None => return,
        }
    }
}

/// Whether the store has completed its first list.
fn ready<K: Cached>(store: &Store<K>) -> bool {
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

#[cfg(test)]
mod tests;
