//! What an extension server publishes about one service-backed APIService, downloaded
//! through the proxy transport and cached by ETag: its aggregated discovery entry (when it
//! serves `apidiscovery.k8s.io/v2`; else discovery is converted from its `APIResourceList`),
//! its OpenAPI v2 document and the OpenAPI v3 document of the group/version.
//!
//! # Guarantees
//! - Downloaded when the APIService becomes available or its spec changes, and again every
//!   [`REFRESH`] (kube-aggregator's period) while it stays available.
//! - A refresh sends each document's last `ETag` in `If-None-Match`; a `304` keeps the
//!   cached document.
//! - A document that is missing, not JSON or not of its kind is dropped, never served.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::Digest;

use super::backend::ApiService;
use super::fetch::{self, Fetched, Target};
use super::openapi::{is_v2_document, is_v3_document, v3_document_url};
use super::Aggregator;
use crate::discovery::AGGREGATED_V2;
use crate::openapi::Document;

/// How often the documents of an available APIService are downloaded again.
pub const REFRESH: Duration = Duration::from_secs(60);

/// One cached document with the `ETag` it came with.
#[derive(Debug, Clone, PartialEq)]
pub struct Cached<T> {
    /// The URL it was fetched from (server-relative).
    pub url: String,
    pub etag: Option<String>,
    pub value: T,
}

/// The documents of one APIService, as last downloaded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Documents {
    /// When they were last downloaded (`None`: never).
    pub fetched: Option<Instant>,
    /// The `APIVersionDiscovery` of the group/version from the server's aggregated
    /// discovery, when it serves that.
    pub discovery: Option<Cached<Value>>,
    /// The server's `/openapi/v2` (JSON).
    pub openapi_v2: Option<Cached<Arc<Document>>>,
    /// The group/version's `/openapi/v3` document.
    pub openapi_v3: Option<Cached<Arc<Document>>>,
}

/// Whether the documents must be downloaded now: the APIService just became available or
/// changed, or they are [`REFRESH`] old (or were never downloaded).
pub fn needs_refresh(
    before: Option<(&ApiService, bool, &Documents)>,
    now_for: &ApiService,
    now: Instant,
) -> bool {
    match before {
        Some((a, available, docs)) => {
            a != now_for
                || !available
                || docs
                    .fetched
                    .is_none_or(|t| now.saturating_duration_since(t) >= REFRESH)
        }
        None => true,
    }
}

/// A document of `body`, with kube-apiserver's hash (upper-case hex SHA-512).
fn document(body: &[u8]) -> Arc<Document> {
    Arc::new(Document {
        body: String::from_utf8_lossy(body).into_owned(),
        hash: hex::encode_upper(sha2::Sha512::digest(body)),
    })
}

/// Whether a `Content-Type` is aggregated discovery v2.
pub fn is_aggregated_v2(content_type: &str) -> bool {
    let params: Vec<String> = content_type
        .split(';')
        .map(|p| p.trim().to_ascii_lowercase())
        .collect();
    params.iter().any(|p| p == "g=apidiscovery.k8s.io")
        && params.iter().any(|p| p == "v=v2")
        && params.iter().any(|p| p == "as=apigroupdiscoverylist")
}

/// The `APIVersionDiscovery` of `group/version` in an `APIGroupDiscoveryList`.
pub fn version_entry(list: &Value, group: &str, version: &str) -> Option<Value> {
    list["items"]
        .as_array()?
        .iter()
        .find(|g| g["metadata"]["name"] == group)?["versions"]
        .as_array()?
        .iter()
        .find(|v| v["version"] == version)
        .cloned()
}

/// What to keep of one answer: the new value (200, accepted by `parse`), the cached one
/// (304), or nothing.
fn keep<T: Clone>(
    answer: Option<Fetched>,
    url: &str,
    old: Option<&Cached<T>>,
    parse: impl FnOnce(&Fetched) -> Option<T>,
) -> Option<Cached<T>> {
    let answer = answer?;
    match answer.status {
        304 => old.filter(|c| c.url == url).cloned(),
        200..=299 => parse(&answer).map(|value| Cached {
            url: url.to_string(),
            etag: answer.etag.clone(),
            value,
        }),
        _ => None,
    }
}

fn etag_for<'a, T>(old: Option<&'a Cached<T>>, url: &str) -> Option<&'a str> {
    old.filter(|c| c.url == url).and_then(|c| c.etag.as_deref())
}

/// Downloads the documents of `a` from the server at `to` (the cached ones in `old`
/// answer `304`s).
pub async fn refresh(
    agg: &Aggregator,
    to: Target<'_>,
    a: &ApiService,
    old: &Documents,
) -> Documents {
    let started = Instant::now();
    let get = |path: String, accept: &str, etag: Option<String>| {
        let accept = accept.to_string();
        async move {
            let got = fetch::get(agg, to, &path, &accept, etag.as_deref()).await;
            if let Err(e) = &got {
                tracing::debug!(apiservice = %a.name, %path, error = %e, "downloading from an extension server");
            }
            got.ok()
        }
    };
    let accept_discovery = format!("{AGGREGATED_V2},application/json");
    let url = "/apis".to_string();
    let answer = get(
        url.clone(),
        &accept_discovery,
        etag_for(old.discovery.as_ref(), &url).map(str::to_string),
    )
    .await;
    let discovery = keep(answer, &url, old.discovery.as_ref(), |f| {
        if !is_aggregated_v2(&f.content_type) {
            return None;
        }
        let list: Value = serde_json::from_slice(&f.body).ok()?;
        version_entry(&list, &a.group, &a.version)
    });

    let url = "/openapi/v2".to_string();
    let answer = get(
        url.clone(),
        "application/json",
        etag_for(old.openapi_v2.as_ref(), &url).map(str::to_string),
    )
    .await;
    let openapi_v2 = keep(answer, &url, old.openapi_v2.as_ref(), |f| {
        let doc: Value = serde_json::from_slice(&f.body).ok()?;
        // The protobuf form of `/openapi/v2` must be able to carry it.
        (is_v2_document(&doc) && crate::openapi::v2::gnostic_json::from_json(&doc).is_ok())
            .then(|| document(&f.body))
    });

    let index = get("/openapi/v3".to_string(), "application/json", None)
        .await
        .filter(|f| f.status == 200)
        .and_then(|f| serde_json::from_slice::<Value>(&f.body).ok());
    let openapi_v3 = match index.and_then(|i| v3_document_url(&i, &a.group, &a.version)) {
        Some(url) => {
            let etag = etag_for(old.openapi_v3.as_ref(), &url).map(str::to_string);
            let answer = get(url.clone(), "application/json", etag).await;
            keep(answer, &url, old.openapi_v3.as_ref(), |f| {
                let doc: Value = serde_json::from_slice(&f.body).ok()?;
                is_v3_document(&doc).then(|| document(&f.body))
            })
        }
        None => None,
    };
    Documents {
        fetched: Some(started),
        discovery,
        openapi_v2,
        openapi_v3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api_service(priority: i64) -> ApiService {
        ApiService {
            name: "v1alpha1.wardle.example.com".into(),
            group: "wardle.example.com".into(),
            version: "v1alpha1".into(),
            service: None,
            ca_bundle: Vec::new(),
            insecure_skip_tls_verify: false,
            group_priority_minimum: 1000,
            version_priority: priority,
        }
    }

    #[test]
    fn refreshes_on_change_on_availability_and_after_a_minute() {
        let t0 = Instant::now();
        let fresh = Documents {
            fetched: Some(t0),
            ..Documents::default()
        };
        let a = api_service(15);
        let later = |s| t0 + Duration::from_secs(s);
        assert!(needs_refresh(None, &a, t0));
        assert!(!needs_refresh(Some((&a, true, &fresh)), &a, later(59)));
        assert!(needs_refresh(Some((&a, true, &fresh)), &a, later(60)));
        assert!(needs_refresh(Some((&a, false, &fresh)), &a, later(1)));
        assert!(needs_refresh(
            Some((&api_service(20), true, &fresh)),
            &a,
            later(1)
        ));
        assert!(needs_refresh(
            Some((&a, true, &Documents::default())),
            &a,
            t0
        ));
    }

    #[test]
    fn aggregated_discovery_answers_and_their_entries() {
        assert!(is_aggregated_v2(
            "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList"
        ));
        assert!(!is_aggregated_v2("application/json"));
        assert!(!is_aggregated_v2(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));
        let list = json!({"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "other.example.com"}, "versions": [{"version": "v1alpha1"}]},
            {"metadata": {"name": "wardle.example.com"}, "versions": [
                {"version": "v1beta1"}, {"version": "v1alpha1", "resources": [{"resource": "flunders"}]}]}]});
        assert_eq!(
            version_entry(&list, "wardle.example.com", "v1alpha1"),
            Some(json!({"version": "v1alpha1", "resources": [{"resource": "flunders"}]}))
        );
        assert_eq!(version_entry(&list, "wardle.example.com", "v2"), None);
    }

    fn answer(status: u16, body: &str, etag: Option<&str>) -> Option<Fetched> {
        Some(Fetched {
            status,
            content_type: "application/json".into(),
            etag: etag.map(str::to_string),
            body: body.as_bytes().to_vec().into(),
        })
    }

    #[test]
    fn keeps_the_cached_document_on_304_of_the_same_url() {
        let parse = |f: &Fetched| serde_json::from_slice::<Value>(&f.body).ok();
        let old = Cached {
            url: "/openapi/v2".into(),
            etag: Some("\"A\"".into()),
            value: json!(1),
        };
        let kept = keep(answer(304, "", None), "/openapi/v2", Some(&old), parse).unwrap();
        assert_eq!(
            (kept.value, kept.etag.as_deref()),
            (json!(1), Some("\"A\""))
        );
        assert!(keep(answer(304, "", None), "/other", Some(&old), parse).is_none());
        let new = keep(
            answer(200, "2", Some("\"B\"")),
            "/openapi/v2",
            Some(&old),
            parse,
        )
        .unwrap();
        assert_eq!((new.value, new.etag.as_deref()), (json!(2), Some("\"B\"")));
        assert!(keep(
            answer(200, "not json", None),
            "/openapi/v2",
            Some(&old),
            parse
        )
        .is_none());
        assert!(keep(answer(500, "1", None), "/openapi/v2", Some(&old), parse).is_none());
        assert!(keep(None, "/openapi/v2", Some(&old), parse).is_none());
        assert_eq!(etag_for(Some(&old), "/openapi/v2"), Some("\"A\""));
        assert_eq!(etag_for(Some(&old), "/x"), None);
    }
}
