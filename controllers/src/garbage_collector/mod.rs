//! The garbage collector (kube-controller-manager's `garbagecollector`, identity
//! `generic-garbage-collector`): an informer on every listable, watchable, deletable resource
//! (found through discovery, re-run every 30 s so custom resources join) feeding the
//! dependency [`graph`] of owner references, the decisions of [`plan`] for the objects a
//! change concerns, and their execution.
//!
//! Guarantees (as upstream): dependents whose owners are all gone are deleted (background);
//! an owner deleted with `propagationPolicy: Foreground` (the API server's
//! `foregroundDeletion` finalizer) goes once its `blockOwnerDeletion` dependents are gone; an
//! owner deleted with `Orphan` (the `orphan` finalizer) goes once no dependent references it.
//! An owner is taken as gone only after a live read confirms it (404 or another uid).
//! The caches hold each object's ownership metadata only (`keep_ownership`).
//!
//! As upstream's, the graph is incremental: an event costs work for the objects it concerns,
//! not for every object (a status update of a pod costs nothing). Every 30 s a full pass
//! decides for every object again, which retries what could not be decided.

pub mod graph;
pub mod plan;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::{verbs, ApiResource, Discovery};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use graph::Graph;
use plan::{Action, Item, ObjectKey, OwnerRef, View};

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "generic-garbage-collector";
/// How often discovery runs again (upstream's resync of monitors).
const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);
/// How soon a round runs again after one of its actions failed.
const RETRY: Duration = Duration::from_secs(1);
/// Resources upstream's collector ignores.
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// One watched resource.
struct Informer {
    resource: ApiResource,
    namespaced: bool,
    store: Store<DynamicObject>,
    task: JoinHandle<()>,
}

/// Runs the collector until `stop`.
pub async fn run(client: Client, stop: CancellationToken) {
    let mut gc = Collector {
        client,
        informers: Vec::new(),
        changed: Arc::new(Notify::new()),
        graph: Arc::new(Mutex::new(Graph::default())),
    };
    let mut discovered: Option<Instant> = None;
    loop {
        let full = discovered.is_none_or(|at| at.elapsed() >= DISCOVERY_PERIOD);
        if full {
            match gc.discover().await {
                Ok(()) => discovered = Some(Instant::now()),
                Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed"),
            }
        }
        let failed = gc.round(full).await;
        let wait = if failed || discovered.is_none() {
            RETRY
        } else {
            DISCOVERY_PERIOD
        };
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = gc.changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
    for informer in gc.informers.into_iter().flatten() {
        informer.task.abort();
    }
}

struct Collector {
    client: Client,
    /// Indexed by `ObjectKey::resource`; a resource that disappeared leaves `None`.
    informers: Vec<Option<Informer>>,
    changed: Arc<Notify>,
    /// Fed by the informers' events; read by rounds.
    graph: Arc<Mutex<Graph>>,
}

impl Collector {
    /// Starts informers for resources discovery shows that are not watched yet; stops those
    /// of resources that are gone.
    async fn discover(&mut self) -> kube::Result<()> {
        let discovery = Discovery::new(self.client.clone()).run().await?;
        let mut seen = BTreeSet::new();
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                let usable = [verbs::LIST, verbs::WATCH, verbs::DELETE, verbs::PATCH]
                    .iter()
                    .all(|v| caps.supports_operation(v));
                if !usable || IGNORED.contains(&(ar.group.as_str(), ar.plural.as_str())) {
                    continue;
                }
                seen.insert((ar.group.clone(), ar.plural.clone()));
                let watched = self.informers.iter().flatten().any(|i| {
                    i.resource.group == ar.group
                        && i.resource.plural == ar.plural
                        && i.resource.version == ar.version
                });
                if !watched {
                    let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
                    self.informers.push(Some(self.start(ar, namespaced)));
                }
            }
        }
        for slot in &mut self.informers {
            let gone = slot.as_ref().is_some_and(|i| {
                !seen.contains(&(i.resource.group.clone(), i.resource.plural.clone()))
            });
            if gone {
                if let Some(i) = slot.take() {
                    i.task.abort();
                }
            }
        }
        let mut graph = lock(&self.graph);
        for (index, slot) in self.informers.iter().enumerate() {
            if slot.is_none() {
                graph.retain_listed(index, &HashSet::new());
            }
        }
        Ok(())
    }

    fn start(&self, resource: ApiResource, namespaced: bool) -> Informer {
        let index = self.informers.len();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let changed = self.changed.clone();
        let graph = self.graph.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default())
                .modify(keep_ownership)
                .default_backoff(),
        );
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            // Keys listed since the last `Init`, until its `InitDone`.
            let mut listed: Option<HashSet<ObjectKey>> = None;
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let mut g = lock(&graph);
                match event {
                    watcher::Event::Apply(obj) => g.upsert(item_of(index, &obj)),
                    watcher::Event::Delete(obj) => g.remove(&item_of(index, &obj).key),
                    watcher::Event::Init => listed = Some(HashSet::new()),
                    watcher::Event::InitApply(obj) => {
                        let item = item_of(index, &obj);
                        listed
                            .get_or_insert_with(HashSet::new)
                            .insert(item.key.clone());
                        g.upsert(item);
                    }
                    watcher::Event::InitDone => {
                        g.retain_listed(index, &listed.take().unwrap_or_default());
                    }
                }
                drop(g);
                changed.notify_one();
            }
        });
        Informer {
            resource,
            namespaced,
            store,
            task,
        }
    }

    /// One pass over the objects whose decisions are due (every object when `full`): verify
    /// unseen owners, decide, act. Returns whether something failed (retried soon).
    async fn round(&self, full: bool) -> bool {
        let (dirty, unseen) = {
            let mut g = lock(&self.graph);
            if full {
                g.mark_all();
            }
            let dirty = g.take_dirty();
            let unseen = g.unseen_owners(&dirty);
            (dirty, unseen)
        };
        let mut absent = BTreeSet::new();
        let mut unverified = false;
        for uid in unseen {
            match self.verify_absent(&uid).await {
                Ok(true) => {
                    absent.insert(uid);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(%uid, error = %e, "garbage collector: owner lookup failed");
                    unverified = true;
                }
            }
        }
        let actions = lock(&self.graph).decide(&dirty, &absent);
        let mut retry = Vec::new();
        for action in actions {
            if let Err(e) = self.apply(&action).await {
                tracing::info!(?action, error = %e, "garbage collector: action failed");
                retry.push(key_of(&action).clone());
            }
        }
        if unverified {
            // Decide again for everything that waited on an owner lookup.
            retry.extend(dirty);
        }
        let failed = !retry.is_empty();
        lock(&self.graph).mark(retry);
        failed
    }

    /// The cached object at `key`.
    fn object(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let informer = self.informers.get(key.resource)?.as_ref()?;
        let mut r = ObjectRef::new_with(&key.name, informer.resource.clone());
        if !key.namespace.is_empty() {
            r = r.within(&key.namespace);
        }
        informer.store.get(&r)
    }

    /// Whether the owner with `uid` is confirmed gone: a live read of what a dependent's
    /// reference names answers 404 or an object with another uid. `Ok(false)` also when it
    /// cannot be looked up (its kind is not watched).
    async fn verify_absent(&self, uid: &str) -> kube::Result<bool> {
        let found = {
            let g = lock(&self.graph);
            g.dependents(uid).into_iter().find_map(|d| {
                d.owners
                    .iter()
                    .find(|o| o.uid == uid)
                    .map(|o| (d.key.namespace.clone(), o.clone()))
            })
        };
        let Some((namespace, owner)) = found else {
            return Ok(false);
        };
        let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let Some(informer) = self
            .informers
            .iter()
            .flatten()
            .find(|i| i.resource.group == group && i.resource.kind == owner.kind)
        else {
            return Ok(false);
        };
        let api: Api<DynamicObject> = if informer.namespaced {
            if namespace.is_empty() {
                return Ok(false);
            }
            Api::namespaced_with(self.client.clone(), &namespace, &informer.resource)
        } else {
            Api::all_with(self.client.clone(), &informer.resource)
        };
        Ok(match api.get_opt(&owner.name).await? {
            None => true,
            Some(found) => found.metadata.uid.as_deref() != Some(uid),
        })
    }

    fn api(&self, key: &ObjectKey) -> Option<Api<DynamicObject>> {
        let informer = self.informers.get(key.resource)?.as_ref()?;
        Some(if informer.namespaced {
            Api::namespaced_with(self.client.clone(), &key.namespace, &informer.resource)
        } else {
            Api::all_with(self.client.clone(), &informer.resource)
        })
    }

    async fn apply(&self, action: &Action) -> kube::Result<()> {
        let key = key_of(action);
        let (Some(api), Some(obj)) = (self.api(key), self.object(key)) else {
            return Ok(());
        };
        let rv = obj.metadata.resource_version.clone();
        let result = match action {
            Action::Delete { uid, policy, .. } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    propagation_policy: Some(match policy {
                        plan::Policy::Background => kube::api::PropagationPolicy::Background,
                        plan::Policy::Foreground => kube::api::PropagationPolicy::Foreground,
                        plan::Policy::Orphan => kube::api::PropagationPolicy::Orphan,
                    }),
                    ..DeleteParams::default()
                };
                tracing::info!(resource = %key.resource, namespace = %key.namespace, name = %key.name, policy = policy.as_str(), "garbage collector: deleting a dependent whose owners are gone");
                api.delete(&key.name, &params).await.map(|_| ())
            }
            Action::RemoveOwnerRefs { owners, .. } => {
                let remaining: Vec<Value> = obj
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .filter(|o| !owners.contains(&o.uid))
                    .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
                    .collect();
                set_metadata_list(&api, &key.name, rv, "ownerReferences", remaining).await
            }
            Action::RemoveFinalizer { finalizer, .. } => {
                let remaining: Vec<Value> = obj
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .filter(|f| f != finalizer)
                    .map(|f| json!(f))
                    .collect();
                set_metadata_list(&api, &key.name, rv, "finalizers", remaining).await
            }
        };
        match result {
            // Already gone, or changed since the snapshot: the next round decides again.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other,
        }
    }
}

fn key_of(action: &Action) -> &ObjectKey {
    match action {
        Action::Delete { key, .. }
        | Action::RemoveOwnerRefs { key, .. }
        | Action::RemoveFinalizer { key, .. } => key,
    }
}

/// The graph, also after a task panicked while holding it (its updates are whole).
fn lock(graph: &Mutex<Graph>) -> MutexGuard<'_, Graph> {
    graph.lock().unwrap_or_else(|p| p.into_inner())
}

/// The graph's view of a cached object of the resource at `index`.
fn item_of(index: usize, obj: &DynamicObject) -> Item {
    let m = &obj.metadata;
    Item {
        key: ObjectKey {
            resource: index,
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
        },
        uid: m.uid.clone().unwrap_or_default(),
        owners: m
            .owner_references
            .iter()
            .flatten()
            .map(|o| OwnerRef {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                block_owner_deletion: o.block_owner_deletion == Some(true),
            })
            .collect(),
        deleting: m.deletion_timestamp.is_some(),
        finalizers: m.finalizers.clone().unwrap_or_default(),
    }
}

/// What the collector's caches keep of an object: the identity and ownership metadata its
/// decisions and writes read (upstream's collector watches metadata only); the body, labels,
/// annotations and managedFields go.
fn keep_ownership(obj: &mut DynamicObject) {
    let m = std::mem::take(&mut obj.metadata);
    obj.metadata = ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        owner_references: m.owner_references,
        finalizers: m.finalizers,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    };
    obj.data = Value::Null;
}

/// Sets `metadata.<field>` to `items` (removed when empty) with a merge patch that holds the
/// resourceVersion the decision was made at (409 when the object changed since).
async fn set_metadata_list(
    api: &Api<DynamicObject>,
    name: &str,
    resource_version: Option<String>,
    field: &str,
    items: Vec<Value>,
) -> kube::Result<()> {
    let value = if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items)
    };
    let patch = json!({"metadata": {"resourceVersion": resource_version, field: value}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_keep_identity_and_ownership_only() {
        let mut pod: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "a"}, "annotations": {"note": "x"},
                "finalizers": ["f"], "deletionTimestamp": "2026-11-29T10:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "rs", "uid": "u0", "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "m", "operation": "Update"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        keep_ownership(&mut pod);
        let kept = serde_json::to_value(&pod.metadata).unwrap_or_default();
        assert_eq!(
            kept,
            json!({"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "finalizers": ["f"], "deletionTimestamp": "2026-11-29T10:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "rs", "uid": "u0", "blockOwnerDeletion": true}]})
        );
        assert_eq!(pod.data, Value::Null);
        assert_eq!(pod.types.map(|t| t.kind).as_deref(), Some("Pod"));
    }
}
