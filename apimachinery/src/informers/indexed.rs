//! Indexes an informer keeps of its cache (client-go's `AddIndexers`): the pods of each
//! controller, the ranges the nodes hold. One index of each type per informer, shared by
//! every reader in the process.
//!
//! # Guarantees
//! - The feed applies each change to every index before it queues the change for any
//!   subscriber, so whatever a change triggers reads an index at least that new.
//! - An index sees what a subscriber sees: a complete list (`Init`, `InitApply`…, `InitDone`)
//!   when it is made on a synced informer and at every (re)list, then `Apply`/`Delete` per
//!   change, in the cache's order.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, PoisonError};

use kube::runtime::watcher::Event;

use super::{lock, Cached, Change, Informer};

/// A view kept from an informer's events.
pub trait Indexer<K>: Default + Send + 'static {
    /// Applies one event (in the informer's order).
    fn apply(&mut self, event: Event<Arc<K>>);
}

/// An index shared by its feed and its readers.
pub type Shared<I> = Arc<Mutex<I>>;

/// Reads the index (a poisoned lock is still read: an index is whole after every `apply`).
pub fn read<I, T>(view: &Shared<I>, f: impl FnOnce(&I) -> T) -> T {
    f(&view.lock().unwrap_or_else(PoisonError::into_inner))
}

/// How the feed applies a change to one index.
type ApplyChange<K> = Box<dyn Fn(&Change<K>) + Send + Sync>;

/// One index as the feed holds it: the shared index (for finding it by type) and how to apply
/// a change to it.
pub(super) struct Index<K> {
    type_id: TypeId,
    shared: Box<dyn Any + Send + Sync>,
    apply: ApplyChange<K>,
}

impl<K> Index<K> {
    /// Applies `change` to the index.
    pub(super) fn apply(&self, change: &Change<K>) {
        (self.apply)(change)
    }
}

/// Applies `change` to `view` as the events a subscriber would get for it.
fn feed<K, I: Indexer<K>>(view: &Shared<I>, change: &Change<K>) {
    let mut view = view.lock().unwrap_or_else(PoisonError::into_inner);
    match change {
        Change::Apply(o) => view.apply(Event::Apply(o.clone())),
        Change::Delete(o) => view.apply(Event::Delete(o.clone())),
        Change::Listed(objects) => {
            view.apply(Event::Init);
            for o in objects.iter() {
                view.apply(Event::InitApply(o.clone()));
            }
            view.apply(Event::InitDone);
        }
    }
}

impl<K: Cached> Informer<K> {
    /// The informer's index of type `I`, made on first use (see the module's guarantees);
    /// returns once the informer's first list is in it (or the informer stopped).
    pub async fn index<I: Indexer<K>>(&self) -> Shared<I> {
        let view = {
            let mut subscribers = lock(&self.subscribers);
            let found = (subscribers.indexes.iter())
                .find(|i| i.type_id == TypeId::of::<I>())
                .and_then(|i| i.shared.downcast_ref::<Shared<I>>())
                .cloned();
            match found {
                Some(view) => view,
                None => {
                    let view: Shared<I> = Arc::default();
                    if self.has_synced() {
                        feed(&view, &Change::Listed(self.store.state().into()));
                    }
                    let fed = view.clone();
                    subscribers.indexes.push(Index {
                        type_id: TypeId::of::<I>(),
                        shared: Box::new(view.clone()),
                        apply: Box::new(move |change| feed(&fed, change)),
                    });
                    view
                }
            }
        };
        self.wait_synced().await;
        view
    }
}
