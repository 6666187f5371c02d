//! From the datastore's CRDs to what is served: the interned catalog rows of every served
//! version of every established CRD, and their OpenAPI documents.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use sha2::Digest;

use super::model::{served_versions, CustomVersion};
use super::{openapi, status};
use crate::resources::custom::{Served, Snapshot};
use crate::resources::intern;
use k3rs_apimachinery::catalog::{NameRule, Resource, Subresource, ALL_VERBS, SCALE, SUB_VERBS};

/// The catalog row of one custom version (interned: equal rows are one allocation).
pub fn row_of(cv: &CustomVersion) -> &'static Resource {
    let (group, version, kind) = (
        intern::str(&cv.group),
        intern::str(&cv.version),
        intern::str(&cv.kind),
    );
    let mut subs = Vec::new();
    if cv.status {
        subs.push(Subresource {
            name: "status",
            group,
            version,
            kind,
            verbs: SUB_VERBS,
        });
    }
    if cv.scale.is_some() {
        subs.push(SCALE);
    }
    let strs = |v: &[String]| intern::list(&v.iter().map(|s| intern::str(s)).collect::<Vec<_>>());
    intern::row(Resource {
        group,
        version,
        kind,
        plural: intern::str(&cv.plural),
        singular: intern::str(&cv.singular),
        namespaced: cv.namespaced,
        verbs: ALL_VERBS,
        short_names: strs(&cv.short_names),
        categories: strs(&cv.categories),
        subresources: intern::subresources(&subs),
        has_status: cv.status,
        has_spec: true,
        storage_prefix: intern::str(&format!("/registry/{}/{}", cv.group, cv.plural)),
        name_rule: NameRule::Subdomain,
        // customresource/etcd.go: a removed custom resource answers with a Status.
        returns_deleted_object: false,
        field_labels: &[],
    })
}

/// What the CRDs serve: every served version of every established CRD, CRDs in name order.
pub fn snapshot(crds: &[Value]) -> Snapshot {
    let mut sorted: Vec<&Value> = crds.iter().filter(|c| status::established(c)).collect();
    sorted.sort_by_key(|c| c["metadata"]["name"].as_str().unwrap_or("").to_string());
    let mut served = Vec::new();
    for crd in sorted {
        for cv in served_versions(crd) {
            let row = row_of(&cv);
            served.push(Served {
                row,
                version: Arc::new(cv),
            });
        }
    }
    let mut by_gv: BTreeMap<String, Vec<(&'static Resource, &CustomVersion)>> = BTreeMap::new();
    for s in &served {
        by_gv
            .entry(format!("apis/{}/{}", s.row.group, s.row.version))
            .or_default()
            .push((s.row, &s.version));
    }
    let openapi = by_gv
        .into_iter()
        .map(|(path, rows)| {
            let body = openapi::document(&rows).to_string();
            let hash = hex::encode_upper(sha2::Sha512::digest(body.as_bytes()));
            (path, crate::openapi::Document { body, hash })
        })
        .collect();
    Snapshot { served, openapi }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn established_crds_become_interned_rows() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]}});
        assert!(snapshot(std::slice::from_ref(&crd)).served.is_empty());
        crd["status"] = status::desired(&crd, &[], "T");
        let s = snapshot(std::slice::from_ref(&crd));
        assert_eq!(s.served.len(), 1);
        let r = s.served[0].row;
        assert_eq!(
            (r.group, r.version, r.plural, r.kind),
            ("example.com", "v1", "widgets", "Widget")
        );
        assert_eq!(r.storage_prefix, "/registry/example.com/widgets");
        assert_eq!(r.short_names, ["wd"]);
        assert_eq!(
            r.subresources.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["status", "scale"]
        );
        // Rebuilding (e.g. after a status update) reuses the interned row.
        let again = snapshot(std::slice::from_ref(&crd));
        assert!(std::ptr::eq(again.served[0].row, r));
        let doc: Value = serde_json::from_str(&s.openapi["apis/example.com/v1"].body).unwrap();
        let def = &doc["components"]["schemas"]["com.example.v1.Widget"];
        assert_eq!(
            def["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
        );
        assert_eq!(
            def["properties"]["spec"]["properties"]["replicas"]["type"],
            "integer"
        );
        assert!(
            doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["get"]
                .is_object()
        );
        let collection = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"];
        assert_eq!(collection.get("patch"), None, "no PATCH on a collection");
        assert!(
            doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
                .is_object()
        );
    }

    /// The only test that swaps the process-wide snapshot (others must not rely on it).
    #[test]
    fn discovery_and_lookups_follow_the_snapshot() {
        use crate::discovery;
        use crate::resources::custom;
        use k3rs_apimachinery::catalog;
        let mut crd = json!({"metadata": {"name": "gizmos.snapshot.example.org"}, "spec": {
            "group": "snapshot.example.org", "scope": "Cluster",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}});
        crd["status"] = status::desired(&crd, &[], "T");
        let before = discovery::aggregated(false);
        custom::replace(snapshot(std::slice::from_ref(&crd)));
        let r = catalog::lookup("snapshot.example.org", "v1", "gizmos").expect("served");
        assert!(!r.namespaced && r.has_status);
        let after = discovery::aggregated(false);
        assert_ne!(before, after);
        let group = after["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "snapshot.example.org")
            .expect("the group is discovered");
        let res = &group["versions"][0]["resources"][0];
        assert_eq!(res["resource"], "gizmos");
        assert_eq!(res["scope"], "Cluster");
        assert_eq!(res["shortNames"], json!(["gz"]));
        assert_eq!(res["subresources"][0]["subresource"], "status");
        custom::replace(Snapshot::default());
        assert!(catalog::lookup("snapshot.example.org", "v1", "gizmos").is_none());
        assert_eq!(discovery::aggregated(false), before);
    }
}
