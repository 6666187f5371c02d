//! The standard plugins on a pod (or claim) create read the API server's caches, not the
//! store, once the caches are synced; the store still decides where the caches may not (a quota that
//! would charge, a class the cache lacks, a kind written here a moment ago).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::lister::Listers;
use super::pod_security::PodSecurity;
use super::{Attributes, Chain, Operation};
use crate::registry::mem_store::MemStore;
use crate::registry::{encode, keys, Registry};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::informers::SharedInformerFactory;
use k3rs_apimachinery::status::ApiResult;
use k3rs_datastore::Datastore;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota, ServiceAccount};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;

/// A client whose lists answer `items[path]` (an empty list for other paths) and whose
/// watches stay open without events.
fn lists(items: HashMap<&'static str, Vec<Value>>) -> kube::Client {
    let items = Arc::new(items);
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let items = items.clone();
        async move {
            let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
            let body = if watch {
                axum::body::Body::from_stream(futures::stream::pending::<
                    Result<axum::body::Bytes, std::io::Error>,
                >())
            } else {
                let listed = items.get(req.uri().path()).cloned().unwrap_or_default();
                let list = json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": "1"}, "items": listed});
                axum::body::Body::from(list.to_string())
            };
            Ok::<_, std::convert::Infallible>(http::Response::new(body))
        }
    });
    kube::Client::new(service, "default")
}

fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
}

fn account() -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "n"}, "automountServiceAccountToken": false})
}

fn class(name: &str, value: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value})
}

fn limits() -> Value {
    json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "n"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}})
}

fn quota(hard: Value, used: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "n"},
        "spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
}

/// The standard chain over caches holding `items`, once they are synced.
async fn cached_chain(items: HashMap<&'static str, Vec<Value>>, stop: &CancellationToken) -> Chain {
    let informers = SharedInformerFactory::new(lists(items), stop.clone());
    let listers = Listers::of(&informers);
    let pod_security = PodSecurity {
        namespaces: Some(informers.informer()),
        ..PodSecurity::default()
    };
    let synced = async {
        informers.informer::<Namespace>().wait_synced().await;
        informers.informer::<ServiceAccount>().wait_synced().await;
        informers.informer::<LimitRange>().wait_synced().await;
        informers.informer::<PriorityClass>().wait_synced().await;
        informers.informer::<ResourceQuota>().wait_synced().await;
        informers.informer::<StorageClass>().wait_synced().await;
    };
    tokio::time::timeout(Duration::from_secs(10), synced)
        .await
        .expect("the caches sync");
    Chain::standard_with(Default::default(), pod_security, listers)
}

/// The usual objects: namespace `n`, its default account, class `high`, a LimitRange.
fn usual() -> HashMap<&'static str, Vec<Value>> {
    HashMap::from([
        ("/api/v1/namespaces", vec![namespace()]),
        ("/api/v1/serviceaccounts", vec![account()]),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            vec![class("high", 1000)],
        ),
        ("/api/v1/limitranges", vec![limits()]),
    ])
}

/// A store holding `objects` (by plural), and the registry over it with `chain`.
async fn registry(chain: Chain, objects: &[(&str, &str, Value)]) -> (Arc<MemStore>, Registry) {
    let store = Arc::new(MemStore::default());
    for (group, plural, obj) in objects {
        let r = catalog::lookup(group, "v1", plural).unwrap();
        let ns = obj["metadata"]["namespace"].as_str();
        let key = keys::object_key(r, ns, obj["metadata"]["name"].as_str().unwrap());
        store.create(&key, encode(obj).unwrap(), 0).await.unwrap();
    }
    store.take_reads();
    let ds: Arc<dyn Datastore> = store.clone();
    let reg = Registry::new(ds, "10.43.0.0/16".parse().unwrap()).with_admission(chain);
    (store, reg)
}

fn stored_usual() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("", "namespaces", namespace()),
        ("", "serviceaccounts", account()),
        ("scheduling.k8s.io", "priorityclasses", class("high", 1000)),
        ("", "limitranges", limits()),
    ]
}

/// A pod create in `n` through both halves of the chain; the admitted pod.
async fn create_pod(reg: &Registry, spec: Value) -> ApiResult<Value> {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "n"}, "spec": spec});
    let mut a = write(Operation::Create, "", "pods", pod);
    reg.admission().admit(&mut a, reg).await?;
    reg.admission().validate(&a, reg).await?;
    Ok(a.object.unwrap_or_default())
}

fn write(op: Operation, group: &str, plural: &str, obj: Value) -> Attributes {
    Attributes {
        operation: op,
        resource: catalog::lookup(group, "v1", plural).unwrap(),
        subresource: None,
        namespace: "n".into(),
        name: obj["metadata"]["name"].as_str().unwrap_or("").into(),
        object: Some(obj),
        old_object: None,
        user: None,
        dry_run: false,
        reinvocation: Default::default(),
    }
}

#[tokio::test]
async fn a_pod_create_reads_nothing_from_the_store_once_the_caches_are_synced() {
    let stop = CancellationToken::new();
    // Without caches: every plugin asks the store.
    let (store, reg) = registry(Chain::standard(), &stored_usual()).await;
    let uncached = create_pod(&reg, json!({"priorityClassName": "high"}))
        .await
        .unwrap();
    assert_eq!(
        store.take_reads(),
        [
            "/registry/namespaces/n",
            "/registry/limitranges/n/",
            "/registry/serviceaccounts/n/default",
            "/registry/priorityclasses/",
            "/registry/limitranges/n/",
            "/registry/serviceaccounts/n/default",
            "/registry/namespaces/n",
            "/registry/resourcequotas/n/",
        ]
    );
    // With them: none does, and the pod comes out the same.
    let chain = cached_chain(usual(), &stop).await;
    let (store, reg) = registry(chain, &stored_usual()).await;
    let cached = create_pod(&reg, json!({"priorityClassName": "high"}))
        .await
        .unwrap();
    assert_eq!(store.take_reads(), Vec::<String>::new());
    assert_eq!(cached, uncached);
    assert_eq!(cached["spec"]["priority"], 1000);
    assert_eq!(
        cached["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "500m"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_cached_quota_that_would_charge_leaves_the_decision_to_the_stored_one() {
    let stop = CancellationToken::new();
    let mut items = usual();
    // The cache has room for one more pod; the store's quota is already full.
    items.insert(
        "/api/v1/resourcequotas",
        vec![quota(json!({"pods": "1"}), json!({"pods": "0"}))],
    );
    let mut objects = stored_usual();
    objects.push((
        "",
        "resourcequotas",
        quota(json!({"pods": "1"}), json!({"pods": "1"})),
    ));
    let (store, reg) = registry(cached_chain(items, &stop).await, &objects).await;
    let refused = create_pod(&reg, json!({})).await.unwrap_err();
    assert_eq!(refused.code, 403, "{refused:?}");
    assert!(
        refused.message.contains("exceeded quota: q"),
        "{}",
        refused.message
    );
    assert_eq!(store.take_reads(), ["/registry/resourcequotas/n/"]);

    // A quota that does not cover pods charges nothing: no store read.
    let mut items = usual();
    items.insert(
        "/api/v1/resourcequotas",
        vec![quota(json!({"secrets": "1"}), json!({"secrets": "0"}))],
    );
    let (store, reg) = registry(cached_chain(items, &stop).await, &stored_usual()).await;
    create_pod(&reg, json!({})).await.unwrap();
    assert_eq!(store.take_reads(), Vec::<String>::new());
    stop.cancel();
}

#[tokio::test]
async fn what_the_cache_lacks_or_this_server_just_wrote_is_read_from_the_store() {
    let stop = CancellationToken::new();
    let mut objects = stored_usual();
    objects.push(("scheduling.k8s.io", "priorityclasses", class("gold", 7)));
    let (store, reg) = registry(cached_chain(usual(), &stop).await, &objects).await;

    // A class created a moment ago (not yet cached) is found in the store.
    let pod = create_pod(&reg, json!({"priorityClassName": "gold"}))
        .await
        .unwrap();
    assert_eq!(pod["spec"]["priority"], 7);
    assert_eq!(store.take_reads(), ["/registry/priorityclasses/"]);

    // A LimitRange written through this server: its namespace's pods read the store's.
    let mut a = write(Operation::Create, "", "limitranges", limits());
    reg.admission().admit(&mut a, &reg).await.unwrap();
    reg.admission().validate(&a, &reg).await.unwrap();
    store.take_reads();
    create_pod(&reg, json!({})).await.unwrap();
    assert_eq!(
        store.take_reads(),
        ["/registry/limitranges/n/", "/registry/limitranges/n/"]
    );

    // A namespace being deleted here is looked up in the store (and so refused there).
    let mut a = write(Operation::Delete, "", "namespaces", namespace());
    a.namespace = String::new();
    a.object = None;
    reg.admission().admit(&mut a, &reg).await.unwrap();
    store.take_reads();
    create_pod(&reg, json!({})).await.unwrap();
    let reads = store.take_reads();
    assert_eq!(reads[0], "/registry/namespaces/n", "{reads:?}");
    stop.cancel();
}

/// A StorageClass marked default, created at `created`.
fn default_class(name: &str, created: &str) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "creationTimestamp": created,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path"})
}

/// A claim create in `n` that names no class, through both halves of the chain; the
/// admitted claim's class.
async fn create_claim(reg: &Registry) -> ApiResult<Value> {
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": "n"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let mut a = write(Operation::Create, "", "persistentvolumeclaims", claim);
    reg.admission().admit(&mut a, reg).await?;
    reg.admission().validate(&a, reg).await?;
    Ok(a.object.unwrap_or_default()["spec"]["storageClassName"].clone())
}

#[tokio::test]
async fn a_claim_create_reads_the_default_class_from_the_cache_unless_one_was_just_written() {
    let stop = CancellationToken::new();
    let local = default_class("local-path", "2026-01-01T00:00:00Z");
    let mut objects = stored_usual();
    objects.push(("storage.k8s.io", "storageclasses", local.clone()));
    // Without caches: DefaultStorageClass lists the stored classes.
    let (store, reg) = registry(Chain::standard(), &objects).await;
    assert_eq!(create_claim(&reg).await.unwrap(), "local-path");
    let reads = store.take_reads();
    assert!(
        reads.contains(&"/registry/storageclasses/".to_string()),
        "{reads:?}"
    );

    // With them: nothing is read from the store, and the claim gets the same class.
    let mut items = usual();
    items.insert("/apis/storage.k8s.io/v1/storageclasses", vec![local]);
    let (store, reg) = registry(cached_chain(items, &stop).await, &objects).await;
    assert_eq!(create_claim(&reg).await.unwrap(), "local-path");
    assert_eq!(store.take_reads(), Vec::<String>::new());

    // A newer default class written through this server: claims read the store's classes
    // (the cache has not seen it) and get it.
    let fast = default_class("fast", "2026-02-01T00:00:00Z");
    let r = catalog::lookup("storage.k8s.io", "v1", "storageclasses").unwrap();
    store
        .create(
            &keys::object_key(r, None, "fast"),
            encode(&fast).unwrap(),
            0,
        )
        .await
        .unwrap();
    let mut a = write(Operation::Create, "storage.k8s.io", "storageclasses", fast);
    a.namespace = String::new();
    reg.admission().admit(&mut a, &reg).await.unwrap();
    store.take_reads();
    assert_eq!(create_claim(&reg).await.unwrap(), "fast");
    assert_eq!(store.take_reads(), ["/registry/storageclasses/"]);
    stop.cancel();
}
