//! Shared informers (client-go's `SharedInformerFactory`): one watch and one cache per
//! resource type for a whole process, shared by every consumer in it (in `k3rs server`, one
//! factory for the API server's RBAC authorizer and admission plugins, the scheduler and the
//! controllers), instead of one reflector per consumer.
//!
//! # Guarantees
//! - [`SharedInformerFactory::informer`] starts the watch of `K` on first use (list, then
//!   watch, with kube-runtime's backoff); later calls share it. It runs until the factory's
//!   stop token is cancelled. A factory made [`SharedInformerFactory::unstarted`] hands out
//!   informers at once but starts their watches only when given its client
//!   ([`SharedInformerFactory::start`]).
//! - Cached objects have `metadata.managedFields` removed (client-go's transform). A cached
//!   object written back whole has no `managedFields` at all, which the API server takes as
//!   "keep the recorded ones", as kube-apiserver does.
//! - [`Informer::subscribe`] yields what a `watcher` yields, objects shared with the cache
//!   (`Arc`): first a complete list (`Init`, `InitApply` of every cached object, `InitDone`)
//!   as soon as the cache is ready, then `Apply`/`Delete` per change in the cache's order.
//!   When the watch relists, every cached object the new list lacks is announced as a
//!   `Delete` (client-go's `DeltaFIFO.Replace`), then the complete list follows.
//! - [`Informer::synced_store`] gives the cache once its first list is complete (client-go's
//!   `WaitForCacheSync`), as [`Informer::wait_synced`] waits for it; any number of tasks may
//!   wait at once. [`Informer::get`] and [`Informer::list`] read the cache as it is now
//!   (empty until the first list is complete; during a relist, as before it). The cache
//!   itself (a `Store`) is never handed out unsynced, because kube-runtime's
//!   `Store::wait_until_ready` wakes only the last task that polled it (its `DelayedInit` is
//!   a `futures` oneshot, which keeps one waker): on a store shared by several consumers the
//!   others would wait forever.
//! - [`Informer::index`] gives the informer's one index of a type (client-go's indexers),
//!   kept by the feed: each change is applied to every index before any subscriber is told
//!   of it (the guarantees of `informers/indexed.rs`).
//! - No subscriber misses a change, however far behind it falls: each has its own unbounded
//!   queue (client-go's `processorListener` buffer), holding `Arc`s of objects. A subscriber
//!   that is dropped is forgotten at the next change.
//!
//! # Assumptions
//! - The factory's client may list and watch every type asked for, cluster-wide (in the
//!   server: the API server's loopback client, `system:apiserver` in `system:masters`).
//!
//! kube-runtime's own shared reflector (`reflector::store_shared` with
//! `Writer::subscribe`) is not used: its subscribers are told of applied objects only, not of
//! deletions, and one that subscribes after the initial list is not told of the objects
//! already listed; the controllers need both.

mod changed;
mod indexed;
mod subscription;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use std::collections::HashSet;

use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::transform::strip_managed_fields;

pub use changed::ChangeFilter;
pub use indexed::{read, Indexer, Shared};
pub use subscription::Subscription;

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
    stop: CancellationToken,
    state: Arc<Mutex<FactoryState>>,
}

/// The informers of a factory and the client they watch through.
#[derive(Default)]
struct FactoryState {
    /// `None` until [`SharedInformerFactory::start`].
    client: Option<kube::Client>,
    informers: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// What starts each informer asked for before the client was known.
    unstarted: Vec<Box<dyn FnOnce(kube::Client) + Send>>,
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
        let factory = SharedInformerFactory::unstarted(stop);
        lock(&factory.state).client = Some(client);
        factory
    }

    /// Informers whose watches wait for [`SharedInformerFactory::start`] (for a process whose
    /// client needs the readers first, as the API server's in-process client needs the
    /// admission chain that reads these caches). Until then they read as empty and unsynced.
    pub fn unstarted(stop: CancellationToken) -> SharedInformerFactory {
        SharedInformerFactory {
            stop,
            state: Arc::default(),
        }
    }

    /// Starts every informer asked for so far, and those asked for later, with `client`
    /// (client-go's `factory.Start`; within a Tokio runtime). Only the first call counts.
    pub fn start(&self, client: kube::Client) {
        let unstarted = {
            let mut state = lock(&self.state);
            if state.client.is_some() {
                return;
            }
            state.client = Some(client.clone());
            std::mem::take(&mut state.unstarted)
        };
        for start in unstarted {
            start(client.clone());
        }
    }

    /// The informer of every `K` in the cluster, started on first use once the factory has
    /// its client (within a Tokio runtime).
    pub fn informer<K: Cached>(&self) -> Informer<K> {
        let mut state = lock(&self.state);
        if let Some(i) = state
            .informers
            .get(&TypeId::of::<K>())
            .and_then(|i| i.downcast_ref::<Informer<K>>())
        {
            return i.clone();
        }
        let (informer, feed) = Informer::new();
        let stop = self.stop.clone();
        let start = move |client: kube::Client| {
            tokio::spawn(run(Api::<K>::all(client), feed, stop));
        };
        match state.client.clone() {
            Some(client) => start(client),
            None => state.unstarted.push(Box::new(start)),
        }
        state
            .informers
            .insert(TypeId::of::<K>(), Box::new(informer.clone()));
        informer
    }
}

/// One resource type's cache and its change notifications; cheap to clone.
pub struct Informer<K: Cached> {
    store: Store<K>,
    subscribers: Arc<Mutex<Subscribers<K>>>,
    /// Whether the first list is complete.
    synced: watch::Receiver<bool>,
}

impl<K: Cached> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            store: self.store.clone(),
            subscribers: self.subscribers.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<K: Cached> Debug for Informer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("kind", &K::kind(&()))
            .field("synced", &self.has_synced())
            .finish_non_exhaustive()
    }
}

/// What the informer tells its subscribers.
#[derive(Debug)]
enum Change<K> {
    Apply(Arc<K>),
    Delete(Arc<K>),
    /// The cache as it is once (re)listed: a subscriber gives it as a complete list.
    Listed(Arc<[Arc<K>]>),
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Apply(o) => Change::Apply(o.clone()),
            Change::Delete(o) => Change::Delete(o.clone()),
            Change::Listed(l) => Change::Listed(l.clone()),
        }
    }
}

/// The queues of the subscribers and the indexes. The feed applies a change to the cache and
/// the indexes and queues it while holding them, so a new subscriber's (or index's) first
/// list and the changes after it line up exactly.
struct Subscribers<K> {
    queues: Vec<mpsc::UnboundedSender<Change<K>>>,
    indexes: Vec<indexed::Index<K>>,
}

impl<K> Subscribers<K> {
    /// Applies `change` to every index, then queues it for every subscriber still there.
    fn send(&mut self, change: &Change<K>) {
        for index in &self.indexes {
            index.apply(change);
        }
        self.queues.retain(|s| s.send(change.clone()).is_ok());
    }
}

impl<K: Cached> Informer<K> {
    /// An informer not yet fed, and what feeds it.
    fn new() -> (Informer<K>, Feed<K>) {
        let (store, writer) = reflector::store();
        let subscribers = Arc::new(Mutex::new(Subscribers {
            queues: Vec::new(),
            indexes: Vec::new(),
        }));
        let (synced_tx, synced) = watch::channel(false);
        let informer = Informer {
            store: store.clone(),
            subscribers: subscribers.clone(),
            synced,
        };
        let feed = Feed {
            writer,
            store,
            subscribers,
            relisted: None,
            synced: synced_tx,
        };
        (informer, feed)
    }

    /// The cache, once its first list is complete (see the module's guarantees). If the
    /// informer stops first (the factory's stop token), the cache as it is.
    pub async fn synced_store(&self) -> Store<K> {
        self.wait_synced().await;
        self.store.clone()
    }

    /// Whether the first list is complete (client-go's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list is complete, or the informer stops (client-go's
    /// `WaitForCacheSync`); any number of tasks may wait at once.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        // An error means the feed is gone (stopping): nothing more will come.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// The cached object `key` as the cache holds it now (a lister's `Get`; `None` before the
    /// first list is complete too).
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Every cached object as the cache holds it now (a lister's `List`; empty before the
    /// first list is complete).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The cached objects `keep` accepts, as the cache holds them now (empty before the first
    /// list is complete).
    pub fn list_filter(&self, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        self.store.state_filter(keep)
    }

    /// The cache's changes as a watcher's events (see the module's guarantees).
    pub fn subscribe(&self) -> Subscription<K> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut subscribers = lock(&self.subscribers);
        if self.has_synced() {
            // Cannot fail: `rx` is right here.
            let _ = tx.send(Change::Listed(self.store.state().into()));
        }
        subscribers.queues.push(tx);
        Subscription::new(rx)
    }

    /// Every object whose `project`ion is new, changed or deleted ([`ChangeFilter`]), for a
    /// controller that reads only that part of each object (as a trigger for kube-runtime's
    /// `Controller::watches_shared_stream`).
    pub fn changed<P, F>(&self, project: F) -> impl Stream<Item = Arc<K>> + Send + 'static
    where
        P: PartialEq + Send + 'static,
        F: FnMut(&K) -> P + Send + 'static,
    {
        let mut filter = ChangeFilter::new(project);
        self.subscribe()
            .filter_map(move |e| futures::future::ready(filter.admit(e)))
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
    subscribers: Arc<Mutex<Subscribers<K>>>,
    /// The objects of the list in progress, from its `Init` to its `InitDone`.
    relisted: Option<HashSet<ObjectRef<K>>>,
    /// Set once the first list is complete (while the subscribers are locked).
    synced: watch::Sender<bool>,
}

impl<K: Cached> Feed<K> {
    fn apply(&mut self, mut event: watcher::Event<K>) {
        strip(&mut event);
        let mut subscribers = lock(&self.subscribers);
        match &event {
            watcher::Event::Init => self.relisted = Some(HashSet::new()),
            watcher::Event::InitApply(o) => {
                self.relisted
                    .get_or_insert_with(HashSet::new)
                    .insert(ObjectRef::from_obj(o));
            }
            watcher::Event::InitDone => {
                // What the relist lacks went away while the watch was down: say so first.
                let listed = self.relisted.take().unwrap_or_default();
                for gone in self.store.state() {
                    if !listed.contains(&ObjectRef::from_obj(gone.as_ref())) {
                        subscribers.send(&Change::Delete(gone));
                    }
                }
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
        }
        match &event {
            watcher::Event::Delete(o) => {
                tracing::debug!(kind = %K::kind(&()), name = %o.name_any(), "shared informer: deleted");
            }
            watcher::Event::Init | watcher::Event::InitDone => {
                tracing::debug!(kind = %K::kind(&()), ?event, "shared informer: list");
            }
            watcher::Event::Apply(_) | watcher::Event::InitApply(_) => {}
        }
        self.writer.apply_watcher_event(&event);
        let change = match event {
            watcher::Event::Apply(o) => {
                let cached = self.store.get(&ObjectRef::from_obj(&o));
                Change::Apply(cached.unwrap_or_else(|| Arc::new(o)))
            }
            watcher::Event::Delete(o) => Change::Delete(Arc::new(o)),
            watcher::Event::InitDone => {
                self.synced.send_replace(true);
                Change::Listed(self.store.state().into())
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
        subscribers.send(&change);
    }
}

/// Drops what no consumer reads: `managedFields`.
fn strip<K: Resource>(event: &mut watcher::Event<K>) {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => {
            strip_managed_fields(o);
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
            Some(Err(e)) => tracing::info!(
                kind = %K::kind(&()),
                error = %e,
                "shared informer: watch error (retrying)"
            ),
            None => return,
        }
    }
}

/// A lock that a panic elsewhere does not poison for good (the data stays consistent: every
/// critical section here completes or changes nothing).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
