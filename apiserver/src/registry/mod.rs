//! The generic registry: every resource's CRUD, list and watch over the [`Datastore`], with
//! the per-kind strategies from `resources/`. Objects are `serde_json::Value` at the edge and
//! MessagePack bytes in the store, without `metadata.resourceVersion` (which is the key's
//! `mod_revision`, set on every read).

#[cfg(test)]
mod arbitrary;
pub(crate) mod binding;
pub(crate) mod cache;
pub(crate) mod continue_token;
mod create;
mod delete;
mod event_ttl;
pub(crate) mod eviction;
pub(crate) mod keys;
pub(crate) mod limits;
mod list;
pub(crate) mod list_pager;
pub(crate) mod managed_fields;
#[cfg(test)]
pub(crate) mod mem_store;
pub(crate) mod patch;
pub(crate) mod projection;
pub(crate) mod rbac_escalation;
mod replace;
mod service;
mod stored_form;
pub(crate) mod transcode;
mod update;
pub(crate) mod watch;

use std::sync::Arc;

use ipnet::IpNet;
use serde_json::Value;

pub use delete::{DeleteOptions, Deleted};
pub use list::{ListOptions, RvMatch};
pub use list_pager::ListPager;
pub use patch::PatchOptions;
pub use watch::WatchOptions;

use crate::resources::{event_convert, hpa_convert};
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};
use k3rs_datastore::{Datastore, KeyValue};

/// Which object(s) a request is about.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource (from the catalog or a CRD).
    pub resource: &'static Resource,
    /// Set for namespaced requests; `None` lists across namespaces.
    pub namespace: Option<String>,
    /// The object; `None` for lists, watches and creates without a name yet.
    pub name: Option<String>,
    /// `status`, `scale`, `binding`…
    pub subresource: Option<String>,
}

impl Target {
    /// The object's name, `""` when there is none.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// For NotFound/Conflict/AlreadyExists (resource plural).
    pub fn subject(&self) -> Subject<'_> {
        Subject {
            group: self.resource.group,
            kind: self.resource.plural,
            name: self.name(),
        }
    }

    /// For Invalid (Kind).
    pub fn kind_subject<'a>(&'a self, name: &'a str) -> Subject<'a> {
        Subject {
            group: self.resource.group,
            kind: self.resource.kind,
            name,
        }
    }

    /// The object's key in the datastore.
    pub fn key(&self) -> Vec<u8> {
        keys::object_key(self.resource, self.namespace.as_deref(), self.name())
    }
}

/// Whether a write is persisted (`dryRun=All` validates and answers, but stores nothing), and
/// who makes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The field manager recorded in managedFields as an `Update` (see
    /// [`managed_fields::manager_of`]); `None` leaves managedFields alone (server-side apply
    /// computes its own, bootstrap objects have none).
    pub field_manager: Option<String>,
    /// Who writes (admission and strategies that record the requester, e.g. a CSR's
    /// `spec.username`); `None` for the server's own bootstrap writes.
    pub user: Option<Arc<k3rs_auth::UserInfo>>,
}

/// The registry, shared by every request.
pub struct Registry {
    pub(crate) ds: Arc<dyn Datastore>,
    pub(crate) service_cidr: IpNet,
    /// Serializes ClusterIP allocation with the create that claims the address.
    pub(crate) ip_lock: tokio::sync::Mutex<()>,
    event_leases: event_ttl::EventLeases,
    /// One datastore watch per watched resource, fanned out to its API watchers.
    pub(crate) watch_caches: cache::WatchCaches,
    /// Run on every create, update and delete.
    pub(crate) admission: crate::admission::Chain,
    /// Run on every user's create and update before the write (RBAC escalation prevention).
    write_check: std::sync::OnceLock<Arc<dyn WriteCheck>>,
}

/// A check on the final object of a user's create or update, before it is written; its error
/// is the request's answer. Writes without a user (the server's own) are not checked.
pub trait WriteCheck: Send + Sync {
    /// `Err` refuses the write with that error.
    fn check<'a>(
        &'a self,
        t: &'a Target,
        new: &'a Value,
        old: Option<&'a Value>,
        user: &'a Arc<k3rs_auth::UserInfo>,
    ) -> futures::future::BoxFuture<'a, ApiResult<()>>;
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("service_cidr", &self.service_cidr)
            .field("admission", &self.admission)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry with the [standard](crate::admission::Chain::standard) admission
    /// plugins.
    pub fn new(ds: Arc<dyn Datastore>, service_cidr: IpNet) -> Registry {
        Registry {
            ds,
            service_cidr,
            ip_lock: tokio::sync::Mutex::new(()),
            event_leases: event_ttl::EventLeases::default(),
            watch_caches: cache::WatchCaches::new(
                cache::RING_CAPACITY,
                cache::BUFFER,
                watch::BOOKMARK_INTERVAL,
            ),
            admission: crate::admission::Chain::standard(),
            write_check: std::sync::OnceLock::new(),
        }
    }

    /// Installs the write check (once; later calls are ignored).
    pub fn set_write_check(&self, check: Arc<dyn WriteCheck>) {
        let _ = self.write_check.set(check);
    }

    /// Runs the write check for a user's write.
    pub(crate) async fn check_write(
        &self,
        t: &Target,
        new: &Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> ApiResult<()> {
        match (self.write_check.get(), &opts.user) {
            (Some(c), Some(user)) => c.check(t, new, old, user).await,
            _ => Ok(()),
        }
    }

    /// Replaces the admission plugins.
    pub fn with_admission(mut self, chain: crate::admission::Chain) -> Registry {
        self.admission = chain;
        self
    }

    /// The admission plugins every write passes.
    pub fn admission(&self) -> &crate::admission::Chain {
        &self.admission
    }

    /// The store every resource is kept in.
    pub fn datastore(&self) -> &Arc<dyn Datastore> {
        &self.ds
    }

    /// Every key under `prefix` at the latest revision.
    pub(crate) async fn all_under(&self, prefix: Vec<u8>) -> ApiResult<Vec<KeyValue>> {
        let resp = self
            .ds
            .list(k3rs_datastore::ListRequest {
                range_end: k3rs_datastore::prefix_end(&prefix),
                key: prefix,
                limit: 0,
                revision: 0,
            })
            .await?;
        Ok(resp.kvs)
    }

    /// GET of one object.
    pub async fn get(&self, t: &Target) -> ApiResult<Value> {
        Ok(self.get_live(t).await?.object)
    }

    /// The stored object `t` (a linearizable read) and its `mod_revision`, decoded once.
    pub(crate) async fn get_live(&self, t: &Target) -> ApiResult<Live> {
        let (kv, _) = self.ds.get(&t.key()).await?;
        let kv = kv.ok_or_else(|| ApiError::not_found(t.subject()))?;
        Ok(Live {
            object: decode_as(t.resource, &kv)?,
            mod_revision: kv.mod_revision,
        })
    }
}

/// An object as read from the store, decoded as its resource serves it.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    /// The object, with its resourceVersion.
    pub object: Value,
    /// The key's `mod_revision`.
    pub mod_revision: i64,
}

/// Serializes an object for the store (without its resourceVersion).
pub fn encode(obj: &Value) -> ApiResult<Vec<u8>> {
    limits::check_depth(obj)?;
    let bytes = rmp_serde::to_vec_named(&stored_form::WithoutResourceVersion(obj))
        .map_err(|e| ApiError::internal(format!("encoding object: {e}")))?;
    limits::check_size(&bytes)?;
    Ok(bytes)
}

/// Serializes an object written through `r` in its stored form (events.k8s.io Events are
/// stored as core/v1 Events, autoscaling/v1 HorizontalPodAutoscalers as autoscaling/v2).
pub fn encode_as(r: &Resource, obj: &Value) -> ApiResult<Vec<u8>> {
    if event_convert::is_events_api(r) {
        encode(&event_convert::to_core(obj))
    } else if hpa_convert::is_v1(r) {
        encode(&hpa_convert::to_v2(obj))
    } else {
        encode(obj)
    }
}

/// Decodes a stored object as `r` serves it, with its resourceVersion.
pub fn decode_as(r: &Resource, kv: &KeyValue) -> ApiResult<Value> {
    let obj = decode(kv)?;
    Ok(if hpa_convert::is_v1(r) {
        hpa_convert::to_v1(&obj)
    } else {
        event_convert::from_storage(r, obj)
    })
}

/// Whether `r` serves its objects converted from the stored form (autoscaling/v1
/// HorizontalPodAutoscalers, events.k8s.io Events), not as they are stored.
pub fn is_converted(r: &Resource) -> bool {
    hpa_convert::is_v1(r) || event_convert::is_events_api(r)
}

/// What `paths` (dotted) of a stored object read as `r` serves it: only those values are
/// decoded where the stored form is the served one ([`projection`]), the whole object
/// ([`decode_as`]) where it is converted or the projection rejects the bytes.
pub fn decode_paths_as(r: &Resource, kv: &KeyValue, paths: &[&str]) -> ApiResult<Value> {
    if !is_converted(r) {
        if let Ok(v) = projection::project(&kv.value, paths) {
            return Ok(v);
        }
    }
    // Converted, or bytes the projection rejects: the full decode (and its error).
    decode_as(r, kv)
}

/// Decodes a stored object and sets its resourceVersion to the key's `mod_revision`.
pub fn decode(kv: &KeyValue) -> ApiResult<Value> {
    let mut obj: Value = rmp_serde::from_slice(&kv.value).map_err(|e| {
        ApiError::internal(format!(
            "decoding {}: {e}",
            String::from_utf8_lossy(&kv.key)
        ))
    })?;
    meta::set_resource_version(&mut obj, kv.mod_revision);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codec_round_trip_sets_resource_version() {
        let obj = json!({"metadata": {"name": "x", "resourceVersion": "5", "labels": {"a": "b"}},
            "data": {"n": 1, "f": 1.5, "neg": -3, "list": [true, null]}});
        let bytes = encode(&obj).unwrap();
        let kv = KeyValue {
            key: b"/registry/configmaps/default/x".to_vec(),
            mod_revision: 9,
            value: bytes,
            ..Default::default()
        };
        let back = decode(&kv).unwrap();
        assert_eq!(back["metadata"]["resourceVersion"], "9");
        assert_eq!(back["data"], obj["data"]);
        assert_eq!(back["metadata"]["labels"], obj["metadata"]["labels"]);
    }
}
