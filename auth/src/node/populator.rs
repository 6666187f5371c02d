//! Keeps the Node authorizer's [`Graph`] current: watches pods, persistent volumes, Ingresses
//! and IngressClasses through an in-process client (as kube-apiserver feeds its graph from
//! loopback informers).
//!
//! # Guarantees
//! - A re-list (after a watch is lost) replaces the recorded objects of that kind, so
//!   deletions missed while disconnected do not linger.
//! - Runs until `stop`; watch errors are retried with backoff, never fatal.

use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::graph::Graph;
use super::refs::{ingress_refs, pod_refs, pv_claim};

/// An object's namespace and name.
fn key(o: &impl kube::Resource) -> (String, String) {
    (
        o.meta().namespace.clone().unwrap_or_default(),
        o.meta().name.clone().unwrap_or_default(),
    )
}

/// Applies one pod watch event.
pub fn apply_pod(g: &mut Graph, ev: Event<Pod>) {
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

/// Applies one Ingress watch event.
pub fn apply_ingress(g: &mut Graph, ev: Event<Ingress>) {
    match ev {
        Event::Init => g.clear_ingresses(),
        Event::Apply(i) | Event::InitApply(i) => {
            let (ns, name) = key(&i);
            g.set_ingress(&ns, &name, Some(ingress_refs(&i)));
        }
        Event::Delete(i) => {
            let (ns, name) = key(&i);
            g.set_ingress(&ns, &name, None);
        }
        Event::InitDone => {}
    }
}

/// Applies one IngressClass watch event.
pub fn apply_ingress_class(g: &mut Graph, ev: Event<IngressClass>) {
    match ev {
        Event::Init => g.clear_ingress_classes(),
        Event::Apply(c) | Event::InitApply(c) => {
            g.set_ingress_class(&c.metadata.name.clone().unwrap_or_default(), Some(c))
        }
        Event::Delete(c) => g.set_ingress_class(&c.metadata.name.clone().unwrap_or_default(), None),
        Event::InitDone => {}
    }
}

/// One watch event, ready to be applied to the graph.
type Update = Box<dyn FnOnce(&mut Graph) + Send>;

/// Every `K` of the cluster, each event as the [`Update`] `apply` makes of it.
fn watch<K>(
    client: &kube::Client,
    apply: fn(&mut Graph, Event<K>),
) -> futures::stream::BoxStream<'static, Result<Update, watcher::Error>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(move |e| e.map(|ev| Box::new(move |g: &mut Graph| apply(g, ev)) as Update))
        .boxed()
}

/// Watches pods, PVs, Ingresses and IngressClasses with `client` into `graph` until `stop`.
pub async fn run(client: kube::Client, graph: Arc<RwLock<Graph>>, stop: CancellationToken) {
    let mut events = futures::stream::select_all([
        watch(&client, apply_pod),
        watch(&client, apply_pv),
        watch(&client, apply_ingress),
        watch(&client, apply_ingress_class),
    ]);
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            None => return,
            Some(Err(e)) => tracing::debug!(error = %e, "node authorizer graph watch"),
            Some(Ok(update)) => update(&mut graph.write().unwrap_or_else(|p| p.into_inner())),
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

    fn ingress(name: &str, secret: &str) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"tls": [{"secretName": secret}]}}))
        .unwrap()
    }

    #[test]
    fn ingress_events_drive_the_tls_secret_edges() {
        let mut g = Graph::default();
        let class = k3rs_apimachinery::ingress_class::ingress_class();
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
            Event::Apply(k3rs_apimachinery::ingress_class::ingress_class()),
        );
        apply_ingress(&mut g, Event::Delete(ingress("i2", "s3")));
        assert!(!g.related("n1", Kind::Secret, "ns", "s3"));
    }
}
