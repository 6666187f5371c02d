//! Watching every object of a kind for a node-side sync loop (the NetworkPolicy enforcer, the
//! ingress controller): a reflector [`Store`] plus a stream saying when the watch (re)listed
//! or something changed, so the loop can wait for every store's first list before acting.

use futures::StreamExt;
use k3rs_apimachinery::transform::strip_managed_fields;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

/// Which watch an event came from (the `which` given to [`watch_all`]), and whether it
/// completed a (re)list.
pub enum Seen {
    Listed(usize),
    Changed,
    Error(String),
}

fn seen<K>(ev: Result<watcher::Event<K>, watcher::Error>, which: usize) -> Seen {
    match ev {
        Ok(watcher::Event::InitDone) => Seen::Listed(which),
        Ok(_) => Seen::Changed,
        Err(e) => Seen::Error(e.to_string()),
    }
}

/// A reflector store of every `K` in the cluster and its events, tagged `which`.
pub fn watch_all<K>(
    client: &Client,
    which: usize,
) -> (Store<K>, impl futures::Stream<Item = Seen> + Send)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let events = reflector::reflector(
        writer,
        // Whole-cluster caches: without managedFields, as the controllers'.
        watcher(Api::<K>::all(client.clone()), watcher::Config::default())
            .modify(strip_managed_fields),
    )
    .default_backoff()
    .map(move |e| seen(e, which));
    (store, events)
}
