//! The endpoints controller (`endpoint-controller`): every Service with a selector gets an
//! `Endpoints` object of the same name listing the pods it selects ([`subsets`]); the
//! object goes when the Service goes. Services without a selector (like `kubernetes`, whose
//! endpoints the API server keeps) are left alone.

pub mod pods;
pub mod subsets;

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use k3rs_apimachinery::informers::Subscription;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::Client;
use tokio_util::sync::CancellationToken;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "endpoint-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the pods of service {0}: {1}")]
    ListPods(String, #[source] kube::Error),
    #[error("writing the endpoints of service {0}: {1}")]
    Write(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("endpoints");
    let cleanup = tokio::spawn(delete_with_services(
        client.clone(),
        informers.informer::<Service>().subscribe(),
    ));
    let controller = super::shared_controller::<Service>(&informers).await;
    let by_namespace = services_of_namespace(controller.store());
    backoff
        .drive(
            controller
                .watches_shared_stream(informers.informer::<Pod>().touched(), by_namespace)
                // Its own watch, on purpose: no one else in the process reads Endpoints, and a shared
                // informer would cache them all just to notice one being changed or deleted.
                .watches(
                    Api::<Endpoints>::all(client.clone()),
                    watcher::Config::default(),
                    |ep| {
                        let name = ep.metadata.name.unwrap_or_default();
                        let ns = ep.metadata.namespace.unwrap_or_default();
                        Some(ObjectRef::<Service>::new(&name).within(&ns))
                    },
                ),
            reconcile,
            Arc::new(Ctx { client }),
            stop,
        )
        .await;
    cleanup.abort();
}

/// A deleted Service takes its Endpoints along (upstream's `syncService` of a missing
/// service), as the shared Service informer tells of deletions (those while its watch was
/// down too, at the relist). Deletions while no server ran are not seen.
async fn delete_with_services(client: Client, mut services: Subscription<Service>) {
    while let Some(event) = services.next().await {
        if let watcher::Event::Delete(svc) = event {
            let ns = svc.metadata.namespace.clone().unwrap_or_default();
            let name = svc.metadata.name.clone().unwrap_or_default();
            let api = Api::<Endpoints>::namespaced(client.clone(), &ns);
            if let Err(error) = api.delete(&name, &Default::default()).await {
                tracing::debug!(%error, "endpoints controller: deleting the endpoints of {ns}/{name}");
            }
        }
    }
}

/// A watch mapper: a pod change concerns every service of its namespace (its old labels are
/// not known, so the services it left must look again too).
pub(crate) fn services_of_namespace(
    services: reflector::Store<Service>,
) -> impl Fn(Arc<Pod>) -> Vec<ObjectRef<Service>> + Send + Sync + 'static {
    move |pod| {
        services
            .state()
            .into_iter()
            .filter(|s| s.metadata.namespace == pod.metadata.namespace)
            .map(|s| ObjectRef::from_obj(&*s))
            .collect()
    }
}

/// The pods of namespace `ns` that `selector` selects.
pub(crate) async fn selected_pods(
    client: &Client,
    ns: &str,
    selector: &BTreeMap<String, String>,
) -> kube::Result<Vec<Pod>> {
    let label_selector = selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&label_selector))
        .await?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| pods::selects(selector, p.metadata.labels.as_ref()))
        .collect())
}

/// The Service's selector, when it has a non-empty one.
pub(crate) fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// The labels the Endpoints carry: the Service's, plus the headless label when headless.
fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    labels.remove(subsets::HEADLESS_LABEL);
    if subsets::is_headless(svc) {
        labels.insert(subsets::HEADLESS_LABEL.into(), String::new());
    }
    labels
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
    let selected: Vec<&Pod> = pods.iter().collect();
    let subsets = subsets::subsets(&svc, &selected);
    let labels = labels(&svc);

    let api = Api::<Endpoints>::namespaced(ctx.client.clone(), &ns);
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::Write(name.clone(), e))?;
    let result = match existing {
        Some(mut ep) => {
            let same_subsets = serde_json::to_value(ep.subsets.clone().unwrap_or_default()).ok()
                == serde_json::to_value(&subsets).ok();
            if same_subsets && ep.metadata.labels.clone().unwrap_or_default() == labels {
                return Ok(Action::await_change());
            }
            ep.subsets = Some(subsets);
            ep.metadata.labels = Some(labels);
            api.replace(&name, &PostParams::default(), &ep).await
        }
        None => {
            let mut ep = Endpoints::default();
            ep.metadata.name = Some(name.clone());
            ep.metadata.namespace = Some(ns.clone());
            ep.metadata.labels = Some(labels).filter(|l| !l.is_empty());
            ep.subsets = Some(subsets);
            api.create(&PostParams::default(), &ep).await
        }
    };
    result.map_err(|e| Error::Write(name, e))?;
    Ok(Action::await_change())
}
