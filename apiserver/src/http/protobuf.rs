//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! which kubectl's typed clients send for `kubectl create namespace|configmap|secret|
//! deployment|service|serviceaccount`.
//!
//! `kubectl autoscale` sends autoscaling/v1 HorizontalPodAutoscalers,
//! `kubectl certificate approve|deny` send CertificateSigningRequests too, `kubectl create
//! token` TokenRequests and `kubectl auth whoami` SelfSubjectReviews.
//!
//! The envelope is `k8s\0` + `runtime.Unknown{typeMeta, raw}`; `raw` is the object in the
//! field numbering of k8s.io/api's `generated.proto`. Only the kinds listed in [`decode`] are
//! understood (others are 415, so clients see a clear error). Fields not modelled are dropped
//! by the decoder: they are ones those kubectl generators never set.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::{json, Map, Value};

use k3rs_apimachinery::status::{ApiError, ApiResult};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OwnerReference {
    #[prost(string, optional, tag = "5")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    block_owner_deletion: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub(super) resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub(super) labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub(super) annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub(super) owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub(super) finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NamespaceSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    r#type: Option<String>,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

pub(super) fn insert_opt<T: Into<Value>>(m: &mut Map<String, Value>, k: &str, v: Option<T>) {
    if let Some(v) = v {
        m.insert(k.into(), v.into());
    }
}

pub(super) fn string_map(m: &BTreeMap<String, String>) -> Option<Value> {
    (!m.is_empty()).then(|| json!(m))
}

fn bytes_map(m: &BTreeMap<String, Vec<u8>>) -> Option<Value> {
    use base64::Engine;
    (!m.is_empty()).then(|| {
        m.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    json!(base64::engine::general_purpose::STANDARD.encode(v)),
                )
            })
            .collect::<Map<_, _>>()
            .into()
    })
}

/// Proto2 optionals arrive present-but-empty from Go's zero values; JSON omits them.
pub(super) fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

pub(super) fn meta(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let (name, generate_name, namespace, uid, resource_version) = (
        non_empty(m.name),
        non_empty(m.generate_name),
        non_empty(m.namespace),
        non_empty(m.uid),
        non_empty(m.resource_version),
    );
    let mut out = Map::new();
    insert_opt(&mut out, "name", name);
    insert_opt(&mut out, "generateName", generate_name);
    insert_opt(&mut out, "namespace", namespace);
    insert_opt(&mut out, "uid", uid);
    insert_opt(&mut out, "resourceVersion", resource_version);
    insert_opt(&mut out, "labels", string_map(&m.labels));
    insert_opt(&mut out, "annotations", string_map(&m.annotations));
    if !m.finalizers.is_empty() {
        out.insert("finalizers".into(), json!(m.finalizers));
    }
    if !m.owner_references.is_empty() {
        let refs: Vec<Value> = m
            .owner_references
            .into_iter()
            .map(|r| {
                let mut o = Map::new();
                insert_opt(&mut o, "apiVersion", r.api_version);
                insert_opt(&mut o, "kind", r.kind);
                insert_opt(&mut o, "name", r.name);
                insert_opt(&mut o, "uid", r.uid);
                insert_opt(&mut o, "controller", r.controller);
                insert_opt(&mut o, "blockOwnerDeletion", r.block_owner_deletion);
                Value::Object(o)
            })
            .collect();
        out.insert("ownerReferences".into(), json!(refs));
    }
    Value::Object(out)
}

fn bad(e: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("failed to decode protobuf body: {e}"))
}

/// Decodes a protobuf body into the object's JSON form.
pub fn decode(bytes: &[u8]) -> ApiResult<Value> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing the k8s protobuf prefix"))?;
    let unknown = Unknown::decode(body).map_err(bad)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
    );
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            let ns = Namespace::decode(raw.as_slice()).map_err(bad)?;
            let mut o = json!({"metadata": meta(ns.metadata)});
            if let Some(spec) = ns.spec.filter(|s| !s.finalizers.is_empty()) {
                o["spec"] = json!({"finalizers": spec.finalizers});
            }
            o
        }
        ("v1", "ConfigMap") => {
            let cm = ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            let mut o = Map::new();
            o.insert("metadata".into(), meta(cm.metadata));
            insert_opt(&mut o, "data", string_map(&cm.data));
            insert_opt(&mut o, "binaryData", bytes_map(&cm.binary_data));
            insert_opt(&mut o, "immutable", cm.immutable);
            Value::Object(o)
        }
        ("v1", "Secret") => {
            let s = Secret::decode(raw.as_slice()).map_err(bad)?;
            let mut o = Map::new();
            o.insert("metadata".into(), meta(s.metadata));
            insert_opt(&mut o, "data", bytes_map(&s.data));
            insert_opt(&mut o, "stringData", string_map(&s.string_data));
            insert_opt(&mut o, "type", non_empty(s.r#type));
            insert_opt(&mut o, "immutable", s.immutable);
            Value::Object(o)
        }
        ("v1", "Service") => super::protobuf_workloads::service(&raw).map_err(bad)?,
        ("v1", "ServiceAccount") => {
            super::protobuf_workloads::service_account(&raw).map_err(bad)?
        }
        ("apps/v1", "Deployment") => super::protobuf_workloads::deployment(&raw).map_err(bad)?,
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            super::protobuf_autoscaling::hpa_v1(&raw).map_err(bad)?
        }
        ("batch/v1", "Job") => super::protobuf_workloads::job(&raw).map_err(bad)?,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => {
            super::protobuf_rbac::role(&raw).map_err(bad)?
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            super::protobuf_rbac::binding(&raw).map_err(bad)?
        }
        (
            "authorization.k8s.io/v1",
            "SubjectAccessReview" | "LocalSubjectAccessReview" | "SelfSubjectAccessReview",
        ) => super::protobuf_rbac::access_review(&raw).map_err(bad)?,
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            super::protobuf_rbac::rules_review(&raw).map_err(bad)?
        }
        ("authentication.k8s.io/v1", "TokenRequest") => {
            super::protobuf_authentication::token_request(&raw).map_err(bad)?
        }
        ("authentication.k8s.io/v1", "TokenReview") => {
            super::protobuf_authentication::token_review(&raw).map_err(bad)?
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            super::protobuf_authentication::self_subject_review(&raw).map_err(bad)?
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            super::protobuf_certificates::csr(&raw).map_err(bad)?
        }
        _ => {
            return Err(ApiError::unsupported_media_type(&format!(
                "{MEDIA_TYPE} for {api_version} {kind}"
            )))
        }
    };
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("v1".into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
        };
        [MAGIC, u.encode_to_vec().as_slice()].concat()
    }

    #[test]
    fn configmap_round_trip() {
        let cm = ConfigMap {
            metadata: Some(ObjectMeta {
                name: Some("cm".into()),
                generate_name: Some(String::new()),
                labels: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            }),
            data: [("k".to_string(), "v".to_string())].into(),
            ..Default::default()
        };
        let v = decode(&envelope("ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn unknown_kinds_and_garbage() {
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
        assert_eq!(decode(&envelope("Pod", Vec::new())).unwrap_err().code, 415);
        assert_eq!(
            decode(&envelope("ConfigMap", vec![0xff, 0xff]))
                .unwrap_err()
                .code,
            400
        );
    }
}
