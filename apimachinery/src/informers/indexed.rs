//! Views a consumer keeps of an informer's cache from its events (client-go's indexers, kept
//! by the consumer): the pods of each controller, the ranges the nodes hold. The events that
//! built a view are passed on only once applied to it, so whatever they trigger reads a view
//! at least that new.

use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt};
use kube::runtime::watcher::Event;

use super::{Cached, Informer};

/// A view kept from an informer's events.
pub trait Indexer<K>: Send + 'static {
    /// Applies one event (in the informer's order); the object it touches, if any, to pass on.
    fn apply(&mut self, event: Event<Arc<K>>) -> Option<Arc<K>>;
}

/// A view shared by its feed and its readers.
pub type Shared<I> = Arc<Mutex<I>>;

/// Reads the view (a poisoned lock is still read: a view is whole after every `apply`).
pub fn read<I, T>(view: &Shared<I>, f: impl FnOnce(&I) -> T) -> T {
    f(&view.lock().unwrap_or_else(PoisonError::into_inner))
}

fn apply<K, I: Indexer<K>>(view: &Shared<I>, event: Event<Arc<K>>) -> Option<Arc<K>> {
    (view.lock().unwrap_or_else(PoisonError::into_inner)).apply(event)
}

impl<K: Cached> Informer<K> {
    /// `view` filled with the informer's first complete list (returns once it is), and the
    /// stream of the objects each later change touches, each applied to `view` before it is
    /// passed on (triggers for kube-runtime's `Controller::*_shared_stream`). If the informer
    /// stops first, the view is returned as it is and the stream ends.
    pub async fn indexed<I: Indexer<K>>(
        &self,
        view: I,
    ) -> (Shared<I>, impl Stream<Item = Arc<K>> + Send + 'static) {
        let mut events = self.subscribe();
        self.wait_synced().await;
        let view = Arc::new(Mutex::new(view));
        // Once synced, the first complete list is queued first (see `subscribe`).
        while let Some(e) = events.next().await {
            let done = matches!(e, Event::InitDone);
            apply(&view, e);
            if done {
                break;
            }
        }
        let feed = view.clone();
        let touched = events.filter_map(move |e| futures::future::ready(apply(&feed, e)));
        (view, touched)
    }
}
