//! The watch-then-sync loop the node's keepers share (the service proxy, the NetworkPolicy
//! enforcer, the pod network's backends; the cluster DNS uses the watches alone): cluster-wide reflectors
//! whose events say which watch (re)listed, and [`run_paced`], which syncs once every watch
//! has listed, as a [`Pacer`] schedules it, and starts the watches again with the newest
//! client when the node's credentials rotate.

use std::future::Future;

use futures::stream::BoxStream;
use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::proxy::sync::Pacer;

/// What one event of a keeper's watches meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Watch number `n` completed a (re)list.
    Listed(usize),
    /// Something changed.
    Changed,
    /// A watch failed (it retries with backoff).
    Error(String),
}

/// A cluster-wide reflector of `K` whose objects pass through `modify` before they are
/// cached (e.g. `strip_managed_fields`), and its events as [`Seen`] for watch number `n`.
pub fn watch_all<K>(
    client: &Client,
    n: usize,
    modify: fn(&mut K),
) -> (Store<K>, BoxStream<'static, Seen>)
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
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()).modify(modify),
    )
    .default_backoff()
    .map(move |e| match e {
        Ok(watcher::Event::InitDone) => Seen::Listed(n),
        Ok(_) => Seen::Changed,
        Err(e) => Seen::Error(e.to_string()),
    });
    (store, events.boxed())
}

/// Leaves cached objects as they came.
pub fn keep<K>(_: &mut K) {}

/// Which of `n` watches have listed since they started.
#[derive(Debug, Clone)]
pub struct Listed(Vec<bool>);

impl Listed {
    /// None of `n` watches listed yet.
    pub fn new(n: usize) -> Listed {
        Listed(vec![false; n])
    }

    /// Notes `seen`; returns whether it changed something (a list or an object).
    pub fn note(&mut self, seen: &Seen) -> bool {
        match seen {
            Seen::Listed(n) => {
                if let Some(l) = self.0.get_mut(*n) {
                    *l = true;
                }
                true
            }
            Seen::Changed => true,
            Seen::Error(_) => false,
        }
    }

    /// Whether every watch has listed.
    pub fn all(&self) -> bool {
        self.0.iter().all(|l| *l)
    }
}

/// A keeper's watches for one client: what its syncs read, the merged events, and how many
/// watches feed them (numbered from 0 in their [`Seen::Listed`]).
pub struct Watches<S> {
    /// The stores (and anything else tied to the client) a sync reads.
    pub state: S,
    /// Every watch's events.
    pub events: BoxStream<'static, Seen>,
    /// How many watches there are.
    pub count: usize,
}

/// A keeper of node state (rules, routes) that follows some watched resources.
pub trait Keeper {
    /// What its syncs read, tied to one client (stores, an event recorder).
    type State;
    /// Starts its watches with `client`.
    fn watch(&mut self, client: &Client) -> Watches<Self::State>;
    /// Brings the node in line with `state`; `false` when that failed (retried sooner).
    fn sync(&mut self, state: &Self::State) -> impl Future<Output = bool> + Send;
}

/// Runs `keeper` until `stop`: its watches start with the newest client of `clients`; once
/// all have listed, it syncs when `pacer` says (after changes, at most once per its minimum
/// interval, and periodically), and again sooner after a failed sync. `what` names it in
/// logs.
pub async fn run_paced<K: Keeper>(
    what: &str,
    mut clients: watch::Receiver<Client>,
    mut pacer: Pacer,
    stop: &CancellationToken,
    keeper: &mut K,
) {
    'clients: loop {
        let client = clients.borrow_and_update().clone();
        let Watches {
            state,
            mut events,
            count,
        } = keeper.watch(&client);
        let mut listed = Listed::new(count);
        loop {
            let due = pacer.due(Instant::now());
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = clients.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue 'clients;
                }
                ev = events.next() => match ev {
                    Some(Seen::Error(e)) => tracing::warn!(error = %e, "{what}: watch failed"),
                    Some(seen) => {
                        if listed.note(&seen) {
                            pacer.changed();
                        }
                    }
                    None => return,
                },
                _ = tokio::time::sleep_until(due), if listed.all() => {
                    let ok = keeper.sync(&state).await;
                    pacer.synced(Instant::now(), ok);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_wait_for_every_watch_to_list() {
        let mut l = Listed::new(2);
        assert!(!l.all());
        assert!(l.note(&Seen::Changed));
        assert!(l.note(&Seen::Listed(1)));
        assert!(!l.all());
        assert!(!l.note(&Seen::Error("gone".into())));
        assert!(l.note(&Seen::Listed(0)));
        assert!(l.all());
        // A number past the watches is ignored rather than trusted.
        assert!(l.note(&Seen::Listed(7)));
        assert!(Listed::new(0).all());
    }
}
