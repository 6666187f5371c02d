//! The server side of the built-in ingress controller (`ingress`; off with k3s's
//! `--disable traefik` or `--disable ingress`): creates the default IngressClass `k3rs`
//! (unless it exists) and keeps `status.loadBalancer.ingress` of the Ingresses it serves at
//! the nodes' addresses ([`plan`]). It is the only writer of that status: the agents, which
//! route the traffic on every node, never write it. A node or IngressClass change re-checks
//! every Ingress.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use k3rs_apimachinery::ingress_class;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::backoff::ErrorBackoff;
use crate::servicelb::plan::node_addresses;
use crate::{informer, SharedInformerFactory};

/// The `--controllers` name.
pub const CONTROLLER: &str = "ingress";
/// The controller's identity (`kube-system/ingress-controller`).
pub const NAME: &str = "ingress-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the node or IngressClass cache is not ready")]
    CachesNotReady,
    #[error("updating the status of ingress {0}")]
    Patch(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
    nodes: Store<Node>,
    classes: Store<IngressClass>,
}

/// Creates the `k3rs` IngressClass unless one of that name exists (a user's edits to it, and
/// its removal of the default annotation, are kept).
async fn install_class(client: &Client) -> kube::Result<()> {
    let api: Api<IngressClass> = Api::all(client.clone());
    if api.get_opt(ingress_class::CLASS).await?.is_some() {
        return Ok(());
    }
    match api
        .create(&PostParams::default(), &ingress_class::ingress_class())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        r => r.map(|_| ()),
    }
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let install = async {
        while let Err(e) = install_class(&client).await {
            tracing::debug!(error = %e, "ingress: installing the IngressClass (retrying)");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        _ = stop.cancelled() => return,
        () = install => {}
    }
    let backoff = ErrorBackoff::new("ingress");
    let nodes = informer::<Node>(&informers).await;
    let classes = informer::<IngressClass>(&informers).await;
    let controller = super::shared_controller::<Ingress>(&informers).await;
    let ingresses = controller.store();
    let all = move || {
        ingresses
            .state()
            .iter()
            .map(|i| ObjectRef::from_obj(&**i))
            .collect::<Vec<_>>()
    };
    let all_again = all.clone();
    let ctx = Arc::new(Ctx {
        client,
        nodes,
        classes,
    });
    backoff
        .drive(
            controller
                .watches_shared_stream(informers.informer::<Node>().touched(), move |_| all())
                .watches_shared_stream(informers.informer::<IngressClass>().touched(), move |_| {
                    all_again()
                }),
            reconcile,
            ctx,
            stop,
        )
        .await;
}

async fn reconcile(ing: Arc<Ingress>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ctx.nodes.wait_until_ready().await.is_err() || ctx.classes.wait_until_ready().await.is_err()
    {
        return Err(Error::CachesNotReady);
    }
    let addresses = node_addresses(ctx.nodes.state().iter().map(|n| &**n));
    let classes: Vec<IngressClass> = ctx.classes.state().iter().map(|c| (**c).clone()).collect();
    let Some(ips) = plan::desired(&ing, &classes, &addresses) else {
        return Ok(Action::await_change());
    };
    let ns = ing.metadata.namespace.clone().unwrap_or_default();
    let name = ing.metadata.name.clone().unwrap_or_default();
    let entries: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    let entries = if entries.is_empty() {
        serde_json::Value::Null
    } else {
        json!(entries)
    };
    let patch = json!({"status": {"loadBalancer": {"ingress": entries}}});
    tracing::info!(ingress = %format!("{ns}/{name}"), addresses = ?ips, "ingress: setting load-balancer status");
    Api::<Ingress>::namespaced(ctx.client.clone(), &ns)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::Patch(format!("{ns}/{name}"), e))?;
    Ok(Action::await_change())
}
