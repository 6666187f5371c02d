//! The root-CA publisher (`root-ca-cert-publisher`): every namespace has a `kube-root-ca.crt`
//! ConfigMap whose `ca.crt` is the API server's CA bundle, kept as published (a changed or
//! deleted ConfigMap is put back).

use crate::backoff::ErrorBackoff;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use tokio_util::sync::CancellationToken;

use super::{namespace_gone, Error, SharedInformerFactory, RETRY};
use k3rs_apimachinery::serviceaccount::ROOT_CA_CONFIGMAP;

/// The controller's identity (`system:serviceaccount:kube-system:root-ca-cert-publisher`).
pub const NAME: &str = "root-ca-cert-publisher";
/// The annotation that says what the ConfigMap is for.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Its value, as kube-controller-manager writes it.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

fn data(ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("ca.crt".to_string(), ca.to_string())])
}

/// What to write: a new ConfigMap (`None` existing), the existing one with the CA and
/// description put back, or nothing when it is as published.
pub fn desired(existing: Option<&ConfigMap>, ca: &str) -> Option<ConfigMap> {
    let Some(cm) = existing else {
        return Some(ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CONFIGMAP.into()),
                annotations: Some(BTreeMap::from([(
                    DESCRIPTION_ANNOTATION.to_string(),
                    DESCRIPTION.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(data(ca)),
            ..ConfigMap::default()
        });
    };
    let described = cm
        .annotations()
        .get(DESCRIPTION_ANNOTATION)
        .is_some_and(|d| !d.is_empty());
    if cm.data.as_ref() == Some(&data(ca)) && described {
        return None;
    }
    let mut cm = cm.clone();
    cm.data = Some(data(ca));
    cm.annotations_mut()
        .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
    Some(cm)
}

struct Ctx {
    client: kube::Client,
    ca: String,
    /// The published config maps, by namespace.
    published: Store<ConfigMap>,
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns.name_any());
    // Read from the informer's cache, as upstream (the role has no `get`); a create that
    // meets an object the cache has not seen yet fails and is retried.
    let existing = ctx
        .published
        .get(&ObjectRef::new(ROOT_CA_CONFIGMAP).within(&ns.name_any()))
        .map(|cm| (*cm).clone());
    let Some(cm) = desired(existing.as_ref(), &ctx.ca) else {
        return Ok(Action::await_change());
    };
    let pp = PostParams::default();
    let written = if existing.is_some() {
        api.replace(ROOT_CA_CONFIGMAP, &pp, &cm).await
    } else {
        api.create(&pp, &cm).await
    };
    match written {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if existing.is_none() && namespace_gone(&e) => Ok(Action::await_change()),
        Err(source) => Err(Error::Api {
            op: "writing the root CA config map",
            source,
        }),
    }
}

/// The CA bundle the API server serves on `/cacerts` (its serving certificate's CA).
pub async fn server_ca(client: &kube::Client) -> Result<String, Error> {
    let req = axum::http::Request::get("/cacerts")
        .body(Vec::new())
        .map_err(|e| Error::Api {
            op: "building the /cacerts request",
            source: kube::Error::HttpError(e),
        })?;
    client.request_text(req).await.map_err(|source| Error::Api {
        op: "reading /cacerts",
        source,
    })
}

/// Publishes the API server's CA (from `/cacerts`, retried until served) until `stop`.
pub async fn run_published(
    client: kube::Client,
    informers: SharedInformerFactory,
    stop: CancellationToken,
) {
    let ca = loop {
        match server_ca(&client).await {
            Ok(ca) => break ca,
            Err(e) => {
                tracing::debug!(error = %e, "root CA publisher: no CA yet");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    };
    run(client, informers, ca, stop).await;
}

/// Publishes `ca` (PEM) until `stop`.
pub async fn run(
    client: kube::Client,
    informers: SharedInformerFactory,
    ca: String,
    stop: CancellationToken,
) {
    let backoff = ErrorBackoff::new("root_ca");
    let maps: Api<ConfigMap> = Api::all(client.clone());
    // One watch of its own, on purpose, both cache and trigger: of the ConfigMaps only the
    // published ones (no one else in the process caches ConfigMaps).
    let published =
        watcher::Config::default().fields(&format!("metadata.name={ROOT_CA_CONFIGMAP}"));
    let (store, writer) = reflector::store();
    let published_changes =
        reflector::reflector(writer, watcher(maps, published).default_backoff()).touched_objects();
    backoff
        .drive(
            super::shared_controller::<Namespace>(&informers)
                .await
                .watches_stream(published_changes, |cm| {
                    cm.namespace().map(|ns| ObjectRef::<Namespace>::new(&ns))
                }),
            reconcile,
            Arc::new(Ctx {
                client,
                ca,
                published: store,
            }),
            stop,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_then_keeps_then_repairs() {
        let new = desired(None, "PEM").unwrap();
        assert_eq!(new.metadata.name.as_deref(), Some("kube-root-ca.crt"));
        assert_eq!(new.data, Some(data("PEM")));
        assert_eq!(new.annotations()[DESCRIPTION_ANNOTATION], DESCRIPTION);
        assert_eq!(desired(Some(&new), "PEM"), None);
        let mut tampered = new.clone();
        tampered.data = Some(BTreeMap::from([("ca.crt".into(), "X".into())]));
        tampered.labels_mut().insert("keep".into(), "me".into());
        let fixed = desired(Some(&tampered), "PEM").unwrap();
        assert_eq!(fixed.data, Some(data("PEM")));
        assert_eq!(fixed.labels()["keep"], "me");
        let mut undescribed = new;
        undescribed.metadata.annotations = None;
        assert_eq!(
            desired(Some(&undescribed), "PEM").unwrap().annotations()[DESCRIPTION_ANNOTATION],
            DESCRIPTION
        );
    }
}
