//! The service load-balancer controller (`servicelb`, like k3s's; service account
//! `service-controller`, upstream's for this job): Services of type LoadBalancer get
//! `status.loadBalancer.ingress` = the addresses of the Ready nodes ([`plan`]), which the
//! agents' proxies then capture on every node. A change in a node's readiness or address
//! re-checks every LoadBalancer Service.

pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{informer, SharedInformerFactory};

/// The `--controllers` name (k3s's).
pub const CONTROLLER: &str = "servicelb";
/// The controller's service account in kube-system (upstream's service controller's).
pub const NAME: &str = "service-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the node cache is not ready")]
    NodesNotReady,
    #[error("updating the status of service {0}: {1}")]
    Patch(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
    nodes: Store<Node>,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("servicelb");
    let nodes = informer::<Node>(&informers).await;
    let controller = super::shared_controller::<Service>(&informers).await;
    let services = controller.store();
    let ctx = Arc::new(Ctx { client, nodes });
    let nodes_changed = informers.informer::<Node>().changed(plan::lb_address);
    backoff
        .drive(
            // Only a change in what it reads of a node (not every heartbeat of every node).
            controller.watches_shared_stream(nodes_changed, move |_| {
                services
                    .state()
                    .iter()
                    .filter(|s| {
                        s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
                    })
                    .map(|s| ObjectRef::from_obj(&**s))
                    .collect::<Vec<_>>()
            }),
            reconcile,
            ctx,
            stop,
        )
        .await;
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ctx.nodes.wait_until_ready().await.is_err() {
        return Err(Error::NodesNotReady);
    }
    let nodes = ctx.nodes.state();
    let addresses = plan::node_addresses(nodes.iter().map(|n| &**n));
    let Some(ips) = plan::desired(&svc, &addresses) else {
        return Ok(Action::await_change());
    };
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let ingress: Vec<_> = ips
        .iter()
        .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
        .collect();
    let ingress = if ingress.is_empty() {
        serde_json::Value::Null
    } else {
        json!(ingress)
    };
    let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
    tracing::info!(service = %format!("{ns}/{name}"), ingress = ?ips, "servicelb: setting load-balancer ingress");
    Api::<Service>::namespaced(ctx.client.clone(), &ns)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::Patch(format!("{ns}/{name}"), e))?;
    Ok(Action::await_change())
}
