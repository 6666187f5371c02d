//! The EndpointSlice controller (`endpointslice-controller`): every Service with a selector
//! gets `discovery.k8s.io/v1` EndpointSlices (labelled with the service name and this
//! manager, owned by the Service so that the garbage collector removes them with it) as
//! [`slices::plan`] decides.

pub mod slices;

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::Client;
use tokio_util::sync::CancellationToken;

use super::endpoints::{selected_pods, selector, services_of_namespace};
use slices::SliceOp;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "endpointslice-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the pods of service {0}: {1}")]
    ListPods(String, #[source] kube::Error),
    #[error("listing the endpoint slices of service {0}: {1}")]
    ListSlices(String, #[source] kube::Error),
    #[error("writing an endpoint slice of service {0}: {1}")]
    Write(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("endpointslice");
    let controller = super::shared_controller::<Service>(&informers).await;
    let by_namespace = services_of_namespace(controller.store());
    let managed = format!("{}={}", slices::MANAGED_BY_LABEL, slices::MANAGED_BY);
    backoff
        .drive(
            controller
                .watches_shared_stream(informers.informer::<Pod>().touched(), by_namespace)
                // Its own watch, on purpose: no one else in the process reads EndpointSlices, and a
                // shared informer would cache them all just to notice one being changed or deleted.
                .owns(
                    Api::<EndpointSlice>::all(client.clone()),
                    watcher::Config::default().labels(&managed),
                ),
            reconcile,
            Arc::new(Ctx { client }),
            stop,
        )
        .await;
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(selector) = selector(&svc) else {
        return Ok(Action::await_change());
    };
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let pods = selected_pods(&ctx.client, &ns, selector)
        .await
        .map_err(|e| Error::ListPods(name.clone(), e))?;
    let api = Api::<EndpointSlice>::namespaced(ctx.client.clone(), &ns);
    let mine = format!(
        "{}={name},{}={}",
        slices::SERVICE_NAME_LABEL,
        slices::MANAGED_BY_LABEL,
        slices::MANAGED_BY
    );
    let existing = api
        .list(&ListParams::default().labels(&mine))
        .await
        .map_err(|e| Error::ListSlices(name.clone(), e))?;
    let selected: Vec<&Pod> = pods.iter().collect();
    for op in slices::plan(&svc, &selected, &existing.items) {
        let result = match op {
            SliceOp::Create(s) => api.create(&PostParams::default(), &s).await.map(|_| ()),
            SliceOp::Update(s) => {
                let slice_name = s.metadata.name.clone().unwrap_or_default();
                api.replace(&slice_name, &PostParams::default(), &s)
                    .await
                    .map(|_| ())
            }
            SliceOp::Delete(n) => match api.delete(&n, &Default::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                other => other.map(|_| ()),
            },
        };
        result.map_err(|e| Error::Write(name.clone(), e))?;
    }
    Ok(Action::await_change())
}
