//! The namespace controller (kube-controller-manager's `namespace`, identity
//! `namespace-controller`): a deleted namespace's content is deleted through the API (so
//! finalizers, graceful pod deletion and the garbage collector apply), its status says what
//! remains ([`conditions`]), and once it is empty its `kubernetes` finalizer is removed
//! (`namespaces/<name>/finalize`) and it is deleted for good.

pub mod conditions;

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{verbs, ApiResource, Discovery, Scope};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use conditions::Outcome;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "namespace-controller";
/// The finalizer this controller owns on `spec.finalizers`.
pub const FINALIZER: &str = "kubernetes";
/// How soon a namespace whose content is still going is looked at again.
const RECHECK: Duration = Duration::from_secs(2);

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{op} namespace {name}: {source}")]
    Api {
        op: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

struct Ctx {
    client: Client,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::with_max("namespace", std::time::Duration::from_secs(60));
    backoff
        .drive(
            super::shared_controller::<Namespace>(&informers).await,
            reconcile,
            Arc::new(Ctx { client }),
            stop,
        )
        .await;
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let owns_finalizer = spec_finalizers(&ns).iter().any(|f| f == FINALIZER);
    if ns.metadata.deletion_timestamp.is_none() || !owns_finalizer {
        return Ok(Action::await_change());
    }
    let name = ns.name_any();
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let err = |op: &'static str| {
        let name = name.clone();
        move |source| Error::Api { op, name, source }
    };
    let outcome = delete_content(&ctx.client, &name).await;
    let old = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    if let Some(conditions) = conditions::merge(&old, outcome.conditions(), now) {
        // An update of the status, as upstream (its role grants `update`, not `patch`); a
        // conflict retries the round.
        let mut with = (*ns).clone();
        with.status.get_or_insert_with(Default::default).conditions = Some(conditions);
        match api
            .replace_status(&name, &PostParams::default(), &with)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
            r => {
                r.map_err(err("updating the conditions of"))?;
            }
        }
    }
    if !outcome.done() {
        return Ok(Action::requeue(RECHECK));
    }
    // Empty: drop our finalizer, then delete it again (it goes once no finalizer remains).
    let mut finalized = (*ns).clone();
    let rest: Vec<String> = spec_finalizers(&ns)
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    finalized
        .spec
        .get_or_insert_with(Default::default)
        .finalizers = Some(rest);
    // Unconditional: the status write above moved the resourceVersion on.
    finalized.metadata.resource_version = None;
    match api
        .replace_subresource("finalize", &name, &PostParams::default(), &finalized)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
        r => {
            r.map_err(err("finalizing"))?;
        }
    }
    let dp = DeleteParams {
        preconditions: ns.uid().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &dp).await {
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        r => {
            r.map_err(err("deleting"))?;
        }
    }
    Ok(Action::await_change())
}

fn spec_finalizers(ns: &Namespace) -> Vec<String> {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default()
}

/// Deletes everything in namespace `ns` through the API, then lists what is left.
async fn delete_content(client: &Client, ns: &str) -> Outcome {
    let mut outcome = Outcome::default();
    let discovery = match Discovery::new(client.clone()).run().await {
        Ok(d) => d,
        Err(e) => {
            outcome.discovery_failures.push(e.to_string());
            return outcome;
        }
    };
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            let usable = caps.scope == Scope::Namespaced
                && [verbs::LIST, verbs::DELETE]
                    .iter()
                    .all(|v| caps.supports_operation(v));
            if !usable {
                continue;
            }
            let collection = caps.supports_operation(verbs::DELETE_COLLECTION);
            delete_all(client, ns, &ar, collection, &mut outcome).await;
        }
    }
    outcome
}

/// `pods`, `jobs.batch`: upstream's GroupResource string.
fn group_resource(ar: &ApiResource) -> String {
    if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    }
}

async fn delete_all(
    client: &Client,
    ns: &str,
    ar: &ApiResource,
    collection: bool,
    outcome: &mut Outcome,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let what = group_resource(ar);
    let background = DeleteParams::background();
    let deleted = if collection {
        api.delete_collection(&background, &ListParams::default())
            .await
            .map(|_| ())
    } else {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let mut result = Ok(());
                for o in list.items {
                    match api.delete(&o.name_any(), &background).await {
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => result = Err(e),
                        Ok(_) => {}
                    }
                }
                result
            }
            Err(e) => Err(e),
        }
    };
    match deleted {
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => return,
        Err(e) => outcome.content_failures.push(format!("{what}: {e}")),
        Ok(()) => {}
    }
    match api.list(&ListParams::default()).await {
        Ok(left) if !left.items.is_empty() => {
            outcome.remaining.insert(what, left.items.len());
            for o in &left.items {
                for f in o.finalizers() {
                    *outcome.finalizers.entry(f.clone()).or_default() += 1;
                }
            }
        }
        Ok(_) => {}
        Err(e) => outcome.content_failures.push(format!("{what}: {e}")),
    }
}
