//! The extension servers' OpenAPI in this server's (kube-aggregator's `openapi` and
//! `openapiv3` controllers): the v3 document of each service-backed group/version is served
//! under `/openapi/v3/apis/<group>/<version>` and listed in the `/openapi/v3` index; the
//! paths under `/apis/` and the definitions of each v2 document are merged into
//! `/openapi/v2`.
//!
//! # Guarantees
//! - This server's own paths and definitions win: a definition of the same name with other
//!   content is dropped (upstream renames it instead; k3rs logs the names it dropped), as
//!   is a path this server serves.
//! - Only available APIServices contribute; a document that cannot be read is left out,
//!   never failing the whole `/openapi/v2` or `/openapi/v3`.

use serde_json::Value;

use crate::openapi::v2::convert::Parts;

/// The path of a group/version's v3 document under `/openapi/v3/`.
pub fn v3_path(group: &str, version: &str) -> String {
    format!("apis/{group}/{version}")
}

/// The URL (server-relative) of `group/version`'s document in an extension server's
/// `/openapi/v3` index.
pub fn v3_document_url(index: &Value, group: &str, version: &str) -> Option<String> {
    let url = index["paths"][v3_path(group, version)]["serverRelativeURL"].as_str()?;
    url.starts_with('/').then(|| url.to_string())
}

/// Merges an extension server's v2 document into `parts`: its paths under `/apis/` and its
/// definitions, keeping what `parts` has. Returns the names of the definitions dropped
/// because `parts` has other content under that name.
pub fn merge_v2(parts: &mut Parts, ext: &Value) -> Vec<String> {
    for (path, item) in ext["paths"].as_object().into_iter().flatten() {
        if path.starts_with("/apis/") && !parts.paths.contains_key(path) {
            parts.paths.insert(path.clone(), item.clone());
        }
    }
    let mut dropped = Vec::new();
    for (name, def) in ext["definitions"].as_object().into_iter().flatten() {
        match parts.definitions.get(name) {
            Some(ours) if ours != def => dropped.push(name.clone()),
            Some(_) => {}
            None => {
                parts.definitions.insert(name.clone(), def.clone());
            }
        }
    }
    dropped
}

/// Whether `doc` is a Swagger 2.0 document with paths or definitions.
pub fn is_v2_document(doc: &Value) -> bool {
    doc["swagger"].as_str().is_some_and(|s| s.starts_with("2."))
        && (doc["paths"].is_object() || doc["definitions"].is_object())
}

/// Whether `doc` is an OpenAPI 3 document.
pub fn is_v3_document(doc: &Value) -> bool {
    doc["openapi"].as_str().is_some_and(|s| s.starts_with("3."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_the_group_versions_document_in_an_index() {
        let index = json!({"paths": {
            "apis/wardle.example.com/v1alpha1": {"serverRelativeURL": "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=AB"},
            "apis/evil.example.com/v1": {"serverRelativeURL": "https://elsewhere/doc"}}});
        assert_eq!(
            v3_document_url(&index, "wardle.example.com", "v1alpha1").as_deref(),
            Some("/openapi/v3/apis/wardle.example.com/v1alpha1?hash=AB")
        );
        assert_eq!(v3_document_url(&index, "evil.example.com", "v1"), None);
        assert_eq!(v3_document_url(&index, "wardle.example.com", "v1"), None);
    }

    #[test]
    fn merges_new_paths_and_definitions_and_keeps_ours_on_conflict() {
        let mut parts = Parts::default();
        parts
            .paths
            .insert("/api/v1/pods".into(), json!({"get": {"ours": true}}));
        parts.definitions.insert(
            "io.k8s.api.core.v1.Pod".into(),
            json!({"description": "ours"}),
        );
        parts.definitions.insert(
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status".into(),
            json!({"type": "object"}),
        );
        let ext = json!({"swagger": "2.0",
            "paths": {
                "/apis/wardle.example.com/v1alpha1/flunders": {"get": {"theirs": true}},
                "/api/v1/pods": {"get": {"theirs": true}},
                "/healthz": {"get": {}}},
            "definitions": {
                "com.example.wardle.v1alpha1.Flunder": {"type": "object"},
                "io.k8s.api.core.v1.Pod": {"description": "theirs"},
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status": {"type": "object"}}});
        assert!(is_v2_document(&ext));
        assert_eq!(merge_v2(&mut parts, &ext), ["io.k8s.api.core.v1.Pod"]);
        assert_eq!(
            parts.paths.keys().collect::<Vec<_>>(),
            ["/api/v1/pods", "/apis/wardle.example.com/v1alpha1/flunders"]
        );
        assert_eq!(parts.paths["/api/v1/pods"], json!({"get": {"ours": true}}));
        assert_eq!(
            parts.definitions["io.k8s.api.core.v1.Pod"],
            json!({"description": "ours"})
        );
        assert_eq!(
            parts.definitions["com.example.wardle.v1alpha1.Flunder"],
            json!({"type": "object"})
        );
        assert!(!is_v2_document(&json!({"openapi": "3.0.0"})));
        assert!(is_v3_document(&json!({"openapi": "3.0.0"})));
    }
}
