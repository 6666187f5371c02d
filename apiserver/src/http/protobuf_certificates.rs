//! `certificates.k8s.io/v1` CertificateSigningRequest in protobuf: `kubectl certificate
//! approve|deny` PUT the request to `/approval` that way (k8s.io/api
//! `certificates/v1/generated.proto` field numbers).

use std::time::UNIX_EPOCH;

use prost::Message;
use serde_json::{json, Map, Value};

use super::protobuf::{insert_opt, meta, non_empty, ObjectMeta};
use k3rs_apimachinery::meta::rfc3339;

#[derive(Clone, PartialEq, Message)]
struct Time {
    #[prost(int64, optional, tag = "1")]
    seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    nanos: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct ExtraValue {
    #[prost(string, repeated, tag = "1")]
    items: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Spec {
    #[prost(bytes = "vec", optional, tag = "1")]
    request: Option<Vec<u8>>,
    #[prost(string, optional, tag = "2")]
    username: Option<String>,
    #[prost(string, optional, tag = "3")]
    uid: Option<String>,
    #[prost(string, repeated, tag = "4")]
    groups: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    usages: Vec<String>,
    #[prost(btree_map = "string, message", tag = "6")]
    extra: std::collections::BTreeMap<String, ExtraValue>,
    #[prost(string, optional, tag = "7")]
    signer_name: Option<String>,
    #[prost(int32, optional, tag = "8")]
    expiration_seconds: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct Condition {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "2")]
    reason: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(message, optional, tag = "4")]
    last_update_time: Option<Time>,
    #[prost(message, optional, tag = "5")]
    last_transition_time: Option<Time>,
    #[prost(string, optional, tag = "6")]
    status: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Status {
    #[prost(message, repeated, tag = "1")]
    conditions: Vec<Condition>,
    #[prost(bytes = "vec", optional, tag = "2")]
    certificate: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct CertificateSigningRequest {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<Spec>,
    #[prost(message, optional, tag = "3")]
    status: Option<Status>,
}

/// A set (non-zero) time as RFC 3339; Go's zero time is unset.
fn time(t: Option<Time>) -> Option<String> {
    let secs = t.and_then(|t| t.seconds).filter(|s| *s > 0)?;
    Some(rfc3339(k3rs_apimachinery::meta::seconds_after(
        UNIX_EPOCH, secs,
    )))
}

fn b64(bytes: Option<Vec<u8>>) -> Option<String> {
    use base64::Engine;
    bytes
        .filter(|b| !b.is_empty())
        .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
}

pub fn csr(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let c = CertificateSigningRequest::decode(raw)?;
    let mut out = json!({"metadata": meta(c.metadata)});
    if let Some(s) = c.spec {
        let mut o = Map::new();
        insert_opt(&mut o, "request", b64(s.request));
        insert_opt(&mut o, "signerName", non_empty(s.signer_name));
        insert_opt(&mut o, "expirationSeconds", s.expiration_seconds);
        if !s.usages.is_empty() {
            o.insert("usages".into(), json!(s.usages));
        }
        insert_opt(&mut o, "username", non_empty(s.username));
        insert_opt(&mut o, "uid", non_empty(s.uid));
        if !s.groups.is_empty() {
            o.insert("groups".into(), json!(s.groups));
        }
        if !s.extra.is_empty() {
            let extra: Map<String, Value> = s
                .extra
                .into_iter()
                .map(|(k, v)| (k, json!(v.items)))
                .collect();
            o.insert("extra".into(), Value::Object(extra));
        }
        out["spec"] = Value::Object(o);
    }
    if let Some(s) = c.status {
        let mut o = Map::new();
        if !s.conditions.is_empty() {
            let conds: Vec<Value> = s
                .conditions
                .into_iter()
                .map(|c| {
                    let mut co = Map::new();
                    insert_opt(&mut co, "type", non_empty(c.r#type));
                    insert_opt(&mut co, "status", non_empty(c.status));
                    insert_opt(&mut co, "reason", non_empty(c.reason));
                    insert_opt(&mut co, "message", non_empty(c.message));
                    insert_opt(&mut co, "lastUpdateTime", time(c.last_update_time));
                    insert_opt(&mut co, "lastTransitionTime", time(c.last_transition_time));
                    Value::Object(co)
                })
                .collect();
            o.insert("conditions".into(), json!(conds));
        }
        insert_opt(&mut o, "certificate", b64(s.certificate));
        out["status"] = Value::Object(o);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_body_round_trip() {
        let msg = CertificateSigningRequest {
            metadata: Some(ObjectMeta {
                name: Some("alice".into()),
                resource_version: Some("12".into()),
                ..Default::default()
            }),
            spec: Some(Spec {
                request: Some(b"PEM".to_vec()),
                signer_name: Some("kubernetes.io/kube-apiserver-client".into()),
                usages: vec!["client auth".into()],
                groups: vec!["system:masters".into()],
                ..Default::default()
            }),
            status: Some(Status {
                conditions: vec![Condition {
                    r#type: Some("Approved".into()),
                    status: Some("True".into()),
                    reason: Some("KubectlApprove".into()),
                    message: Some("This CSR was approved by kubectl certificate approve.".into()),
                    last_update_time: Some(Time {
                        seconds: Some(1_767_225_600),
                        nanos: Some(0),
                    }),
                    last_transition_time: Some(Time::default()),
                }],
                certificate: None,
            }),
        };
        let v = csr(&msg.encode_to_vec()).unwrap();
        assert_eq!(
            v,
            json!({
                "metadata": {"name": "alice", "resourceVersion": "12"},
                "spec": {"request": "UEVN", "signerName": "kubernetes.io/kube-apiserver-client",
                    "usages": ["client auth"], "groups": ["system:masters"]},
                "status": {"conditions": [{"type": "Approved", "status": "True",
                    "reason": "KubectlApprove",
                    "message": "This CSR was approved by kubectl certificate approve.",
                    "lastUpdateTime": "2026-01-01T00:00:00Z"}]},
            })
        );
    }
}
