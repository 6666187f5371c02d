//! The CRD controller: lists and watches the CRDs in the datastore and, on every change (and
//! every few seconds, for custom resources still finalizing), (1) swaps the served snapshot,
//! (2) writes each CRD's status (names, conditions, stored versions) through the registry,
//! (3) for a CRD being deleted, deletes its custom resources and then removes the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer.
//!
//! Every server runs it; status writes are idempotent (conditions keep their transition
//! time) and guarded by resourceVersion, so concurrent controllers converge.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{model, served, status};
use crate::registry::decode;
use crate::registry::keys;
use crate::registry::DeleteOptions;
use crate::registry::Registry;
use crate::registry::Target;
use crate::registry::WriteOptions;
use crate::resources::custom;
use k3rs_apimachinery::catalog::{self, Resource};
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::{prefix_end, ListRequest, WatchItem, WatchRequest};

/// The finalizer that makes a CRD's deletion wait for its custom resources.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Resync period (custom resources whose own finalizers delay a CRD's deletion).
const RESYNC: Duration = Duration::from_secs(5);

fn crd_resource() -> &'static Resource {
    catalog::lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .expect("the CRD resource is a built-in row")
}

fn crd_target(name: &str, subresource: Option<&str>) -> Target {
    Target {
        resource: crd_resource(),
        namespace: None,
        name: Some(name.to_string()),
        subresource: subresource.map(str::to_string),
    }
}

/// Lists the CRDs; returns them with the revision they were read at.
pub async fn list(reg: &Registry) -> ApiResult<(Vec<Value>, i64)> {
    let prefix = keys::list_prefix(crd_resource(), None);
    let resp = reg
        .datastore()
        .list(ListRequest {
            range_end: prefix_end(&prefix),
            key: prefix,
            limit: 0,
            revision: 0,
        })
        .await?;
    let crds = resp.kvs.iter().map(decode).collect::<ApiResult<Vec<_>>>()?;
    Ok((crds, resp.revision))
}

/// One pass: serve what the CRDs define, then reconcile each CRD.
pub async fn sync(reg: &Registry, crds: &[Value]) {
    custom::replace(served::snapshot(crds));
    for crd in crds {
        if let Err(e) = reconcile(reg, crd, crds).await {
            if e.code != 409 && e.code != 404 {
                tracing::warn!(crd = meta::name(crd), error = %e.message, "reconciling a CRD");
            }
        }
    }
}

async fn reconcile(reg: &Registry, crd: &Value, all: &[Value]) -> ApiResult<()> {
    let name = meta::name(crd).to_string();
    let want = status::desired(crd, all, &meta::now_rfc3339());
    if crd["status"] != want {
        let mut body = crd.clone();
        body["status"] = want;
        let t = crd_target(&name, Some("status"));
        // The next watch event brings the stored status; finish this pass with it.
        reg.update(&t, body, WriteOptions::default()).await?;
        return Ok(());
    }
    let cleaning =
        meta::is_deleting(crd) && meta::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER);
    if cleaning && delete_instances(reg, crd).await? == 0 {
        let mut body = crd.clone();
        let rest: Vec<String> = meta::finalizers(crd)
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .collect();
        body["metadata"]["finalizers"] = json!(rest);
        reg.update(&crd_target(&name, None), body, WriteOptions::default())
            .await?;
    }
    Ok(())
}

/// Deletes the custom resources of a CRD; returns how many still exist (pending their own
/// finalizers).
async fn delete_instances(reg: &Registry, crd: &Value) -> ApiResult<usize> {
    let mut versions = model::served_versions(crd);
    if versions.is_empty() {
        // Nothing served: no custom resource can exist beyond what storage holds; use any
        // version to address the keys.
        let mut any = crd.clone();
        if let Some(vs) = any["spec"]["versions"].as_array_mut() {
            vs.iter_mut().for_each(|v| v["served"] = json!(true));
        }
        versions = model::served_versions(&any);
    }
    let Some(cv) = versions.first() else {
        return Ok(0);
    };
    let row = served::row_of(cv);
    let kvs = reg.all_under(keys::list_prefix(row, None)).await?;
    let mut left = 0;
    for kv in &kvs {
        let obj = decode(kv)?;
        let t = Target {
            resource: row,
            namespace: Some(meta::namespace(&obj).to_string()).filter(|n| !n.is_empty()),
            name: Some(meta::name(&obj).to_string()),
            subresource: None,
        };
        match reg.delete(&t, &DeleteOptions::default()).await {
            Ok(crate::registry::Deleted::Gone(_)) => {}
            Ok(crate::registry::Deleted::Pending(_)) => left += 1,
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(left)
}

/// Lists, syncs, then watches until the watch ends; returns on stop.
async fn list_and_watch(reg: &Registry, stop: &CancellationToken) -> ApiResult<()> {
    let (crds, revision) = list(reg).await?;
    sync(reg, &crds).await;
    let prefix = keys::list_prefix(crd_resource(), None);
    let mut events = reg
        .datastore()
        .watch(WatchRequest {
            range_end: prefix_end(&prefix),
            key: prefix,
            start_revision: revision + 1,
            prev_kv: false,
            progress_notify: false,
        })
        .await?;
    let mut resync = tokio::time::interval(RESYNC);
    resync.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = resync.tick() => {
                let (crds, _) = list(reg).await?;
                sync(reg, &crds).await;
            }
            item = events.next() => match item {
                Some(WatchItem::Events(_)) => {
                    let (crds, _) = list(reg).await?;
                    sync(reg, &crds).await;
                }
                Some(WatchItem::Progress { .. }) => {}
                Some(WatchItem::Compacted { .. }) | None => {
                    return Err(ApiError::internal("the CRD watch ended"));
                }
                Some(WatchItem::Failed(e)) => return Err(ApiError::internal(e)),
            },
        }
    }
}

/// Runs the controller until `stop` is cancelled; relists after a failed watch.
pub async fn run(reg: Arc<Registry>, stop: CancellationToken) {
    while !stop.is_cancelled() {
        if let Err(e) = list_and_watch(&reg, &stop).await {
            tracing::debug!(error = %e.message, "CRD controller: relisting");
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
