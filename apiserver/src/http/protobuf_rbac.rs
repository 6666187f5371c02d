//! Protobuf bodies of `rbac.authorization.k8s.io/v1` (`kubectl create role|clusterrole|
//! rolebinding|clusterrolebinding` send them) and `authorization.k8s.io/v1` reviews
//! (`kubectl auth can-i [--list]`), in the field numbering of k8s.io/api's
//! `generated.proto`.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::{json, Map, Value};

use super::protobuf::{insert_opt, meta, non_empty, ObjectMeta};
use super::protobuf_workloads::{selector, LabelSelector};

#[derive(Clone, PartialEq, Message)]
struct PolicyRule {
    #[prost(string, repeated, tag = "1")]
    verbs: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    api_groups: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    resources: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    resource_names: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    non_resource_urls: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct AggregationRule {
    #[prost(message, repeated, tag = "1")]
    cluster_role_selectors: Vec<LabelSelector>,
}

/// Role (tags 1–2) and ClusterRole (plus 3).
#[derive(Clone, PartialEq, Message)]
struct RoleMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    rules: Vec<PolicyRule>,
    #[prost(message, optional, tag = "3")]
    aggregation_rule: Option<AggregationRule>,
}

#[derive(Clone, PartialEq, Message)]
struct Subject {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    api_group: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    namespace: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct RoleRef {
    #[prost(string, optional, tag = "1")]
    api_group: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
}

/// RoleBinding and ClusterRoleBinding.
#[derive(Clone, PartialEq, Message)]
struct BindingMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    subjects: Vec<Subject>,
    #[prost(message, optional, tag = "3")]
    role_ref: Option<RoleRef>,
}

fn strings(o: &mut Map<String, Value>, k: &str, v: Vec<String>) {
    if !v.is_empty() {
        o.insert(k.into(), json!(v));
    }
}

fn rule(r: PolicyRule) -> Value {
    let mut o = Map::new();
    o.insert("verbs".into(), json!(r.verbs));
    strings(&mut o, "apiGroups", r.api_groups);
    strings(&mut o, "resources", r.resources);
    strings(&mut o, "resourceNames", r.resource_names);
    strings(&mut o, "nonResourceURLs", r.non_resource_urls);
    Value::Object(o)
}

/// A Role or ClusterRole.
pub fn role(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let r = RoleMessage::decode(raw)?;
    let mut out = json!({"metadata": meta(r.metadata)});
    if !r.rules.is_empty() {
        out["rules"] = Value::Array(r.rules.into_iter().map(rule).collect());
    }
    if let Some(a) = r.aggregation_rule {
        let selectors: Vec<Value> = a.cluster_role_selectors.into_iter().map(selector).collect();
        out["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
    }
    Ok(out)
}

/// A RoleBinding or ClusterRoleBinding.
pub fn binding(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let b = BindingMessage::decode(raw)?;
    let mut out = json!({"metadata": meta(b.metadata)});
    if !b.subjects.is_empty() {
        let subjects: Vec<Value> = b
            .subjects
            .into_iter()
            .map(|s| {
                let mut o = Map::new();
                insert_opt(&mut o, "kind", s.kind);
                insert_opt(&mut o, "apiGroup", non_empty(s.api_group));
                insert_opt(&mut o, "name", s.name);
                insert_opt(&mut o, "namespace", non_empty(s.namespace));
                Value::Object(o)
            })
            .collect();
        out["subjects"] = json!(subjects);
    }
    let r = b.role_ref.unwrap_or_default();
    out["roleRef"] = json!({
        "apiGroup": r.api_group.unwrap_or_default(),
        "kind": r.kind.unwrap_or_default(),
        "name": r.name.unwrap_or_default(),
    });
    Ok(out)
}

#[derive(Clone, PartialEq, Message)]
struct ResourceAttributes {
    #[prost(string, optional, tag = "1")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "2")]
    verb: Option<String>,
    #[prost(string, optional, tag = "3")]
    group: Option<String>,
    #[prost(string, optional, tag = "4")]
    version: Option<String>,
    #[prost(string, optional, tag = "5")]
    resource: Option<String>,
    #[prost(string, optional, tag = "6")]
    subresource: Option<String>,
    #[prost(string, optional, tag = "7")]
    name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct NonResourceAttributes {
    #[prost(string, optional, tag = "1")]
    path: Option<String>,
    #[prost(string, optional, tag = "2")]
    verb: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ExtraValue {
    #[prost(string, repeated, tag = "1")]
    items: Vec<String>,
}

/// SubjectAccessReviewSpec; a SelfSubjectAccessReviewSpec is its first two fields.
#[derive(Clone, PartialEq, Message)]
struct AccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    non_resource_attributes: Option<NonResourceAttributes>,
    #[prost(string, optional, tag = "3")]
    user: Option<String>,
    #[prost(string, repeated, tag = "4")]
    groups: Vec<String>,
    #[prost(btree_map = "string, message", tag = "5")]
    extra: BTreeMap<String, ExtraValue>,
    #[prost(string, optional, tag = "6")]
    uid: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct AccessReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<AccessReviewSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct RulesReviewSpec {
    #[prost(string, optional, tag = "1")]
    namespace: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct RulesReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<RulesReviewSpec>,
}

/// A SubjectAccessReview, LocalSubjectAccessReview or SelfSubjectAccessReview.
pub fn access_review(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let r = AccessReview::decode(raw)?;
    let s = r.spec.unwrap_or_default();
    let mut spec = Map::new();
    if let Some(a) = s.resource_attributes {
        let mut o = Map::new();
        for (k, v) in [
            ("namespace", a.namespace),
            ("verb", a.verb),
            ("group", a.group),
            ("version", a.version),
            ("resource", a.resource),
            ("subresource", a.subresource),
            ("name", a.name),
        ] {
            insert_opt(&mut o, k, non_empty(v));
        }
        spec.insert("resourceAttributes".into(), Value::Object(o));
    }
    if let Some(a) = s.non_resource_attributes {
        let mut o = Map::new();
        insert_opt(&mut o, "path", non_empty(a.path));
        insert_opt(&mut o, "verb", non_empty(a.verb));
        spec.insert("nonResourceAttributes".into(), Value::Object(o));
    }
    insert_opt(&mut spec, "user", non_empty(s.user));
    strings(&mut spec, "groups", s.groups);
    if !s.extra.is_empty() {
        let extra: Map<String, Value> = s
            .extra
            .into_iter()
            .map(|(k, v)| (k, json!(v.items)))
            .collect();
        spec.insert("extra".into(), Value::Object(extra));
    }
    insert_opt(&mut spec, "uid", non_empty(s.uid));
    Ok(json!({"metadata": meta(r.metadata), "spec": spec}))
}

/// A SelfSubjectRulesReview.
pub fn rules_review(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let r = RulesReview::decode(raw)?;
    let mut spec = Map::new();
    insert_opt(
        &mut spec,
        "namespace",
        non_empty(r.spec.unwrap_or_default().namespace),
    );
    Ok(json!({"metadata": meta(r.metadata), "spec": spec}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_and_role_shapes() {
        let b = BindingMessage {
            metadata: Some(ObjectMeta {
                name: Some("alice-reads".into()),
                ..ObjectMeta::default()
            }),
            subjects: vec![Subject {
                kind: Some("User".into()),
                api_group: Some("rbac.authorization.k8s.io".into()),
                name: Some("alice".into()),
                namespace: Some(String::new()),
            }],
            role_ref: Some(RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: Some("Role".into()),
                name: Some("cm-reader".into()),
            }),
        };
        assert_eq!(
            binding(&b.encode_to_vec()).unwrap(),
            json!({
                "metadata": {"name": "alice-reads"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            })
        );
        let r = RoleMessage {
            metadata: None,
            rules: vec![PolicyRule {
                verbs: vec!["get".into()],
                api_groups: vec![String::new()],
                resources: vec!["configmaps".into()],
                ..PolicyRule::default()
            }],
            aggregation_rule: None,
        };
        assert_eq!(
            role(&r.encode_to_vec()).unwrap(),
            json!({"metadata": {}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]})
        );
    }

    #[test]
    fn access_and_rules_reviews() {
        let r = AccessReview {
            metadata: None,
            spec: Some(AccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some("a".into()),
                    verb: Some("get".into()),
                    group: Some(String::new()),
                    resource: Some("pods".into()),
                    ..ResourceAttributes::default()
                }),
                ..AccessReviewSpec::default()
            }),
        };
        assert_eq!(
            access_review(&r.encode_to_vec()).unwrap(),
            json!({"metadata": {}, "spec": {"resourceAttributes": {"namespace": "a", "verb": "get", "resource": "pods"}}})
        );
        let r = RulesReview {
            metadata: None,
            spec: Some(RulesReviewSpec {
                namespace: Some("a".into()),
            }),
        };
        assert_eq!(
            rules_review(&r.encode_to_vec()).unwrap(),
            json!({"metadata": {}, "spec": {"namespace": "a"}})
        );
    }
}
