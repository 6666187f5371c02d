//! The loop both backends run: watch every Node (the agent's shared informer), and sync on change
//! (at most once per second), every 30 s (so what someone removed comes back) and 5 s after a
//! failed sync, once the first list is done.

use std::future::Future;
use std::time::Duration;

use k3rs_apimachinery::informers::Informer;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::proxy::sync::Pacer;
use crate::watches::{run_paced, snapshot, watch_all, Cluster, Keeper, Watches};

/// One sync of a backend against the Nodes.
pub trait NodeSync: Send {
    /// Brings the node in line with `nodes` once; `false` if anything failed (retried soon).
    fn sync(&mut self, client: &Client, nodes: Vec<Node>) -> impl Future<Output = bool> + Send;
}

/// A backend as a [`Keeper`] of the Node watch.
struct Nodes<S>(S);

impl<S: NodeSync> Keeper for Nodes<S> {
    type State = (Informer<Node>, Client);

    fn watch(&mut self, cluster: &Cluster) -> Watches<Self::State> {
        let (nodes, events) = watch_all::<Node>(&cluster.informers, 0);
        Watches {
            state: (nodes, cluster.client.clone()),
            events,
            count: 1,
        }
    }

    async fn sync(&mut self, (nodes, client): &Self::State) -> bool {
        self.0.sync(client, snapshot(nodes)).await
    }
}

/// Runs `backend` until `stop`, with the latest [`Cluster`] of `clusters`; `what` names it in
/// logs.
pub async fn run<S: NodeSync>(
    clusters: watch::Receiver<Cluster>,
    backend: S,
    what: &str,
    stop: CancellationToken,
) {
    let second = Duration::from_secs(1);
    let pacer = Pacer::new(second, Duration::from_secs(30), Duration::from_secs(5));
    run_paced(what, clusters, pacer, &stop, &mut Nodes(backend)).await;
    tracing::info!("{what} stopped");
}
