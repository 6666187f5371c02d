//! Keeps the Node authorizer's [`Graph`] current: watches pods and persistent volumes through
//! an in-process client (as kube-apiserver feeds its graph from loopback informers).
//!
//! # Guarantees
//! - A re-list (after a watch is lost) replaces the recorded pods/volumes, so deletions missed
//!   while disconnected do not linger.
//! - Runs until `stop`; watch errors are retried with backoff, never fatal.

use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::graph::Graph;
use super::refs::{pod_refs, pv_claim};

/// Applies one pod watch event.
pub fn apply_pod(g: &mut Graph, ev: Event<Pod>) {
    let key = |p: &Pod| {
        (
            p.metadata.namespace.clone().unwrap_or_default(),
            p.metadata.name.clone().unwrap_or_default(),
        )
    };
    match ev {
        Event::Init => g.clear_pods(),
        Event::Apply(p) | Event::InitApply(p) => {
            let (ns, name) = key(&p);
            g.set_pod(&ns, &name, pod_refs(&p));
        }
        Event::Delete(p) => {
            let (ns, name) = key(&p);
            g.delete_pod(&ns, &name);
        }
        Event::InitDone => {}
    }
}

/// Applies one persistent volume watch event.
pub fn apply_pv(g: &mut Graph, ev: Event<PersistentVolume>) {
    match ev {
        Event::Init => g.clear_pvs(),
        Event::Apply(pv) | Event::InitApply(pv) => {
            g.set_pv(&pv.metadata.name.clone().unwrap_or_default(), pv_claim(&pv))
        }
        Event::Delete(pv) => g.set_pv(&pv.metadata.name.clone().unwrap_or_default(), None),
        Event::InitDone => {}
    }
}

/// Watches pods and PVs with `client` into `graph` until `stop`.
pub async fn run(client: kube::Client, graph: Arc<RwLock<Graph>>, stop: CancellationToken) {
    let pods = watcher::watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(|e| e.map(Ok));
    let pvs = watcher::watcher(
        Api::<PersistentVolume>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(|e| e.map(Err));
    let mut events = Box::pin(futures::stream::select(pods, pvs));
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            None => return,
            Some(Err(e)) => tracing::debug!(error = %e, "node authorizer graph watch"),
            Some(Ok(ev)) => {
                let mut g = graph.write().unwrap_or_else(|p| p.into_inner());
                match ev {
                    Ok(pod) => apply_pod(&mut g, pod),
                    Err(pv) => apply_pv(&mut g, pv),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::graph::Kind;
    use serde_json::json;

    fn pod(name: &str, node: &str, secret: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [{"name": "c"}],
                "volumes": [{"name": "v", "secret": {"secretName": secret}}]}}))
        .unwrap()
    }

    #[test]
    fn events_drive_the_graph_and_a_relist_replaces_it() {
        let mut g = Graph::default();
        apply_pod(&mut g, Event::Apply(pod("p1", "n1", "s1")));
        assert!(g.related("n1", Kind::Secret, "ns", "s1"));
        apply_pod(&mut g, Event::Apply(pod("p1", "n1", "s9")));
        assert!(!g.related("n1", Kind::Secret, "ns", "s1"));
        apply_pod(&mut g, Event::Init);
        apply_pod(&mut g, Event::InitApply(pod("p2", "n1", "s2")));
        apply_pod(&mut g, Event::InitDone);
        assert!(
            !g.related("n1", Kind::Secret, "ns", "s9"),
            "gone after relist"
        );
        assert!(g.related("n1", Kind::Secret, "ns", "s2"));
        apply_pod(&mut g, Event::Delete(pod("p2", "n1", "s2")));
        assert!(!g.related("n1", Kind::Secret, "ns", "s2"));
    }
}
