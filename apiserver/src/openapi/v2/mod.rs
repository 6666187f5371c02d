//! OpenAPI v2 (`/openapi/v2`), as kube-apiserver serves it: one Swagger 2.0 document of every
//! served path and definition, in JSON and in gnostic's protobuf form, which client-go's
//! discovery client (kubectl's validation of kinds without a PATCH operation, `kubectl
//! explain --output=plaintext-openapiv2`, Helm) asks for.
//!
//! # Guarantees
//! - The document is the v3 documents' content ([`super::OpenApiV3`] and the custom
//!   resources' documents), converted ([`convert`]): the same paths, kinds and schemas.
//! - It is rebuilt when the custom resources' documents change (on the first request after),
//!   and only then: while they stay equal, so do the bytes and the ETags.
//! - Both forms carry one `ETag`, the quoted upper-case hex SHA-512 of the JSON form, as
//!   kube-openapi's; a matching `If-None-Match` gets 304. With `Accept-Encoding: gzip` the
//!   body is gzipped (kube-openapi wraps its handler in a gzip handler).
//! - The protobuf form decodes to exactly the JSON form ([`gnostic_json`]).
//! - `Accept` is negotiated as kube-openapi does ([`negotiate`]); nothing acceptable is 406.
//!   Query parameters (kubectl's `?timeout=32s`) are ignored.
//! - Besides the resources, the non-resource paths kube-apiserver lists (discovery,
//!   `/version/`, the service account issuer's documents: [`non_resource`]).

pub(crate) mod convert;
pub(crate) mod gnostic;
pub(crate) mod gnostic_json;
pub mod negotiate;
pub mod non_resource;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;
use sha2::Digest;

use super::{Document, OpenApiV3};
use crate::resources::custom;
use k3rs_apimachinery::status::ApiError;
use negotiate::Format;

/// Both forms of one document.
#[derive(Debug)]
pub(crate) struct Spec {
    pub json: Vec<u8>,
    pub protobuf: Vec<u8>,
    /// The quoted upper-case hex SHA-512 of the JSON form; kube-openapi gives both forms this
    /// one tag (they differ by `Vary: Accept`).
    pub etag: String,
    /// When it was built (`Last-Modified`).
    pub built: jiff::Timestamp,
    /// The gzipped forms (JSON, protobuf), made on first use.
    gzipped: [OnceLock<Vec<u8>>; 2],
}

/// The built-in documents, converted once.
fn builtin() -> &'static convert::Parts {
    static PARTS: OnceLock<convert::Parts> = OnceLock::new();
    PARTS.get_or_init(|| {
        let mut parts = convert::Parts::default();
        let mut gvs = Vec::new();
        for (path, d) in &OpenApiV3::get().documents {
            if let Ok(v) = serde_json::from_str(&d.body) {
                parts.add(&v, false);
            }
            match path.split('/').collect::<Vec<_>>().as_slice() {
                ["api", version] => gvs.push(("", *version)),
                ["apis", group, version] => gvs.push((*group, *version)),
                _ => {}
            }
        }
        non_resource::add(&mut parts, &gvs);
        parts
    })
}

/// The v2 documents of the extension servers (by APIService name).
pub(crate) type Extensions = [(String, Arc<Document>)];

impl Spec {
    /// The document of the built-ins, the custom resources' `documents` and the
    /// `extensions`' paths and definitions (ours win, [`crate::aggregator::openapi`]).
    pub fn build(
        custom: &BTreeMap<String, Document>,
        extensions: &Extensions,
    ) -> Result<Spec, gnostic_json::Error> {
        let mut parts = builtin().clone();
        for d in custom.values() {
            if let Ok(v) = serde_json::from_str(&d.body) {
                parts.add(&v, true);
            }
        }
        for (name, d) in extensions {
            let Ok(v) = serde_json::from_str(&d.body) else {
                continue;
            };
            let dropped = crate::aggregator::openapi::merge_v2(&mut parts, &v);
            if !dropped.is_empty() {
                tracing::debug!(apiservice = %name, ?dropped, "definitions of an extension server that differ from ours were left out of /openapi/v2");
            }
        }
        let doc = parts.document(crate::version::GIT_VERSION);
        let protobuf = gnostic_json::from_json(&doc)?.encode_to_vec();
        let json = doc.to_string().into_bytes();
        Ok(Spec {
            etag: format!("\"{}\"", hex::encode_upper(sha2::Sha512::digest(&json))),
            json,
            protobuf,
            built: jiff::Timestamp::now(),
            gzipped: Default::default(),
        })
    }

    /// The bytes of one form.
    pub fn form(&self, f: Format) -> &[u8] {
        match f {
            Format::Json => &self.json,
            Format::Protobuf => &self.protobuf,
        }
    }

    /// The gzipped bytes of one form (compressed on first use, then kept).
    pub fn gzipped(&self, f: Format) -> &[u8] {
        let i = usize::from(f == Format::Protobuf);
        self.gzipped[i].get_or_init(|| {
            use std::io::Write;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            // Writing to a Vec cannot fail.
            let _ = gz.write_all(self.form(f));
            gz.finish().unwrap_or_default()
        })
    }
}

/// The last built spec and the custom and extension documents (name, hash) it was built
/// from.
type Cached = (Vec<(String, String)>, Arc<Spec>);

/// The spec of what is served now: the cached one while the custom resources' and the
/// extension servers' documents are the ones it was built from, else a new one.
pub(crate) fn current(extensions: &Extensions) -> Result<Arc<Spec>, gnostic_json::Error> {
    static CACHE: Mutex<Option<Cached>> = Mutex::new(None);
    let snapshot = custom::snapshot();
    let key: Vec<(String, String)> = snapshot
        .openapi
        .iter()
        .chain(extensions.iter().map(|(n, d)| (n, &**d)))
        .map(|(p, d)| (p.clone(), d.hash.clone()))
        .collect();
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((k, spec)) = cache.as_ref() {
        if *k == key {
            return Ok(spec.clone());
        }
    }
    let spec = Arc::new(Spec::build(&snapshot.openapi, extensions)?);
    *cache = Some((key, spec.clone()));
    Ok(spec)
}

/// Why a protobuf `/openapi/v2` body does not read back as a Swagger 2.0 JSON document.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a gnostic `openapi.v2.Document`.
    #[error("not a gnostic openapi.v2.Document: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// The message holds a value the JSON mapping does not model.
    #[error("{0}")]
    Json(#[from] gnostic_json::Error),
}

/// The JSON document a protobuf `/openapi/v2` body holds, read with gnostic's messages as
/// client-go's discovery client reads it: equal to the JSON form served with it.
pub fn decode_protobuf(body: &[u8]) -> Result<serde_json::Value, DecodeError> {
    Ok(gnostic_json::to_json(&gnostic::Document::decode(body)?)?)
}

/// Whether `Accept-Encoding` names gzip with a quality above 0 (as the gzip handler
/// kube-openapi wraps its handler in decides).
fn accepts_gzip(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut parts = e.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            name.eq_ignore_ascii_case("gzip") && q > 0.0
        })
}

/// `GET /openapi/v2`, with the v2 documents of the available extension servers.
pub(crate) async fn serve(extensions: Vec<(String, Arc<Document>)>, req: Request) -> Response {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let Some(format) = negotiate::negotiate(accept) else {
        return ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only application/json and {} are served at /openapi/v2",
                negotiate::PROTOBUF
            ),
        )
        .into_response();
    };
    let gzip = accepts_gzip(req.headers());
    let built = tokio::task::spawn_blocking(move || {
        let spec = current(&extensions)?;
        if gzip {
            spec.gzipped(format);
        }
        Ok::<_, gnostic_json::Error>(spec)
    })
    .await;
    let spec = match built {
        Ok(Ok(spec)) => spec,
        Ok(Err(e)) => {
            return ApiError::internal(format!("building /openapi/v2: {e}")).into_response()
        }
        Err(e) => return ApiError::internal(format!("building /openapi/v2: {e}")).into_response(),
    };
    let mut resp = if super::etag_matches(req.headers(), &spec.etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let body = if gzip {
            spec.gzipped(format)
        } else {
            spec.form(format)
        };
        let mut r = body.to_vec().into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        );
        if gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        r
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&spec.etag) {
        h.insert(header::ETAG, v);
    }
    let modified = spec.built.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    if let Ok(v) = HeaderValue::from_str(&modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.append(header::VARY, HeaderValue::from_static("Accept"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn get(accept: Option<&str>, if_none_match: Option<&str>) -> Request {
        get_with(accept, if_none_match, None)
    }

    fn get_with(
        accept: Option<&str>,
        if_none_match: Option<&str>,
        encoding: Option<&str>,
    ) -> Request {
        let mut b = axum::http::Request::builder().uri("/openapi/v2?timeout=32s");
        if let Some(e) = encoding {
            b = b.header(header::ACCEPT_ENCODING, e);
        }
        if let Some(a) = accept {
            b = b.header(header::ACCEPT, a);
        }
        if let Some(tag) = if_none_match {
            b = b.header(header::IF_NONE_MATCH, tag);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    async fn body(resp: Response) -> Vec<u8> {
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn both_forms_one_etag_304_gzip_and_406() {
        let json = serve(Vec::new(), get(None, None)).await;
        assert_eq!(json.status(), StatusCode::OK);
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
        assert!(!json.headers().contains_key(header::CONTENT_ENCODING));
        let tag = json.headers()[header::ETAG].to_str().unwrap().to_string();
        assert_eq!(tag.len(), 130);
        assert!(json.headers().contains_key(header::LAST_MODIFIED));
        let json_body = body(json).await;
        let doc: Value = serde_json::from_slice(&json_body).unwrap();

        // client-go's spelling, answered with the one Go can parse.
        let pb = serve(Vec::new(), get(Some(negotiate::PROTOBUF_DEPRECATED), None)).await;
        assert_eq!(pb.headers()[header::CONTENT_TYPE], negotiate::PROTOBUF);
        assert_eq!(pb.headers()[header::ETAG], tag.as_str());
        let pb_body = body(pb).await;
        let decoded = gnostic::Document::decode(pb_body.as_slice()).unwrap();
        assert_eq!(gnostic_json::to_json(&decoded).unwrap(), doc);

        let cached = serve(Vec::new(), get(Some(negotiate::PROTOBUF), Some(&tag))).await;
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(cached.headers()[header::ETAG], tag.as_str());
        assert!(body(cached).await.is_empty());
        let stale = serve(Vec::new(), get(None, Some("\"OLD\""))).await;
        assert_eq!(stale.status(), StatusCode::OK);

        let gz = serve(
            Vec::new(),
            get_with(Some(negotiate::PROTOBUF), None, Some("gzip, deflate")),
        )
        .await;
        assert_eq!(gz.headers()[header::CONTENT_ENCODING], "gzip");
        let mut unzipped = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(body(gz).await.as_slice()),
            &mut unzipped,
        )
        .unwrap();
        assert_eq!(unzipped, pb_body);
        let no_gz = serve(Vec::new(), get_with(None, None, Some("gzip;q=0"))).await;
        assert!(!no_gz.headers().contains_key(header::CONTENT_ENCODING));

        let refused = serve(Vec::new(), get(Some("text/html"), None)).await;
        assert_eq!(refused.status(), StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn every_kind_is_defined_and_every_ref_resolves() {
        let spec = Spec::build(&BTreeMap::new(), &[]).unwrap();
        let doc: Value = serde_json::from_slice(&spec.json).unwrap();
        assert_eq!(doc["swagger"], "2.0");
        let defs = doc["definitions"].as_object().unwrap();
        for r in k3rs_apimachinery::catalog::CATALOG {
            let listed = defs.values().any(|d| {
                d["x-kubernetes-group-version-kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|g| {
                        g["group"] == r.group && g["version"] == r.version && g["kind"] == r.kind
                    })
            });
            assert!(listed, "{}/{} {}", r.group, r.version, r.kind);
        }
        let mut all = Vec::new();
        crate::openapi::schemas::tests::refs(&doc, &mut all);
        for r in all {
            let name = r
                .strip_prefix(convert::V2_REF)
                .unwrap_or_else(|| panic!("{r}"));
            assert!(defs.contains_key(name), "dangling {r}");
        }
        let review = &doc["paths"]["/apis/authentication.k8s.io/v1/tokenreviews"]["post"];
        assert_eq!(review["x-kubernetes-action"], "post");
        assert_eq!(review["parameters"][0]["in"], "body");
        assert_eq!(
            review["parameters"][0]["schema"]["$ref"],
            "#/definitions/io.k8s.api.authentication.v1.TokenReview"
        );
        assert_eq!(
            doc["definitions"]["io.k8s.api.authentication.v1.TokenReview"]["required"],
            serde_json::json!(["spec"]),
            "as kube's: metadata is never required"
        );
        assert_eq!(
            doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
    }

    #[test]
    fn custom_resources_are_added_and_change_the_etags() {
        let base = Spec::build(&BTreeMap::new(), &[]).unwrap();
        let mut crd = serde_json::json!({"metadata": {"name": "gadgets.v2.example.org"}, "spec": {
            "group": "v2.example.org", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true, "properties": {"size": {"type": "integer", "nullable": true}}}}}}}]}});
        crd["status"] = crate::crd::status::desired(&crd, &[], "T");
        let snapshot = crate::crd::served::snapshot(std::slice::from_ref(&crd));
        let with = Spec::build(&snapshot.openapi, &[]).unwrap();
        assert_ne!(with.etag, base.etag);
        let doc: Value = serde_json::from_slice(&with.json).unwrap();
        let def = &doc["definitions"]["org.example.v2.v1.Gadget"];
        assert_eq!(def["x-kubernetes-group-version-kind"][0]["kind"], "Gadget");
        assert_eq!(
            def["properties"]["spec"],
            serde_json::json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert!(
            doc["paths"]["/apis/v2.example.org/v1/namespaces/{namespace}/gadgets/{name}"]["get"]
                .is_object()
        );
        let again = Spec::build(&snapshot.openapi, &[]).unwrap();
        assert_eq!(again.etag, with.etag, "stable bytes for equal input");
        assert_eq!(again.protobuf, with.protobuf);
    }
}
