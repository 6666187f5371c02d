//! One subscriber's view of an informer: a watcher's event stream made of the informer's
//! changes, with a complete list from the cache first and after each relist or lag.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;
use tokio::sync::broadcast;

use super::{ready, Cached, Change};

/// The events of one subscriber (see the [module](super)'s guarantees).
pub struct Subscription<K: Cached>(BoxStream<'static, Event<Arc<K>>>);

/// Where a subscriber is: events queued for it, and the changes still to come.
struct State<K: Cached> {
    queued: VecDeque<Event<Arc<K>>>,
    changes: broadcast::Receiver<Change<K>>,
    store: Store<K>,
}

impl<K: Cached> Subscription<K> {
    /// Subscribed to `changes` before looking at `store`: a list that completes in between
    /// is given twice rather than missed.
    pub(super) fn new(changes: broadcast::Receiver<Change<K>>, store: Store<K>) -> Self {
        let queued = if ready(&store) {
            listed(&store)
        } else {
            VecDeque::new()
        };
        let state = State {
            queued,
            changes,
            store,
        };
        Subscription(futures::stream::unfold(state, next).boxed())
    }
}

impl<K: Cached> Stream for Subscription<K> {
    type Item = Event<Arc<K>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_next_unpin(cx)
    }
}

/// The complete list of what `store` holds, as a watcher's relist.
fn listed<K: Cached>(store: &Store<K>) -> VecDeque<Event<Arc<K>>> {
    let mut events: VecDeque<_> = store.state().into_iter().map(Event::InitApply).collect();
    events.push_front(Event::Init);
    events.push_back(Event::InitDone);
    events
}

async fn next<K: Cached>(mut s: State<K>) -> Option<(Event<Arc<K>>, State<K>)> {
    loop {
        if let Some(e) = s.queued.pop_front() {
            return Some((e, s));
        }
        match s.changes.recv().await {
            Ok(Change::Apply(o)) => return Some((Event::Apply(o), s)),
            Ok(Change::Delete(o)) => return Some((Event::Delete(o), s)),
            Ok(Change::Listed) | Err(broadcast::error::RecvError::Lagged(_)) => {
                s.queued = listed(&s.store);
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}
