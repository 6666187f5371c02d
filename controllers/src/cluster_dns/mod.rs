//! The cluster DNS endpoints controller (k3rs's own, `--controllers` name `cluster-dns`,
//! service account `cluster-dns-controller`): the selector-less `kube-system/kube-dns`
//! Service, which the server creates at the cluster DNS address, gets EndpointSlices and an
//! Endpoints object listing the Ready nodes whose agents answer DNS ([`plan`]), so pods reach
//! an agent's embedded DNS server through the service proxy. A change in whether or where a
//! node answers DNS re-checks them;
//! slices of a port no node uses any more are deleted.

pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::Client;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{informer, SharedInformerFactory};

/// The `--controllers` name.
pub const CONTROLLER: &str = "cluster-dns";
/// The controller's service account in kube-system.
pub const NAME: &str = "cluster-dns-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the node cache is not ready")]
    NodesNotReady,
    #[error("writing {0}: {1}")]
    Write(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
    nodes: Store<Node>,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("cluster_dns");
    let nodes = informer::<Node>(&informers).await;
    let kube_dns = || vec![ObjectRef::<Service>::new(plan::SERVICE).within(plan::NAMESPACE)];
    // The shared Service informer, triggering on `kube-system/kube-dns` only (as a watch of
    // that one name would).
    let services = informers.informer::<Service>();
    let is_kube_dns = |s: &Service| {
        s.metadata.namespace.as_deref() == Some(plan::NAMESPACE)
            && s.metadata.name.as_deref() == Some(plan::SERVICE)
    };
    let touched = (services.touched()).filter(move |s| futures::future::ready(is_kube_dns(s)));
    let controller = Controller::for_shared_stream(touched, services.synced_store().await);
    let managed = watcher::Config::default().labels(&format!(
        "endpointslice.kubernetes.io/managed-by={}",
        plan::MANAGED_BY
    ));
    let ctx = Arc::new(Ctx { client, nodes });
    backoff
        .drive(
            controller
                // Only a change in what it reads of a node (not every heartbeat of every node).
                .watches_shared_stream(
                    informers.informer::<Node>().changed(plan::answering),
                    move |_| kube_dns(),
                )
                // Its own watch, on purpose: of the EndpointSlices only its own few (no one else in
                // the process caches EndpointSlices).
                .watches(
                    Api::<EndpointSlice>::namespaced(ctx.client.clone(), plan::NAMESPACE),
                    managed,
                    move |_| kube_dns(),
                ),
            reconcile,
            ctx,
            stop,
        )
        .await;
}

fn write(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |e| Error::Write(what.to_string(), e)
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ctx.nodes.wait_until_ready().await.is_err() {
        return Err(Error::NodesNotReady);
    }
    let nodes = ctx.nodes.state();
    let by_port = plan::desired(nodes.iter().map(|n| &**n));
    let owner = json!({"apiVersion": "v1", "kind": "Service", "name": plan::SERVICE,
        "uid": svc.metadata.uid, "controller": true, "blockOwnerDeletion": true});
    let pp = PatchParams::apply(NAME).force();
    let slices = Api::<EndpointSlice>::namespaced(ctx.client.clone(), plan::NAMESPACE);
    for (port, dns_nodes) in &by_port {
        let name = plan::slice_name(*port);
        let body = plan::slice(*port, dns_nodes, &owner);
        slices
            .patch(&name, &pp, &Patch::Apply(&body))
            .await
            .map_err(write(&name))?;
    }
    let lp = ListParams::default().labels(&format!(
        "endpointslice.kubernetes.io/managed-by={}",
        plan::MANAGED_BY
    ));
    let existing = slices.list(&lp).await.map_err(write("endpointslices"))?;
    for s in existing.items {
        let name = s.metadata.name.unwrap_or_default();
        if !by_port.keys().any(|p| plan::slice_name(*p) == name) {
            match slices.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::Write(name, e)),
            }
        }
    }
    let eps = plan::endpoints(&by_port);
    Api::<Endpoints>::namespaced(ctx.client.clone(), plan::NAMESPACE)
        .patch(plan::SERVICE, &pp, &Patch::Apply(&eps))
        .await
        .map_err(write("endpoints"))?;
    let ips: Vec<_> = by_port
        .values()
        .flatten()
        .map(|n| n.ip.to_string())
        .collect();
    tracing::debug!(?ips, "cluster-dns: kube-dns endpoints written");
    Ok(Action::await_change())
}
