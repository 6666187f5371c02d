//! One subscriber's view of an informer: its queue of the informer's changes as a watcher's
//! event stream, each complete list given as `Init`, `InitApply`…, `InitDone`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use kube::runtime::watcher::Event;
use tokio::sync::mpsc;

use super::{Cached, Change};

/// The events of one subscriber (see the [module](super)'s guarantees).
pub struct Subscription<K: Cached> {
    /// The rest of a complete list being given.
    listing: VecDeque<Event<Arc<K>>>,
    changes: mpsc::UnboundedReceiver<Change<K>>,
}

impl<K: Cached> Subscription<K> {
    pub(super) fn new(changes: mpsc::UnboundedReceiver<Change<K>>) -> Self {
        Subscription {
            listing: VecDeque::new(),
            changes,
        }
    }
}

impl<K: Cached> Stream for Subscription<K> {
    type Item = Event<Arc<K>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(e) = self.listing.pop_front() {
            return Poll::Ready(Some(e));
        }
        let change = match self.changes.poll_recv(cx) {
            Poll::Ready(Some(c)) => c,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        Poll::Ready(Some(match change {
            Change::Apply(o) => Event::Apply(o),
            Change::Delete(o) => Event::Delete(o),
            Change::Listed(objects) => {
                self.listing = objects.iter().cloned().map(Event::InitApply).collect();
                self.listing.push_back(Event::InitDone);
                Event::Init
            }
        }))
    }
}
