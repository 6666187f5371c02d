//! `authentication.k8s.io/v1` bodies in protobuf: `kubectl create token` POSTs a
//! TokenRequest and `kubectl auth whoami` a SelfSubjectReview that way (k8s.io/api
//! `authentication/v1/generated.proto` field numbers). TokenReviews are decoded too.

use prost::Message;
use serde_json::{json, Map, Value};

use super::protobuf::{insert_opt, meta, non_empty, ObjectMeta};

#[derive(Clone, PartialEq, Message)]
struct BoundObjectReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequestSpec {
    #[prost(string, repeated, tag = "1")]
    audiences: Vec<String>,
    #[prost(message, optional, tag = "3")]
    bound_object_ref: Option<BoundObjectReference>,
    #[prost(int64, optional, tag = "4")]
    expiration_seconds: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequest {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenRequestSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReviewSpec {
    #[prost(string, optional, tag = "1")]
    token: Option<String>,
    #[prost(string, repeated, tag = "2")]
    audiences: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenReviewSpec>,
}

/// Only the metadata of a SelfSubjectReview is sent (its status is the answer).
#[derive(Clone, PartialEq, Message)]
struct SelfSubjectReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

pub fn token_request(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let t = TokenRequest::decode(raw)?;
    let spec = t.spec.unwrap_or_default();
    let mut s = Map::new();
    if !spec.audiences.is_empty() {
        s.insert("audiences".into(), json!(spec.audiences));
    }
    insert_opt(&mut s, "expirationSeconds", spec.expiration_seconds);
    if let Some(r) = spec.bound_object_ref {
        let mut o = Map::new();
        insert_opt(&mut o, "kind", non_empty(r.kind));
        insert_opt(&mut o, "apiVersion", non_empty(r.api_version));
        insert_opt(&mut o, "name", non_empty(r.name));
        insert_opt(&mut o, "uid", non_empty(r.uid));
        s.insert("boundObjectRef".into(), Value::Object(o));
    }
    Ok(json!({"metadata": meta(t.metadata), "spec": s}))
}

pub fn token_review(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let t = TokenReview::decode(raw)?;
    let spec = t.spec.unwrap_or_default();
    let mut s = Map::new();
    insert_opt(&mut s, "token", spec.token);
    if !spec.audiences.is_empty() {
        s.insert("audiences".into(), json!(spec.audiences));
    }
    Ok(json!({"metadata": meta(t.metadata), "spec": s}))
}

pub fn self_subject_review(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let r = SelfSubjectReview::decode(raw)?;
    Ok(json!({"metadata": meta(r.metadata)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_request_as_kubectl_sends_it() {
        let t = TokenRequest {
            metadata: Some(ObjectMeta {
                name: Some(String::new()),
                ..Default::default()
            }),
            spec: Some(TokenRequestSpec {
                audiences: vec!["a".into()],
                bound_object_ref: Some(BoundObjectReference {
                    kind: Some("Pod".into()),
                    api_version: Some("v1".into()),
                    name: Some("p".into()),
                    uid: Some(String::new()),
                }),
                expiration_seconds: Some(600),
            }),
        };
        assert_eq!(
            token_request(&t.encode_to_vec()).unwrap(),
            json!({"metadata": {}, "spec": {"audiences": ["a"], "expirationSeconds": 600,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}})
        );
        assert_eq!(
            token_request(&[]).unwrap(),
            json!({"metadata": {}, "spec": {}})
        );
    }

    #[test]
    fn reviews() {
        let r = TokenReview {
            metadata: None,
            spec: Some(TokenReviewSpec {
                token: Some("t".into()),
                audiences: vec![],
            }),
        };
        assert_eq!(
            token_review(&r.encode_to_vec()).unwrap(),
            json!({"metadata": {}, "spec": {"token": "t"}})
        );
        assert_eq!(self_subject_review(&[]).unwrap(), json!({"metadata": {}}));
    }
}
