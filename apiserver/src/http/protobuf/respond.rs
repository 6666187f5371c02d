//! Protobuf responses for clients that list `application/vnd.kubernetes.protobuf` first in
//! `Accept` (kubectl's and client-go's typed clients), as kube-apiserver answers them.
//!
//! The handlers answer in JSON; [`respond`] re-encodes such an answer (objects, lists,
//! `Status`); lists are encoded item by item by [`super::ListFrames`]. What has no protobuf form (custom resources, Tables, a field the table does not
//! know) stays JSON with its JSON Content-Type, which client-go decodes just as well. Watch
//! streams are framed by [`super::watch`] instead.

use axum::body::{Body, HttpBody};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use serde_json::Value;

use super::MEDIA_TYPE;

/// Whether the first media type of `Accept` is protobuf.
pub fn preferred(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find(|m| !m.is_empty())
        .is_some_and(|first| {
            let mut parts = first.split(';').map(str::trim);
            parts.next() == Some(MEDIA_TYPE) && !parts.any(|p| p.starts_with("as="))
        })
}

/// `resp` in protobuf when it is a JSON object with a protobuf form, else unchanged.
pub async fn respond(resp: Response) -> Response {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // A streamed body is a list already answered in JSON because it has no protobuf form
    // (custom resources, an item the table does not know): nothing to re-encode.
    if !is_json || resp.body().size_hint().exact().is_none() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| super::encode(&v));
    match encoded {
        Some(proto) => {
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(proto))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn protobuf_only_when_listed_first() {
        assert!(preferred(&accept(
            "application/vnd.kubernetes.protobuf, */*"
        )));
        assert!(preferred(&accept(
            "application/vnd.kubernetes.protobuf,application/json"
        )));
        assert!(!preferred(&accept(
            "application/json, application/vnd.kubernetes.protobuf"
        )));
        assert!(!preferred(&accept(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json"
        )));
        assert!(!preferred(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn json_objects_become_protobuf_and_the_rest_stays() {
        let json = |v: &str| {
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .header("Warning", "299 - \"w\"")
                .body(Body::from(v.to_string()))
                .unwrap()
        };
        let cm =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}}"#;
        let resp = respond(json(cm)).await;
        assert_eq!(resp.headers()[header::CONTENT_TYPE], MEDIA_TYPE);
        assert!(resp.headers().contains_key("Warning"));
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let mut expected: Value = serde_json::from_str(cm).unwrap();
        expected["metadata"]["creationTimestamp"] = Value::Null;
        assert_eq!(super::super::decode(&bytes).unwrap(), expected);
        let widget = r#"{"apiVersion":"example.com/v1","kind":"Widget","spec":{}}"#;
        let resp = respond(json(widget)).await;
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&bytes[..], widget.as_bytes());
    }
}
