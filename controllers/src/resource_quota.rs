//! The resource-quota controller: keeps every ResourceQuota's `status.hard` equal to its
//! `spec.hard` and `status.used` equal to what the namespace holds (the admission plugin
//! charges creates as they happen; this gives back what deletions release and recounts what
//! admission could not see). Recalculates when a quota changes, when pods, services, claims,
//! config maps or secrets in its namespace change, and every [`RESYNC`].

use crate::backoff::ErrorBackoff;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ResourceQuota, Secret, Service,
};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{Error, SharedInformerFactory};
use k3rs_apimachinery::catalog::{self, Resource};
use k3rs_apimachinery::quota::check::{matches, resource_list, tracked, used_json};
use k3rs_apimachinery::quota::usage::{usage, Usage};

/// The controller's identity (`system:serviceaccount:kube-system:resourcequota-controller`).
pub const NAME: &str = "resourcequota-controller";
/// Full recalculation period of every quota.
pub const RESYNC: Duration = Duration::from_secs(30);

/// The resource whose objects a quota'd resource name counts, if any.
pub fn counted_resource(name: &str) -> Option<&'static Resource> {
    let core = |plural: &str| catalog::lookup("", "v1", plural);
    if let Some(rest) = name.strip_prefix("count/") {
        let (plural, group) = rest.split_once('.').unwrap_or((rest, ""));
        return catalog::all()
            .into_iter()
            .find(|r| r.plural == plural && r.group == group);
    }
    match name {
        "pods" | "cpu" | "memory" | "ephemeral-storage" => core("pods"),
        n if n.starts_with("requests.") && n != "requests.storage" => core("pods"),
        n if n.starts_with("limits.") => core("pods"),
        "services" | "services.nodeports" | "services.loadbalancers" => core("services"),
        "secrets" => core("secrets"),
        "configmaps" => core("configmaps"),
        "replicationcontrollers" => core("replicationcontrollers"),
        "resourcequotas" => core("resourcequotas"),
        "persistentvolumeclaims" | "requests.storage" => core("persistentvolumeclaims"),
        n if n.contains(".storageclass.storage.k8s.io/") => core("persistentvolumeclaims"),
        _ => None,
    }
}

/// The status a quota should have, given every object of the resources it counts.
pub fn desired_status(quota: &Value, objects: &[(&'static Resource, Vec<Value>)]) -> Value {
    let hard = resource_list(&quota["spec"]["hard"]);
    let mut total = Usage::new();
    for (r, objs) in objects {
        let is_pod = r.group.is_empty() && r.plural == "pods";
        for obj in objs.iter().filter(|o| matches(quota, is_pod, o)) {
            for (k, v) in usage(r, obj) {
                let sum = total.get(&k).copied().unwrap_or_default().plus(v);
                total.insert(k, sum);
            }
        }
    }
    json!({"hard": quota["spec"]["hard"], "used": used_json(&tracked(&hard, &total))})
}

struct Ctx {
    client: kube::Client,
}

fn api_resource(r: &Resource) -> ApiResource {
    ApiResource {
        group: r.group.into(),
        version: r.version.into(),
        api_version: if r.group.is_empty() {
            r.version.into()
        } else {
            format!("{}/{}", r.group, r.version)
        },
        kind: r.kind.into(),
        plural: r.plural.into(),
    }
}

async fn reconcile(rq: Arc<ResourceQuota>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = rq.namespace().unwrap_or_default();
    let quota = serde_json::to_value(rq.as_ref()).unwrap_or_default();
    let mut resources: Vec<&'static Resource> = resource_list(&quota["spec"]["hard"])
        .keys()
        .filter_map(|k| counted_resource(k))
        .collect();
    resources.sort_by_key(|r| (r.group, r.plural));
    resources.dedup();
    let mut objects = Vec::new();
    for r in resources {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ns, &api_resource(r));
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| Error::Api {
                op: "listing what a quota counts",
                source,
            })?;
        let items = list
            .items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect();
        objects.push((r, items));
    }
    let status = desired_status(&quota, &objects);
    if quota.get("status") != Some(&status) {
        let api: Api<ResourceQuota> = Api::namespaced(ctx.client.clone(), &ns);
        let mut new = quota;
        new["status"] = status;
        let new: ResourceQuota = serde_json::from_value(new).map_err(|e| Error::Api {
            op: "building a quota's status",
            source: kube::Error::SerdeError(e),
        })?;
        // A replace carries the resourceVersion read: a quota charged meanwhile is a conflict,
        // retried with a fresh count.
        api.replace_status(&rq.name_any(), &PostParams::default(), &new)
            .await
            .map_err(|source| Error::Api {
                op: "writing a quota's status",
                source,
            })?;
    }
    Ok(Action::requeue(RESYNC))
}

/// The quotas of the namespace `obj` is in.
fn quotas_of<K: kube::Resource>(
    store: &Store<ResourceQuota>,
    obj: &K,
) -> Vec<ObjectRef<ResourceQuota>> {
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|q| q.namespace().as_deref() == Some(ns.as_str()))
        .map(|q| ObjectRef::from_obj(q.as_ref()))
        .collect()
}

/// Runs until `stop`.
pub async fn run(client: kube::Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("resource_quota");
    let ctrl = super::shared_controller::<ResourceQuota>(&informers).await;
    let store = ctrl.store();
    // Kinds the process caches anyway: their shared informers' changes.
    macro_rules! shared {
        ($ctrl:expr, $kind:ty) => {{
            let store = store.clone();
            let touched = informers.informer::<$kind>().touched();
            $ctrl.watches_shared_stream(touched, move |o| quotas_of(&store, o.as_ref()))
        }};
    }
    // Watches of their own, on purpose: no one else in the process reads ConfigMaps or
    // Secrets, and shared informers would cache every one of them (with their data) only to
    // say which namespace changed.
    macro_rules! watched {
        ($ctrl:expr, $kind:ty) => {{
            let store = store.clone();
            let api = Api::<$kind>::all(client.clone());
            $ctrl.watches(api, watcher::Config::default(), move |o| {
                quotas_of(&store, &o)
            })
        }};
    }
    let ctrl = shared!(ctrl, Pod);
    let ctrl = shared!(ctrl, Service);
    let ctrl = shared!(ctrl, PersistentVolumeClaim);
    let ctrl = watched!(ctrl, ConfigMap);
    let ctrl = watched!(ctrl, Secret);
    backoff
        .drive(ctrl, reconcile, Arc::new(Ctx { client }), stop)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_the_resources_they_count() {
        let plural = |n: &str| counted_resource(n).map(|r| (r.group, r.plural));
        assert_eq!(plural("pods"), Some(("", "pods")));
        assert_eq!(plural("requests.cpu"), Some(("", "pods")));
        assert_eq!(plural("limits.memory"), Some(("", "pods")));
        assert_eq!(
            plural("requests.storage"),
            Some(("", "persistentvolumeclaims"))
        );
        assert_eq!(plural("services.nodeports"), Some(("", "services")));
        assert_eq!(
            plural("count/deployments.apps"),
            Some(("apps", "deployments"))
        );
        assert_eq!(plural("count/configmaps"), Some(("", "configmaps")));
        assert_eq!(plural("count/nothing.example.com"), None);
    }

    #[test]
    fn status_counts_what_exists() {
        let pods = catalog::lookup("", "v1", "pods").unwrap();
        let quota = json!({"spec": {"hard": {"pods": "5", "requests.cpu": "2"}}});
        let running = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "500m"}}}]}});
        let done = json!({"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Failed"}});
        let status = desired_status(&quota, &[(pods, vec![running.clone(), running, done])]);
        assert_eq!(
            status,
            json!({"hard": {"pods": "5", "requests.cpu": "2"},
                "used": {"pods": "2", "requests.cpu": "1"}})
        );
    }
}
