//! The loop both backends run: watch every Node (with the latest client), and sync on change
//! (at most once per second), every 30 s (so what someone removed comes back) and 5 s after a
//! failed sync, once the first list is done.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::proxy::sync::Pacer;

/// One sync of a backend against the Nodes.
pub trait NodeSync: Send {
    /// Brings the node in line with `nodes` once; `false` if anything failed (retried soon).
    fn sync(&mut self, client: &Client, nodes: Vec<Node>) -> impl Future<Output = bool> + Send;
}

fn snapshot(store: &Store<Node>) -> Vec<Node> {
    store.state().iter().map(|n| (**n).clone()).collect()
}

/// Runs `backend` until `stop`, with the latest client of `clients`; `what` names it in logs.
pub async fn run<S: NodeSync>(
    mut clients: watch::Receiver<Client>,
    mut backend: S,
    what: &str,
    stop: CancellationToken,
) {
    let second = Duration::from_secs(1);
    let mut pacer = Pacer::new(second, Duration::from_secs(30), Duration::from_secs(5));
    'clients: loop {
        let client = clients.borrow_and_update().clone();
        let (nodes, writer) = reflector::store::<Node>();
        let events = reflector::reflector(
            writer,
            watcher(Api::<Node>::all(client.clone()), Default::default()),
        )
        .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut listed = false;
        loop {
            let due = pacer.due(Instant::now());
            tokio::select! {
                _ = stop.cancelled() => break 'clients,
                changed = clients.changed() => {
                    if changed.is_err() {
                        break 'clients;
                    }
                    continue 'clients;
                }
                ev = events.next() => match ev {
                    Some(Ok(watcher::Event::InitDone)) => { listed = true; pacer.changed(); }
                    Some(Ok(_)) => pacer.changed(),
                    Some(Err(e)) => tracing::warn!(error = %e, "{what}: node watch failed"),
                    None => break 'clients,
                },
                _ = tokio::time::sleep_until(due), if listed => {
                    let ok = backend.sync(&client, snapshot(&nodes)).await;
                    pacer.synced(Instant::now(), ok);
                }
            }
        }
    }
    tracing::info!("{what} stopped");
}
