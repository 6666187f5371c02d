//! Keeps the Node authorizer's [`Graph`] current: follows pods, persistent volumes, Ingresses
//! and IngressClasses through the process's shared informers (as kube-apiserver feeds its
//! graph from its loopback informer factory), so the graph costs no watch of its own.
//!
//! # Guarantees
//! - A re-list (after a watch is lost) replaces the recorded objects of that kind, so
//!   deletions missed while disconnected do not linger.
//! - Runs until `stop`; watch errors are the informers' (retried with backoff), never fatal.

use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::watcher::Event;
use tokio_util::sync::CancellationToken;

use super::graph::Graph;
use super::refs::{ingress_refs, pod_refs, pv_claim};
use k3rs_apimachinery::informers::{Cached, SharedInformerFactory};

/// An object's namespace and name.
fn key(o: &impl kube::Resource) -> (String, String) {
    (
        o.meta().namespace.clone().unwrap_or_default(),
        o.meta().name.clone().unwrap_or_default(),
    )
}

/// Applies one pod watch event.
pub fn apply_pod(g: &mut Graph, ev: Event<Arc<Pod>>) {
    match ev {
        Event::Init => g.clear_pods(),
        Event::Apply(p) | Event::InitApply(p) => {
            let (ns, name) = key(p.as_ref());
            g.set_pod(&ns, &name, pod_refs(&p));
        }
        Event::Delete(p) => {
            let (ns, name) = key(p.as_ref());
            g.delete_pod(&ns, &name);
        }
        Event::InitDone => {}
    }
}

/// Applies one persistent volume watch event.
pub fn apply_pv(g: &mut Graph, ev: Event<Arc<PersistentVolume>>) {
    match ev {
        Event::Init => g.clear_pvs(),
        Event::Apply(pv) | Event::InitApply(pv) => {
            g.set_pv(&pv.metadata.name.clone().unwrap_or_default(), pv_claim(&pv))
        }
        Event::Delete(pv) => g.set_pv(&pv.metadata.name.clone().unwrap_or_default(), None),
        Event::InitDone => {}
    }
}

/// Applies one Ingress watch event.
pub fn apply_ingress(g: &mut Graph, ev: Event<Arc<Ingress>>) {
    match ev {
        Event::Init => g.clear_ingresses(),
        Event::Apply(i) | Event::InitApply(i) => {
            let (ns, name) = key(i.as_ref());
            g.set_ingress(&ns, &name, Some(ingress_refs(&i)));
        }
        Event::Delete(i) => {
            let (ns, name) = key(i.as_ref());
            g.set_ingress(&ns, &name, None);
        }
        Event::InitDone => {}
    }
}

/// Applies one IngressClass watch event.
pub fn apply_ingress_class(g: &mut Graph, ev: Event<Arc<IngressClass>>) {
    match ev {
        Event::Init => g.clear_ingress_classes(),
        Event::Apply(c) | Event::InitApply(c) => g.set_ingress_class(
            &c.metadata.name.clone().unwrap_or_default(),
            Some(Arc::unwrap_or_clone(c)),
        ),
        Event::Delete(c) => g.set_ingress_class(&c.metadata.name.clone().unwrap_or_default(), None),
        Event::InitDone => {}
    }
}

/// One informer event, ready to be applied to the graph.
type Update = Box<dyn FnOnce(&mut Graph) + Send>;

/// Every `K` of the cluster, each event of the shared informer as the [`Update`] `apply`
/// makes of it.
fn follow<K: Cached>(
    informers: &SharedInformerFactory,
    apply: fn(&mut Graph, Event<Arc<K>>),
) -> futures::stream::BoxStream<'static, Update> {
    informers
        .informer::<K>()
        .subscribe()
        .map(move |ev| Box::new(move |g: &mut Graph| apply(g, ev)) as Update)
        .boxed()
}

/// Follows pods, PVs, Ingresses and IngressClasses of `informers` into `graph` until `stop`.
pub async fn run(
    informers: SharedInformerFactory,
    graph: Arc<RwLock<Graph>>,
    stop: CancellationToken,
) {
    let mut events = futures::stream::select_all([
        follow(&informers, apply_pod),
        follow(&informers, apply_pv),
        follow(&informers, apply_ingress),
        follow(&informers, apply_ingress_class),
    ]);
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            None => return,
            Some(update) => update(&mut graph.write().unwrap_or_else(|p| p.into_inner())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::graph::Kind;
    use serde_json::json;

    fn pod(name: &str, node: &str, secret: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [{"name": "c"}],
                "volumes": [{"name": "v", "secret": {"secretName": secret}}]}}))
            .unwrap(),
        )
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

    fn ingress(name: &str, secret: &str) -> Arc<Ingress> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"tls": [{"secretName": secret}]}}))
            .unwrap(),
        )
    }

    #[test]
    fn ingress_events_drive_the_tls_secret_edges() {
        let mut g = Graph::default();
        let class = Arc::new(k3rs_apimachinery::ingress_class::ingress_class());
        apply_ingress_class(&mut g, Event::Apply(class.clone()));
        apply_ingress(&mut g, Event::Apply(ingress("i1", "s1")));
        assert!(g.related("n1", Kind::Secret, "ns", "s1"));
        apply_ingress(&mut g, Event::Apply(ingress("i1", "s2")));
        assert!(!g.related("n1", Kind::Secret, "ns", "s1"));
        assert!(g.related("n1", Kind::Secret, "ns", "s2"));
        apply_ingress(&mut g, Event::Init);
        apply_ingress(&mut g, Event::InitApply(ingress("i2", "s3")));
        apply_ingress(&mut g, Event::InitDone);
        assert!(
            !g.related("n1", Kind::Secret, "ns", "s2"),
            "gone after relist"
        );
        assert!(g.related("n1", Kind::Secret, "ns", "s3"));
        apply_ingress_class(&mut g, Event::Delete(class));
        assert!(
            !g.related("n1", Kind::Secret, "ns", "s3"),
            "no default class"
        );
        apply_ingress_class(
            &mut g,
            Event::Apply(Arc::new(k3rs_apimachinery::ingress_class::ingress_class())),
        );
        apply_ingress(&mut g, Event::Delete(ingress("i2", "s3")));
        assert!(!g.related("n1", Kind::Secret, "ns", "s3"));
    }
}
