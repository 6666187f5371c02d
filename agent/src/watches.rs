//! The watch-then-sync loop the node's keepers share (the service proxy, the NetworkPolicy
//! enforcer, the pod network's backends; the cluster DNS uses the watches alone): their
//! watches are the agent's shared informers ([`Cluster::informers`], one watch and one cache
//! per resource type for the whole agent), whose events say which watch (re)listed, and
//! [`run_paced`] syncs once every watch has listed, as a [`Pacer`] schedules it, and starts
//! the watches again on the newest [`Cluster`] when the node's credentials rotate;
//! [`OncePerVersion`] keeps a keeper that re-plans often from reporting the same warning
//! about an object on every sync.

use std::collections::BTreeSet;
use std::future::Future;

use futures::stream::BoxStream;
use futures::StreamExt;
use k3rs_apimachinery::informers::{Cached, Informer, SharedInformerFactory};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use kube::Client;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::proxy::sync::Pacer;

/// The node's way to the cluster: its newest client and the shared informers that watch
/// through it (both renewed together when the node's certificate rotates).
#[derive(Clone)]
pub struct Cluster {
    /// The node's client.
    pub client: Client,
    /// The agent's informers, watching through `client`.
    pub informers: SharedInformerFactory,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

/// Publishes a [`Cluster`] for every client of `clients` (the first at once) until `stop`;
/// each client's informers stop when the next client comes.
pub fn clusters(
    mut clients: watch::Receiver<Client>,
    stop: CancellationToken,
) -> (watch::Receiver<Cluster>, impl Future<Output = ()> + Send) {
    let cluster = |client: Client, stop: CancellationToken| Cluster {
        informers: SharedInformerFactory::new(client.clone(), stop),
        client,
    };
    let mut current = stop.child_token();
    let (tx, rx) = watch::channel(cluster(
        clients.borrow_and_update().clone(),
        current.clone(),
    ));
    let follow = async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = clients.changed() => if changed.is_err() { return },
            }
            current.cancel();
            current = stop.child_token();
            tx.send_replace(cluster(
                clients.borrow_and_update().clone(),
                current.clone(),
            ));
        }
    };
    (rx, follow)
}

/// What one event of a keeper's watches meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Watch number `n` completed a (re)list.
    Listed(usize),
    /// Something changed.
    Changed,
}

/// The shared informer of every `K` (objects without `managedFields`), and its events as
/// [`Seen`] for watch number `n`: `Listed(n)` once its cache is complete, then per change.
/// Watch errors are the informer's to log and retry.
pub fn watch_all<K: Cached>(
    informers: &SharedInformerFactory,
    n: usize,
) -> (Informer<K>, BoxStream<'static, Seen>) {
    let informer = informers.informer::<K>();
    let events = informer.subscribe().filter_map(move |e| {
        futures::future::ready(match e {
            watcher::Event::InitDone => Some(Seen::Listed(n)),
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => Some(Seen::Changed),
            watcher::Event::Init | watcher::Event::InitApply(_) => None,
        })
    });
    (informer, events.boxed())
}

/// Every object `informer` holds now, as owned values.
pub fn snapshot<K: Cached>(informer: &Informer<K>) -> Vec<K> {
    informer.list().iter().map(|o| (**o).clone()).collect()
}

/// Which of `n` watches have listed since they started.
#[derive(Debug, Clone)]
pub struct Listed(Vec<bool>);

impl Listed {
    /// None of `n` watches listed yet.
    pub fn new(n: usize) -> Listed {
        Listed(vec![false; n])
    }

    /// Notes `seen` (a list or a changed object).
    pub fn note(&mut self, seen: &Seen) {
        if let Seen::Listed(n) = seen {
            if let Some(l) = self.0.get_mut(*n) {
                *l = true;
            }
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
    /// The informers (and anything else tied to the client) a sync reads.
    pub state: S,
    /// Every watch's events.
    pub events: BoxStream<'static, Seen>,
    /// How many watches there are.
    pub count: usize,
}

/// A keeper of node state (rules, routes) that follows some watched resources.
pub trait Keeper {
    /// What its syncs read, tied to one client (informers, an event recorder).
    type State;
    /// Subscribes to its watches of `cluster`.
    fn watch(&mut self, cluster: &Cluster) -> Watches<Self::State>;
    /// Brings the node in line with `state`; `false` when that failed (retried sooner).
    fn sync(&mut self, state: &Self::State) -> impl Future<Output = bool> + Send;
}

/// Runs `keeper` until `stop`: its watches are those of the newest [`Cluster`] of
/// `clusters`; once all have listed, it syncs when `pacer` says (after changes, at most once
/// per its minimum interval, and periodically), and again sooner after a failed sync.
/// `what` names it in logs.
pub async fn run_paced<K: Keeper>(
    what: &str,
    mut clusters: watch::Receiver<Cluster>,
    mut pacer: Pacer,
    stop: &CancellationToken,
    keeper: &mut K,
) {
    'clusters: loop {
        let cluster = clusters.borrow_and_update().clone();
        let Watches {
            state,
            mut events,
            count,
        } = keeper.watch(&cluster);
        let mut listed = Listed::new(count);
        loop {
            let due = pacer.due(Instant::now());
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = clusters.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    tracing::debug!("{what}: new credentials; watching again");
                    continue 'clusters;
                }
                ev = events.next() => match ev {
                    Some(seen) => {
                        listed.note(&seen);
                        pacer.changed();
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

/// The (object version, warning) pairs a keeper already reported (as a Warning Event and a
/// log line): each warning is reported once per version (uid and resourceVersion) of the
/// object it is about, not on every sync.
#[derive(Debug)]
pub struct OncePerVersion<W: Ord> {
    reported: BTreeSet<(String, W)>,
}

impl<W: Ord> Default for OncePerVersion<W> {
    fn default() -> Self {
        OncePerVersion {
            reported: BTreeSet::new(),
        }
    }
}

impl<W: Ord> OncePerVersion<W> {
    /// Whether `warning` about the object of `meta` is new for its version; remembers it.
    pub fn first(&mut self, meta: &ObjectMeta, warning: W) -> bool {
        let version = format!(
            "{}/{}",
            meta.uid.as_deref().unwrap_or_default(),
            meta.resource_version.as_deref().unwrap_or_default()
        );
        self.reported.insert((version, warning))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_wait_for_every_watch_to_list() {
        let mut l = Listed::new(2);
        assert!(!l.all());
        l.note(&Seen::Changed);
        l.note(&Seen::Listed(1));
        assert!(!l.all());
        l.note(&Seen::Listed(0));
        assert!(l.all());
        // A number past the watches is ignored rather than trusted.
        l.note(&Seen::Listed(7));
        assert!(l.all());
        assert!(Listed::new(0).all());
    }

    /// A client of a loopback port nothing serves (its watches fail and retry).
    fn unserved_client() -> Client {
        let url = "http://127.0.0.1:9".parse().unwrap();
        Client::try_from(kube::Config::new(url)).unwrap()
    }

    #[tokio::test]
    async fn a_rotated_client_brings_new_informers_and_stops_the_old_ones() {
        use k8s_openapi::api::core::v1::Node;
        use std::time::Duration;

        let (tx, rx) = watch::channel(unserved_client());
        let stop = CancellationToken::new();
        let (mut clusters, follow) = clusters(rx, stop.clone());
        let follow = tokio::spawn(follow);
        let old = clusters.borrow_and_update().informers.informer::<Node>();
        let short = Duration::from_millis(200);
        assert!(
            tokio::time::timeout(short, old.wait_synced())
                .await
                .is_err(),
            "a watch that cannot list keeps its informer waiting"
        );

        tx.send_replace(unserved_client());
        tokio::time::timeout(Duration::from_secs(5), clusters.changed())
            .await
            .expect("a new cluster for the new client")
            .unwrap();
        // The old informer's watch stopped: its waiters are let go, unsynced.
        tokio::time::timeout(Duration::from_secs(5), old.wait_synced())
            .await
            .expect("the old watch stopped");
        assert!(!old.has_synced());
        let new = clusters.borrow_and_update().informers.informer::<Node>();
        assert!(tokio::time::timeout(short, new.wait_synced())
            .await
            .is_err());

        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), follow)
            .await
            .expect("the follower ends with stop")
            .unwrap();
    }

    #[test]
    fn warnings_are_new_once_per_uid_and_resource_version() {
        let meta = |rv: &str| ObjectMeta {
            uid: Some("u".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        };
        let mut seen = OncePerVersion::default();
        assert!(seen.first(&meta("1"), "w"));
        assert!(!seen.first(&meta("1"), "w"));
        assert!(seen.first(&meta("1"), "other"));
        assert!(seen.first(&meta("2"), "w"));
    }
}
