//! What the admission plugins read instead of the store (upstream's listers): the API
//! server's shared informer cache of one kind, bypassed for a while where this server has
//! just written that kind.
//!
//! # Guarantees
//! - [`Lister::cache`] gives the informer only once its first list is complete; before that,
//!   and for a lister made [`Lister::none`], the plugin reads the store as it always did.
//! - A write of the kind that passes this server's admission (create, update, delete) makes
//!   the plugin read the store in that scope (the namespace; `""` for cluster-scoped kinds)
//!   for [`LIVE_AFTER_WRITE`] (upstream NamespaceLifecycle's `forceLiveLookupTTL`, 30 s): a
//!   client that creates a LimitRange and then a pod through this server gets the pod
//!   defaulted even while the watch that feeds the cache lags.
//!
//! # Assumptions
//! - Writes through another server of an HA cluster reach this cache when its watch delivers
//!   them (milliseconds, unless the server is saturated); until then the plugins decide on the
//!   state before them, as upstream's informer-backed plugins do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use k3rs_apimachinery::informers::{Cached, Informer, SharedInformerFactory};
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota, ServiceAccount};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;

/// How long a local write of a kind sends its scope's readers to the store.
pub const LIVE_AFTER_WRITE: Duration = Duration::from_secs(30);

/// The scopes written recently (pure: the clock is passed in).
#[derive(Debug, Default)]
pub struct RecentWrites {
    until: HashMap<String, Instant>,
}

impl RecentWrites {
    /// Records a write in `scope` at `now`; forgets the scopes whose time is up.
    pub fn note(&mut self, scope: &str, now: Instant) {
        self.until.retain(|_, until| *until > now);
        self.until.insert(scope.to_string(), now + LIVE_AFTER_WRITE);
    }

    /// Whether `scope` was written less than [`LIVE_AFTER_WRITE`] before `now`.
    pub fn is_recent(&self, scope: &str, now: Instant) -> bool {
        self.until.get(scope).is_some_and(|until| *until > now)
    }
}

/// One kind's informer as the plugins read it; cheap to clone (clones share it).
pub struct Lister<K: Cached> {
    informer: Option<Informer<K>>,
    recent: Arc<Mutex<RecentWrites>>,
}

impl<K: Cached> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            informer: self.informer.clone(),
            recent: self.recent.clone(),
        }
    }
}

impl<K: Cached> Default for Lister<K> {
    fn default() -> Self {
        Lister::none()
    }
}

impl<K: Cached> std::fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister")
            .field("informer", &self.informer)
            .finish_non_exhaustive()
    }
}

impl<K: Cached> Lister<K> {
    /// No cache: every read goes to the store.
    pub fn none() -> Lister<K> {
        Lister {
            informer: None,
            recent: Arc::default(),
        }
    }

    /// Reads `informer` where the module's guarantees allow it.
    pub fn new(informer: Informer<K>) -> Lister<K> {
        Lister {
            informer: Some(informer),
            recent: Arc::default(),
        }
    }

    /// The cache, when it may answer for `scope` now; `None`: read the store.
    pub fn cache(&self, scope: &str) -> Option<&Informer<K>> {
        let informer = self.informer.as_ref().filter(|i| i.has_synced())?;
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_recent(scope, Instant::now());
        (!recent).then_some(informer)
    }

    /// Records a write of the kind in `scope` (see the module's guarantees).
    pub fn note_write(&self, scope: &str) {
        if self.informer.is_some() {
            self.recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .note(scope, Instant::now());
        }
    }
}

impl<K: Cached + Serialize> Lister<K> {
    /// The cached objects of `namespace` as the store keeps them (JSON, by name, as a list of
    /// the store returns them), or `None` when the cache may not answer.
    pub fn namespaced(&self, namespace: &str) -> Option<ApiResult<Vec<Value>>> {
        let cache = self.cache(namespace)?;
        let mut objs = cache.list_filter(|o| o.meta().namespace.as_deref() == Some(namespace));
        objs.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        Some(objs.iter().map(|o| to_value(o.as_ref())).collect())
    }

    /// Every cached object (by name), or `None` when the cache may not answer for `""`.
    pub fn all(&self) -> Option<ApiResult<Vec<Value>>> {
        let mut objs = self.cache("")?.list();
        objs.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        Some(objs.iter().map(|o| to_value(o.as_ref())).collect())
    }
}

/// A cached object as JSON, as the plugins' decisions take it.
pub fn to_value<K: Serialize>(obj: &K) -> ApiResult<Value> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(format!("encoding {e}")))
}

/// The listers of the standard plugins.
#[derive(Debug, Clone, Default)]
pub struct Listers {
    pub namespaces: Lister<Namespace>,
    pub service_accounts: Lister<ServiceAccount>,
    pub limit_ranges: Lister<LimitRange>,
    pub priority_classes: Lister<PriorityClass>,
    pub resource_quotas: Lister<ResourceQuota>,
    pub storage_classes: Lister<StorageClass>,
}

impl Listers {
    /// Listers over `informers` (their watches start with the factory).
    pub fn of(informers: &SharedInformerFactory) -> Listers {
        Listers {
            namespaces: Lister::new(informers.informer()),
            service_accounts: Lister::new(informers.informer()),
            limit_ranges: Lister::new(informers.informer()),
            priority_classes: Lister::new(informers.informer()),
            resource_quotas: Lister::new(informers.informer()),
            storage_classes: Lister::new(informers.informer()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    #[test]
    fn a_write_sends_its_scope_to_the_store_for_thirty_seconds() {
        let t0 = Instant::now();
        let mut w = RecentWrites::default();
        assert!(!w.is_recent("a", t0));
        w.note("a", t0);
        assert!(w.is_recent("a", t0));
        assert!(w.is_recent("a", t0 + Duration::from_secs(29)));
        assert!(!w.is_recent("a", t0 + LIVE_AFTER_WRITE));
        assert!(!w.is_recent("b", t0), "other scopes read the cache");
        // Expired scopes are forgotten at the next write.
        w.note("b", t0 + Duration::from_secs(31));
        assert_eq!(w.until.len(), 1);
        assert!(w.is_recent("b", t0 + Duration::from_secs(31)));
    }

    #[test]
    fn an_unsynced_or_missing_cache_reads_the_store() {
        let none: Lister<LimitRange> = Lister::none();
        assert!(none.cache("n").is_none());
        assert!(none.namespaced("n").is_none());
        let factory = SharedInformerFactory::unstarted(CancellationToken::new());
        let unsynced = Lister::<LimitRange>::new(factory.informer());
        assert!(unsynced.cache("n").is_none());
        assert!(unsynced.all().is_none());
    }

    #[test]
    fn typed_objects_read_as_stored_json() {
        let lr: LimitRange = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "namespace": "n"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}
        }))
        .unwrap();
        let v = to_value(&lr).unwrap();
        assert_eq!(v["spec"]["limits"][0]["default"]["cpu"], "500m");
        assert_eq!(v["metadata"]["namespace"], "n");
    }
}
