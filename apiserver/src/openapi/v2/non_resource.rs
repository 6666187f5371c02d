//! The non-resource paths of `/openapi/v2`, as kube-apiserver lists them beside the resources'
//! (its go-restful routes, in `api/openapi-spec/swagger.json`): discovery (`/api/`,
//! `/api/v1/`, `/apis/`, `/apis/<group>/`, `/apis/<group>/<version>/`), `/version/` and the
//! service account issuer's `/.well-known/openid-configuration/` and `/openid/v1/jwks/`, with
//! upstream's operation ids, tags, media types and response schemas, and the definitions those
//! schemas name (`APIVersions`, `APIGroupList`, `APIGroup`, `APIResourceList`, `version.Info`).
//!
//! # Guarantees
//! - Only endpoints k3rs serves are listed: kube-apiserver's `/logs/` (the node's log files)
//!   is not served, so it is not listed.
//! - Group paths are listed for the built-in groups only, as upstream: custom resources'
//!   groups are not in kube-apiserver's v2 document, and an extension server's document brings
//!   its own (merged by [`crate::aggregator::openapi`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::version;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

use super::convert::{self, Parts, V2_REF};
use crate::openapi::paths::{group_word, to_valid_operation_id};

/// What kube-apiserver's discovery routes consume and produce.
const DISCOVERY_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// The discovery kinds kube declares with a group-version-kind of `v1` in the core group.
const DISCOVERY_KINDS: &[&str] = &["APIGroup", "APIGroupList", "APIResourceList", "APIVersions"];

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
const VERSION_INFO: &str = "io.k8s.apimachinery.pkg.version.Info";

/// One `get` operation in upstream's shape (keys as kube writes them; `consumes` only when
/// the route declares it).
fn get(
    description: &str,
    id: &str,
    tag: &str,
    consumes: Option<&[&str]>,
    produces: &[&str],
    ok: Value,
) -> Value {
    let mut op = json!({
        "description": description,
        "operationId": id,
        "produces": produces,
        "responses": {
            "200": { "description": "OK", "schema": ok },
            "401": { "description": "Unauthorized" },
        },
        "schemes": ["https"],
        "tags": [tag],
    });
    if let Some(c) = consumes {
        op["consumes"] = json!(c);
    }
    json!({ "get": op })
}

fn meta_ref(kind: &str) -> Value {
    json!({ "$ref": format!("{V2_REF}{META}.{kind}") })
}

/// The discovery `get` of one path: `description`, the operation id, the tag, the kind.
fn discovery(description: &str, id: String, tag: String, kind: &str) -> Value {
    get(
        description,
        &id,
        &tag,
        Some(DISCOVERY_TYPES),
        DISCOVERY_TYPES,
        meta_ref(kind),
    )
}

/// The non-resource path items, for the built-in group-versions `gvs` (`("", "v1")`,
/// `("apps", "v1")`, …).
pub fn paths(gvs: &[(&str, &str)]) -> Map<String, Value> {
    let string = json!({ "type": "string" });
    let mut out = Map::new();
    out.insert(
        "/.well-known/openid-configuration/".into(),
        get(
            "get service account issuer OpenID configuration, also known as the 'OIDC discovery doc'",
            "getServiceAccountIssuerOpenIDConfiguration",
            "WellKnown",
            None,
            &["application/json"],
            string.clone(),
        ),
    );
    out.insert(
        "/openid/v1/jwks/".into(),
        get(
            "get service account issuer OpenID JSON Web Key Set (contains public token verification keys)",
            "getServiceAccountIssuerOpenIDKeyset",
            "openid",
            None,
            &["application/jwk-set+json"],
            string,
        ),
    );
    out.insert(
        "/version/".into(),
        get(
            "get the code version",
            "getCodeVersion",
            "version",
            Some(&["application/json"]),
            &["application/json"],
            json!({ "$ref": format!("{V2_REF}{VERSION_INFO}") }),
        ),
    );
    out.insert(
        "/api/".into(),
        discovery(
            "get available API versions",
            "getCoreAPIVersions".into(),
            "core".into(),
            "APIVersions",
        ),
    );
    out.insert(
        "/apis/".into(),
        discovery(
            "get available API versions",
            "getAPIVersions".into(),
            "apis".into(),
            "APIGroupList",
        ),
    );
    for (group, version) in gvs {
        let g = group_word(group);
        let g_path = if group.is_empty() {
            "/api".to_string()
        } else {
            format!("/apis/{group}")
        };
        let infix = to_valid_operation_id(g, true);
        let tag = to_valid_operation_id(g, false);
        if !group.is_empty() {
            out.insert(
                format!("{g_path}/"),
                discovery(
                    "get information of a group",
                    format!("get{infix}APIGroup"),
                    tag.clone(),
                    "APIGroup",
                ),
            );
        }
        out.insert(
            format!("{g_path}/{version}/"),
            discovery(
                "get available resources",
                format!(
                    "get{infix}{}APIResources",
                    to_valid_operation_id(version, true)
                ),
                format!("{tag}_{}", to_valid_operation_id(version, false)),
                "APIResourceList",
            ),
        );
    }
    out
}

/// The definitions the non-resource paths name, and those they reference, converted to
/// Swagger 2.0; the discovery kinds carry kube's `x-kubernetes-group-version-kind`.
pub fn definitions() -> Map<String, Value> {
    let mut gen = SchemaGenerator::new(SchemaSettings::openapi3());
    gen.subschema_for::<meta::APIVersions>();
    gen.subschema_for::<meta::APIGroupList>();
    gen.subschema_for::<meta::APIGroup>();
    gen.subschema_for::<meta::APIResourceList>();
    gen.subschema_for::<version::Info>();
    let mut out: Map<String, Value> = gen
        .take_definitions(true)
        .into_iter()
        .map(|(name, v3)| (name, convert::schema(&v3)))
        .collect();
    for kind in DISCOVERY_KINDS {
        if let Some(Value::Object(def)) = out.get_mut(&format!("{META}.{kind}")) {
            def.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{ "group": "", "kind": kind, "version": "v1" }]),
            );
        }
    }
    out
}

/// Adds the non-resource paths of `gvs` and their definitions to `parts` (a definition
/// already there is kept).
pub fn add(parts: &mut Parts, gvs: &[(&str, &str)]) {
    parts.paths.extend(paths(gvs));
    for (name, def) in definitions() {
        parts.definitions.entry(name).or_insert(def);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_and_version_paths_take_kubes_ids_and_tags() {
        let p = paths(&[
            ("", "v1"),
            ("rbac.authorization.k8s.io", "v1"),
            ("apps", "v1"),
        ]);
        assert_eq!(
            p["/apis/rbac.authorization.k8s.io/"],
            json!({"get": {
                "consumes": DISCOVERY_TYPES,
                "description": "get information of a group",
                "operationId": "getRbacAuthorizationAPIGroup",
                "produces": DISCOVERY_TYPES,
                "responses": {
                    "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup"}},
                    "401": {"description": "Unauthorized"},
                },
                "schemes": ["https"],
                "tags": ["rbacAuthorization"],
            }})
        );
        let gv = &p["/apis/rbac.authorization.k8s.io/v1/"]["get"];
        assert_eq!(gv["operationId"], "getRbacAuthorizationV1APIResources");
        assert_eq!(gv["tags"], json!(["rbacAuthorization_v1"]));
        let core = &p["/api/v1/"]["get"];
        assert_eq!(core["operationId"], "getCoreV1APIResources");
        assert_eq!(core["tags"], json!(["core_v1"]));
        assert_eq!(
            core["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"
        );
        assert_eq!(p["/apis/apps/"]["get"]["operationId"], "getAppsAPIGroup");
        assert_eq!(p["/api/"]["get"]["operationId"], "getCoreAPIVersions");
        assert_eq!(p["/apis/"]["get"]["operationId"], "getAPIVersions");
        let keys: Vec<&str> = p.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 10, "{keys:?}");
        assert!(!keys.iter().any(|k| k.starts_with("/logs")), "not served");
    }

    #[test]
    fn version_and_issuer_paths_are_upstreams() {
        let p = paths(&[]);
        assert_eq!(
            p["/version/"],
            json!({"get": {
                "consumes": ["application/json"],
                "description": "get the code version",
                "operationId": "getCodeVersion",
                "produces": ["application/json"],
                "responses": {
                    "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.version.Info"}},
                    "401": {"description": "Unauthorized"},
                },
                "schemes": ["https"],
                "tags": ["version"],
            }})
        );
        let jwks = &p["/openid/v1/jwks/"]["get"];
        assert_eq!(jwks["operationId"], "getServiceAccountIssuerOpenIDKeyset");
        assert_eq!(jwks["produces"], json!(["application/jwk-set+json"]));
        assert_eq!(
            jwks["responses"]["200"]["schema"],
            json!({"type": "string"})
        );
        assert!(jwks.get("consumes").is_none());
        let oidc = &p["/.well-known/openid-configuration/"]["get"];
        assert_eq!(
            oidc["operationId"],
            "getServiceAccountIssuerOpenIDConfiguration"
        );
        assert_eq!(oidc["tags"], json!(["WellKnown"]));
    }

    #[test]
    fn every_named_definition_is_there_in_v2_form() {
        let defs = definitions();
        for name in [
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIResource",
            "io.k8s.apimachinery.pkg.apis.meta.v1.GroupVersionForDiscovery",
            VERSION_INFO,
        ] {
            assert!(defs.contains_key(name), "{name}");
        }
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup"]
                ["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "APIGroup", "version": "v1"}])
        );
        let text = Value::Object(defs).to_string();
        assert!(!text.contains("#/components/"), "v3 refs left: {text}");
    }
}
