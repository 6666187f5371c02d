//! The served custom resources: an immutable snapshot, swapped whole when the set of
//! CustomResourceDefinitions changes (the CRD controller builds it from the datastore, so
//! every server of a cluster serves the same set). Readers take an `Arc` of the current
//! snapshot and never block writers for longer than the swap.

use std::sync::{Arc, OnceLock, RwLock};

use crate::crd::model::CustomVersion;
use k3rs_apimachinery::catalog::{self, Resource};

/// One served version of a custom resource.
#[derive(Debug, Clone)]
pub struct Served {
    pub row: &'static Resource,
    pub version: Arc<CustomVersion>,
}

/// Every served custom resource version, in discovery order (groups by first appearance,
/// versions by Kubernetes version priority).
#[derive(Debug, Default)]
pub struct Snapshot {
    pub served: Vec<Served>,
    /// OpenAPI v3 documents of the custom group-versions, keyed like the built-in ones
    /// (`apis/<group>/<version>`).
    pub openapi: std::collections::BTreeMap<String, crate::openapi::Document>,
}

impl Snapshot {
    /// The served version behind a row.
    pub fn of(&self, r: &Resource) -> Option<&Served> {
        self.served.iter().find(|s| {
            s.row.group == r.group && s.row.version == r.version && s.row.plural == r.plural
        })
    }
}

fn cell() -> &'static RwLock<Arc<Snapshot>> {
    static S: OnceLock<RwLock<Arc<Snapshot>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// The current snapshot.
pub fn snapshot() -> Arc<Snapshot> {
    cell().read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Replaces the snapshot (and the catalog's custom rows with it).
pub fn replace(next: Snapshot) {
    catalog::set_custom(next.served.iter().map(|s| s.row).collect());
    *cell().write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
}

/// The custom version of a (group, version, kind), if one is served.
pub fn by_gvk(group: &str, version: &str, kind: &str) -> Option<Arc<CustomVersion>> {
    snapshot()
        .served
        .iter()
        .find(|s| s.row.group == group && s.row.version == version && s.row.kind == kind)
        .map(|s| s.version.clone())
}

/// The custom version served at a row, if the row is a custom resource's.
pub fn version_of(r: &Resource) -> Option<Arc<CustomVersion>> {
    snapshot().of(r).map(|s| s.version.clone())
}
