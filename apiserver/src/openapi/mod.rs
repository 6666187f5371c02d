//! OpenAPI v3 (JSON), as kube-apiserver serves it (and, from the same documents, OpenAPI v2:
//! [`v2`]): `/openapi/v3` lists one document per
//! group-version of the catalog (`api/v1`, `apis/apps/v1`, …) with a content hash, and
//! `/openapi/v3/<group-version path>` serves each document.
//!
//! # Guarantees
//! - The documents are built once, on first use, and never change while the process runs.
//! - `?hash=` equal to the current hash gets `Cache-Control: public, immutable`; another hash
//!   is redirected (301) to the current one; every answer carries an `ETag`, and a matching
//!   `If-None-Match` gets 304.
//! - Every PATCH operation declares `fieldValidation` and the four patch content types, so
//!   kubectl validates server-side (`fieldValidation=Strict`) and computes client-side apply
//!   patches from the schemas' patch extensions.

pub(crate) mod kinds;
pub(crate) mod patch_ext;
pub(crate) mod paths;
pub(crate) mod schemas;
pub(crate) mod strict;
pub mod v2;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use sha2::Digest;

use k3rs_apimachinery::catalog::Resource;

use k3rs_apimachinery::catalog::CATALOG;
use k3rs_apimachinery::status::ApiError;
use k3rs_apimachinery::status::ApiResult;

/// One served document.
#[derive(Debug, PartialEq, Eq)]
pub struct Document {
    /// The document as served (JSON).
    pub body: String,
    /// Upper-case hex SHA-512 of `body`, like kube-apiserver's.
    pub hash: String,
}

/// Every group-version document, keyed by its path under `/openapi/v3/`. Built on the first
/// request for them: the documents (about 3 MB of JSON, and some 15 MB of transient values to
/// build) are not needed to validate bodies, which [`Definitions`] serve.
#[derive(Debug)]
pub(crate) struct OpenApiV3 {
    pub documents: BTreeMap<String, Document>,
    index: String,
}

/// Every definition of every built-in document (names are global:
/// `io.k8s.api.core.v1.Pod`) and the kinds they describe: what field validation and the
/// custom resources' documents read.
#[derive(Debug)]
pub struct Definitions {
    schemas: Map<String, Value>,
    kinds: Vec<schemas::KindSchema>,
}

/// The built-in group-versions of the catalog (the built-in rows and the optional built-in
/// groups served when it is built), each with its resources.
fn group_versions() -> Vec<((&'static str, &'static str), Vec<&'static Resource>)> {
    let rows: Vec<&'static Resource> = CATALOG
        .iter()
        .chain(k3rs_apimachinery::catalog::local_extension_rows())
        .collect();
    let mut out: Vec<((&'static str, &'static str), Vec<&'static Resource>)> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|(gv, _)| *gv == (r.group, r.version)) {
            Some((_, resources)) => resources.push(r),
            None => out.push(((r.group, r.version), vec![r])),
        }
    }
    out
}

/// `api/v1` or `apis/<group>/<version>`.
fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The document of one group-version.
pub(crate) fn document(c: &schemas::Components, resources: &[&'static Resource]) -> Value {
    let name = |g: &str, v: &str, k: &str| c.name_of(g, v, k);
    let mut paths = Map::new();
    for r in resources {
        for (p, item) in paths::resource_paths(r, &name) {
            paths.insert(p, item);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": super::version::GIT_VERSION },
        "paths": paths,
        "components": {
            "schemas": c.schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                },
            },
        },
        "security": [{ "BearerToken": [] }],
    })
}

impl OpenApiV3 {
    /// Builds every document of the catalog.
    pub fn build() -> OpenApiV3 {
        let mut documents = BTreeMap::new();
        for ((g, v), resources) in group_versions() {
            let c = schemas::components(&resources);
            let body = document(&c, &resources).to_string();
            let hash = hex::encode_upper(sha2::Sha512::digest(body.as_bytes()));
            documents.insert(doc_path(g, v), Document { body, hash });
        }
        let index = index_entries(documents.iter().map(|(p, d)| (p, d.hash.as_str())));
        let index = json!({ "paths": index }).to_string();
        OpenApiV3 { documents, index }
    }

    /// The documents, built on first use.
    pub fn get() -> &'static OpenApiV3 {
        static DOCS: OnceLock<OpenApiV3> = OnceLock::new();
        DOCS.get_or_init(OpenApiV3::build)
    }
}

impl Definitions {
    /// Builds the definitions of every built-in group-version.
    pub fn build() -> Definitions {
        let mut schemas = Map::new();
        let mut kinds = Vec::new();
        for (_, resources) in group_versions() {
            let c = schemas::components(&resources);
            schemas.extend(c.schemas);
            kinds.extend(c.kinds);
        }
        Definitions { schemas, kinds }
    }

    /// The definitions, built on first use.
    pub fn get() -> &'static Definitions {
        static DEFS: OnceLock<Definitions> = OnceLock::new();
        DEFS.get_or_init(Definitions::build)
    }

    /// The fields of `obj` that the schema of (group, version, kind) does not declare; none
    /// for kinds without a schema.
    pub fn unknown_fields(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        obj: &Value,
    ) -> Vec<String> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
            .map(|k| strict::unknown_fields(&self.schemas, &k.name, obj))
            .unwrap_or_default()
    }

    /// The definition `name` and every definition it references, transitively.
    pub fn closure(&self, name: &str) -> Map<String, Value> {
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        out.push(r.trim_start_matches(schemas::REF_PREFIX).to_string());
                    }
                    m.values().for_each(|x| refs(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut out = Map::new();
        let mut todo = vec![name.to_string()];
        while let Some(n) = todo.pop() {
            if out.contains_key(&n) {
                continue;
            }
            if let Some(def) = self.schemas.get(&n) {
                refs(def, &mut todo);
                out.insert(n, def.clone());
            }
        }
        out
    }
}

/// `?fieldValidation=` of a create or update of `kind` (group, version, kind), as kube's
/// decoder applies it: `Strict` rejects a body with unknown fields (400, kube's message);
/// `Warn` (the default) drops them and returns one warning each; `Ignore` drops them silently.
pub(crate) fn check_fields(
    field_validation: Option<&str>,
    (group, version, kind): (&str, &str, &str),
    obj: &mut Value,
) -> ApiResult<Vec<String>> {
    let docs = Definitions::get();
    let custom = super::resources::custom::by_gvk(group, version, kind);
    let prune = |obj: &mut Value| {
        if let Some(cv) = &custom {
            return cv
                .schema
                .as_ref()
                .map(|s| super::crd::schema::prune::prune(s, obj))
                .unwrap_or_default();
        }
        docs.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
            .map(|k| strict::prune_unknown(&docs.schemas, &k.name, obj))
            .unwrap_or_default()
    };
    let warnings = |unknown: Vec<String>| -> Vec<String> {
        unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect()
    };
    match field_validation {
        None | Some("" | "Warn") => Ok(warnings(prune(obj))),
        Some("Ignore") => {
            prune(obj);
            Ok(Vec::new())
        }
        Some("Strict") => {
            let unknown = if custom.is_some() {
                prune(&mut obj.clone())
            } else {
                docs.unknown_fields(group, version, kind, obj)
            };
            if unknown.is_empty() {
                return Ok(Vec::new());
            }
            Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                warnings(unknown).join(", ")
            )))
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation {other:?} is invalid: supported values are Ignore, Warn and Strict"
        ))),
    }
}

/// Adds one `Warning: 299 - "…"` header per warning, as kube-apiserver does (kubectl prints
/// them as `Warning: …`).
pub(crate) fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// [`check_fields`] for the body of a create or update at `rp` (the main resource or a
/// subresource with a schema).
pub(crate) fn check_body(
    query: &k3rs_apimachinery::request_info::QueryParams,
    rp: &super::http::request::ResourcePath,
    obj: &mut Value,
) -> ApiResult<Vec<String>> {
    let r = rp.resource;
    let gvk = match rp.subresource.as_deref() {
        None => (r.group, r.version, r.kind),
        Some(name) => match r.subresources.iter().find(|s| s.name == name) {
            Some(s) => (s.group, s.version, s.kind),
            None => return Ok(Vec::new()),
        },
    };
    check_fields(query.get("fieldValidation"), gvk, obj)
}

/// [`check_body`] for a PATCH body. Merge and strategic merge patches and apply
/// configurations have the object's shape, so their unknown fields are the object's
/// (strategic merge directives, `$patch`, `$setElementOrder/…`, are skipped). JSON patches
/// are not checked; nor are bodies that do not parse (the patch itself reports them).
pub(crate) fn check_patch_body(
    query: &k3rs_apimachinery::request_info::QueryParams,
    rp: &super::http::request::ResourcePath,
    patch_type: k3rs_patch::PatchType,
    body: &[u8],
) -> ApiResult<()> {
    use k3rs_patch::PatchType;
    if query.get("fieldValidation") != Some("Strict") {
        return check_body(query, rp, &mut Value::Null).map(drop);
    }
    let parsed: Option<Value> = match patch_type {
        PatchType::Json => None,
        PatchType::Merge | PatchType::StrategicMerge => serde_json::from_slice(body).ok(),
        PatchType::Apply => serde_norway::from_slice(body).ok(),
    };
    match parsed {
        Some(mut obj) => {
            strip_directives(&mut obj);
            check_body(query, rp, &mut obj).map(drop)
        }
        None => Ok(()),
    }
}

/// Removes strategic merge patch directives (keys starting with `$`).
fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

/// Whether `If-None-Match` names `etag` (quoted) or is `*`.
fn etag_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*")
}

fn json_with_etag(headers: &HeaderMap, body: &str, etag: &str, cache: &'static str) -> Response {
    let etag = format!("\"{etag}\"");
    let mut resp = if etag_matches(headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// The `/openapi/v3` index entries (`path` -> `{serverRelativeURL}`) of `documents`
/// (path, hash).
pub(crate) fn index_entries<'a>(
    documents: impl IntoIterator<Item = (&'a String, &'a str)>,
) -> Map<String, Value> {
    documents
        .into_iter()
        .map(|(p, hash)| {
            let url = format!("/openapi/v3/{p}?hash={hash}");
            (p.clone(), json!({ "serverRelativeURL": url }))
        })
        .collect()
}

/// The documents of the extension servers, by path under `/openapi/v3/`.
pub(crate) type Extensions = BTreeMap<String, std::sync::Arc<Document>>;

/// `GET /openapi/v3`: the built-in documents, those of the served custom resources and
/// those of the available extension servers (a path served here is never theirs).
pub(crate) fn index(extensions: &Extensions, req: Request) -> Response {
    let docs = OpenApiV3::get();
    let custom = super::resources::custom::snapshot();
    let index = if custom.openapi.is_empty() && extensions.is_empty() {
        docs.index.clone()
    } else {
        let ours: BTreeMap<&String, &str> = docs
            .documents
            .iter()
            .chain(custom.openapi.iter())
            .map(|(p, d)| (p, d.hash.as_str()))
            .collect();
        let theirs = extensions
            .iter()
            .filter(|(p, _)| !ours.contains_key(p))
            .map(|(p, d)| (p, d.hash.as_str()));
        let paths = index_entries(ours.iter().map(|(p, h)| (*p, *h)).chain(theirs));
        json!({ "paths": paths }).to_string()
    };
    let hash = hex::encode_upper(sha2::Sha512::digest(index.as_bytes()));
    json_with_etag(req.headers(), &index, &hash, "no-cache, private")
}

/// `GET /openapi/v3/<path>[?hash=…]`.
pub(crate) fn group_version(extensions: &Extensions, req: Request) -> Response {
    let path = req.uri().path().trim_start_matches("/openapi/v3/");
    let custom = super::resources::custom::snapshot();
    let Some(doc) = OpenApiV3::get()
        .documents
        .get(path)
        .or_else(|| custom.openapi.get(path))
        .or_else(|| extensions.get(path).map(|d| &**d))
    else {
        return ApiError::path_not_found().into_response();
    };
    let info = super::http::request::info_of(&req);
    match info.query.get("hash") {
        Some(h) if h == doc.hash => {
            json_with_etag(req.headers(), &doc.body, &doc.hash, "public, immutable")
        }
        Some(_) => {
            let location = format!("/openapi/v3/{path}?hash={}", doc.hash);
            let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            resp
        }
        None => json_with_etag(req.headers(), &doc.body, &doc.hash, "no-cache, private"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_validation_modes() {
        let cm = serde_json::json!({"metadata": {"name": "x"}, "data": {"a": "b"}, "bogus": 1});
        let gvk = ("", "v1", "ConfigMap");
        let mut warned = cm.clone();
        assert_eq!(
            check_fields(None, gvk, &mut warned).unwrap(),
            ["unknown field \"bogus\""]
        );
        assert_eq!(
            warned,
            serde_json::json!({"metadata": {"name": "x"}, "data": {"a": "b"}})
        );
        let mut ignored = cm.clone();
        assert!(check_fields(Some("Ignore"), gvk, &mut ignored)
            .unwrap()
            .is_empty());
        assert_eq!(ignored, warned);
        let mut strict = cm.clone();
        let e = check_fields(Some("Strict"), gvk, &mut strict).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
        );
        assert!(check_fields(Some("Bogus"), gvk, &mut cm.clone()).is_err());
        let mut custom = cm.clone();
        assert!(check_fields(Some("Strict"), ("example.com", "v1", "Widget"), &mut custom).is_ok());
        assert_eq!(custom, cm);
        let resp = with_warnings(
            StatusCode::OK.into_response(),
            &["unknown field \"bogus\"".into()],
        );
        assert_eq!(
            resp.headers()[header::WARNING],
            "299 - \"unknown field \\\"bogus\\\"\""
        );
    }

    #[test]
    fn strict_patch_bodies_skip_directives() {
        use crate::http::request::{parse, ApiPath};
        use k3rs_patch::PatchType;
        let ApiPath::Resource(rp) = parse("/apis/apps/v1/namespaces/d/deployments/web").unwrap()
        else {
            panic!("not a resource path");
        };
        let strict = k3rs_apimachinery::request_info::QueryParams::from_pairs([(
            "fieldValidation",
            "Strict",
        )]);
        let smp = br#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"c"}],"containers":[{"name":"c","imagee":"x"}]}}}}"#;
        let e = check_patch_body(&strict, &rp, PatchType::StrategicMerge, smp).unwrap_err();
        assert!(
            e.message
                .ends_with("unknown field \"spec.template.spec.containers[0].imagee\""),
            "{}",
            e.message
        );
        let ok = br#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"c"}],"containers":[{"name":"c","image":"x","$patch":"delete"}]}}}}"#;
        assert!(check_patch_body(&strict, &rp, PatchType::StrategicMerge, ok).is_ok());
        let apply =
            b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicaz: 2}\n";
        assert!(check_patch_body(&strict, &rp, PatchType::Apply, apply).is_err());
        let json_patch = br#"[{"op":"add","path":"/spec/bogus","value":1}]"#;
        assert!(check_patch_body(&strict, &rp, PatchType::Json, json_patch).is_ok());
        let lax = Default::default();
        assert!(check_patch_body(&lax, &rp, PatchType::Apply, apply).is_ok());
    }

    fn get(uri: &str, if_none_match: Option<&str>) -> Request {
        let mut b = axum::http::Request::builder().uri(uri);
        if let Some(tag) = if_none_match {
            b = b.header(header::IF_NONE_MATCH, tag);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    async fn body_of(resp: Response) -> Value {
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn extension_documents_are_listed_and_served_ours_first() {
        let theirs = |body: &str| {
            std::sync::Arc::new(Document {
                body: body.to_string(),
                hash: "EXT".to_string(),
            })
        };
        let extensions = Extensions::from([
            (
                "apis/wardle.example.com/v1alpha1".to_string(),
                theirs(r#"{"openapi":"3.0.0"}"#),
            ),
            ("apis/apps/v1".to_string(), theirs(r#"{"openapi":"3.0.0"}"#)),
        ]);
        let idx = body_of(index(&extensions, get("/openapi/v3", None))).await;
        assert_eq!(
            idx["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"],
            "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=EXT"
        );
        let apps_hash = &OpenApiV3::get().documents["apis/apps/v1"].hash;
        assert_eq!(
            idx["paths"]["apis/apps/v1"]["serverRelativeURL"],
            format!("/openapi/v3/apis/apps/v1?hash={apps_hash}").as_str()
        );
        let doc = group_version(
            &extensions,
            get(
                "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=EXT",
                None,
            ),
        );
        assert_eq!(doc.headers()[header::CACHE_CONTROL], "public, immutable");
        assert_eq!(body_of(doc).await, json!({"openapi": "3.0.0"}));
        let apps = body_of(group_version(
            &extensions,
            get("/openapi/v3/apis/apps/v1", None),
        ))
        .await;
        assert!(apps["paths"].is_object(), "ours, not theirs");
    }

    #[tokio::test]
    async fn caching_headers_etag_and_redirects() {
        let none = Extensions::new();
        let hash = &OpenApiV3::get().documents["api/v1"].hash;
        let current = format!("/openapi/v3/api/v1?hash={hash}");
        let resp = group_version(&none, get(&current, None));
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CACHE_CONTROL], "public, immutable");
        assert_eq!(resp.headers()[header::ETAG], format!("\"{hash}\"").as_str());
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let plain = group_version(&none, get("/openapi/v3/api/v1", None));
        assert_eq!(plain.headers()[header::CACHE_CONTROL], "no-cache, private");
        let stale = group_version(&none, get("/openapi/v3/api/v1?hash=OLD", None));
        assert_eq!(stale.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(stale.headers()[header::LOCATION], current.as_str());
        let tag = format!("\"{hash}\"");
        let cached = group_version(&none, get(&current, Some(&tag)));
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        let missing = group_version(&none, get("/openapi/v3/apis/nope/v1", None));
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let idx = index(&none, get("/openapi/v3", None));
        assert_eq!(idx.status(), StatusCode::OK);
        assert!(idx.headers().contains_key(header::ETAG));
    }

    #[test]
    fn index_lists_every_group_version_with_its_hash() {
        let docs = OpenApiV3::get();
        let index: Value = serde_json::from_str(&docs.index).unwrap();
        for r in CATALOG {
            let p = doc_path(r.group, r.version);
            let url = index["paths"][&p]["serverRelativeURL"].as_str().unwrap();
            assert_eq!(
                url,
                format!("/openapi/v3/{p}?hash={}", docs.documents[&p].hash)
            );
            assert_eq!(docs.documents[&p].hash.len(), 128);
        }
    }

    #[test]
    fn documents_are_openapi_3_with_paths_and_schemas() {
        let d: Value = serde_json::from_str(&OpenApiV3::get().documents["api/v1"].body).unwrap();
        assert_eq!(d["openapi"], "3.0.0");
        assert!(d["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object());
        assert!(d["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
        let apps: Value =
            serde_json::from_str(&OpenApiV3::get().documents["apis/apps/v1"].body).unwrap();
        assert_eq!(
            apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"]
                ["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
    }
}
