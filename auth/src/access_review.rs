//! `authorization.k8s.io/v1` reviews, answered by the authorizer chain and never stored:
//! SubjectAccessReview (may this user do this), LocalSubjectAccessReview (the same in one
//! namespace), SelfSubjectAccessReview (may I: `kubectl auth can-i`) and
//! SelfSubjectRulesReview (what may I do in a namespace: `kubectl auth can-i --list`).
//!
//! # Guarantees
//! - A review is decided exactly as a request with the same attributes would be (the same
//!   chain, `system:masters` included); `denied` is set only for an explicit deny.
//! - Malformed specs are 422 with upstream's field messages; a LocalSubjectAccessReview for
//!   another namespace is 400.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{json, Value};

use super::authz::{Chain, Decision};
use super::{Attributes, UserInfo};
use k3rs_apimachinery::status::{ApiError, ApiResult, Cause, Subject};

const GROUP: &str = "authorization.k8s.io";

/// Answers a review of `kind` posted with `body` by `user` (in `namespace` for the
/// namespaced LocalSubjectAccessReview).
pub async fn create(
    authz: &Chain,
    kind: &str,
    namespace: Option<&str>,
    mut body: Value,
    user: Option<&UserInfo>,
) -> ApiResult<Value> {
    let anonymous = UserInfo::anonymous();
    let requester = user.unwrap_or(&anonymous);
    let status = match kind {
        "SelfSubjectRulesReview" => {
            let ns = body["spec"]["namespace"].as_str().unwrap_or_default();
            if ns.is_empty() {
                return Err(ApiError::bad_request("no namespace on request"));
            }
            rules_status(authz.rules_for(requester, ns))
        }
        _ => {
            let attrs = attributes(kind, namespace, &mut body, requester)?;
            decision_status(authz.evaluate(&attrs).await)
        }
    };
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = status;
    Ok(body)
}

/// The attributes a SubjectAccessReview, LocalSubjectAccessReview or SelfSubjectAccessReview
/// asks about (validated as upstream does); the Local one's namespace is defaulted in
/// `body`.
pub fn attributes(
    kind: &str,
    namespace: Option<&str>,
    body: &mut Value,
    requester: &UserInfo,
) -> ApiResult<Attributes> {
    let spec = &body["spec"];
    let res = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let mut causes = Vec::new();
    match (res, non) {
        (Some(_), Some(n)) => causes.push(Cause::invalid(
            "spec.nonResourceAttributes",
            &n.to_string(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => causes.push(Cause::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    let self_review = kind == "SelfSubjectAccessReview";
    let user = if self_review {
        Arc::new(requester.clone())
    } else {
        let name = spec["user"].as_str().unwrap_or_default();
        let groups: Vec<String> = strings(&spec["groups"]);
        if name.is_empty() && groups.is_empty() {
            causes.push(Cause::invalid(
                "spec.user",
                name,
                "at least one of user or group must be specified",
            ));
        }
        let extra = spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default();
        Arc::new(UserInfo {
            username: name.to_string(),
            uid: spec["uid"].as_str().unwrap_or_default().to_string(),
            groups,
            extra,
        })
    };
    if kind == "LocalSubjectAccessReview" && non.is_some() {
        causes.push(Cause::invalid(
            "spec.nonResourceAttributes",
            &non.map(Value::to_string).unwrap_or_default(),
            "disallowed on this kind of request",
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            Subject {
                group: GROUP,
                kind,
                name: body["metadata"]["name"].as_str().unwrap_or_default(),
            },
            causes,
        ));
    }
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let mut attrs = Attributes {
        user,
        verb: String::new(),
        resource_request: res.is_some(),
        path: String::new(),
        namespace: String::new(),
        api_group: String::new(),
        api_version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        name: String::new(),
    };
    if let Some(r) = res {
        attrs.verb = text(r, "verb");
        attrs.namespace = text(r, "namespace");
        attrs.api_group = text(r, "group");
        attrs.api_version = text(r, "version");
        attrs.resource = text(r, "resource");
        attrs.subresource = text(r, "subresource");
        attrs.name = text(r, "name");
    } else if let Some(n) = non {
        attrs.verb = text(n, "verb");
        attrs.path = text(n, "path");
    }
    if kind == "LocalSubjectAccessReview" {
        let ns = namespace.unwrap_or_default();
        if attrs.namespace.is_empty() {
            attrs.namespace = ns.to_string();
            body["spec"]["resourceAttributes"]["namespace"] = json!(ns);
        } else if attrs.namespace != ns {
            return Err(ApiError::bad_request(format!(
                "spec.resourceAttributes.namespace must match namespace: {ns}"
            )));
        }
    }
    Ok(attrs)
}

/// The strings of a JSON array (anything else is none).
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `status` of an access review: `allowed`, `denied` (explicit deny only) and the reason.
pub fn decision_status(d: Decision) -> Value {
    let (allowed, denied, reason) = match d {
        Decision::Allow => (true, false, String::new()),
        Decision::Deny(r) => (false, true, r),
        Decision::NoOpinion(r) => (false, false, r),
    };
    let mut s = json!({"allowed": allowed});
    if denied {
        s["denied"] = json!(true);
    }
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    s
}

/// What the authorizers can enumerate of a user's rights in a namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// The rules, resource and non-resource, in the order the authorizers gave them.
    pub rules: Vec<PolicyRule>,
    /// Whether an authorizer could not enumerate its rules (the review's `incomplete`).
    pub incomplete: bool,
    /// Errors met while resolving the rules (e.g. a binding's missing role), reported as `evaluationError`.
    pub errors: Vec<String>,
}

/// `status` of a SelfSubjectRulesReview: resource rules and non-resource rules in the order
/// the authorizers gave them.
pub fn rules_status(r: Rules) -> Value {
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    let mut resource = Vec::new();
    let mut non_resource = Vec::new();
    for rule in &r.rules {
        if rule.resources.as_ref().is_some_and(|v| !v.is_empty()) {
            let mut o = json!({
                "verbs": rule.verbs,
                "apiGroups": list(&rule.api_groups),
                "resources": list(&rule.resources),
            });
            if let Some(n) = rule.resource_names.as_ref().filter(|v| !v.is_empty()) {
                o["resourceNames"] = json!(n);
            }
            resource.push(o);
        }
        if rule
            .non_resource_urls
            .as_ref()
            .is_some_and(|v| !v.is_empty())
        {
            non_resource.push(json!({
                "verbs": rule.verbs,
                "nonResourceURLs": list(&rule.non_resource_urls),
            }));
        }
    }
    let mut s = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": r.incomplete,
    });
    match r.errors.len() {
        0 => {}
        1 => s["evaluationError"] = json!(r.errors[0]),
        _ => s["evaluationError"] = json!(format!("[{}]", r.errors.join(", "))),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::rules::{rule, url_rule};

    fn alice() -> UserInfo {
        UserInfo::authenticated("alice", vec!["dev".into()])
    }

    #[test]
    fn self_review_asks_for_the_requester() {
        let mut body = json!({"spec": {"resourceAttributes": {
            "namespace": "a", "verb": "get", "resource": "pods", "subresource": "log", "name": "p"}}});
        let a = attributes("SelfSubjectAccessReview", None, &mut body, &alice()).unwrap();
        assert_eq!(a.user.username, "alice");
        assert!(a.resource_request);
        assert_eq!(
            (
                a.verb.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.name.as_str()
            ),
            ("get", "a", "pods", "log", "p")
        );
        let mut body =
            json!({"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}});
        let a = attributes("SelfSubjectAccessReview", None, &mut body, &alice()).unwrap();
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/metrics"));
    }

    #[test]
    fn subject_review_asks_for_the_spec_user_only() {
        let mut body = json!({"spec": {"user": "bob", "groups": ["ops"],
            "resourceAttributes": {"verb": "list", "resource": "nodes"}}});
        let a = attributes("SubjectAccessReview", None, &mut body, &alice()).unwrap();
        assert_eq!(a.user.username, "bob");
        assert_eq!(a.user.groups, vec!["ops".to_string()]);
    }

    #[test]
    fn invalid_specs() {
        let mut body = json!({"spec": {"resourceAttributes": {"verb": "get"}}});
        let e = attributes("SubjectAccessReview", None, &mut body, &alice()).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            r#"SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified"#
        );
        let mut body = json!({"spec": {}});
        let e = attributes("SelfSubjectAccessReview", None, &mut body, &alice()).unwrap_err();
        assert!(
            e.message.ends_with(
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn local_review_namespace_is_defaulted_and_must_match() {
        let mut body = json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}}});
        let a = attributes("LocalSubjectAccessReview", Some("a"), &mut body, &alice()).unwrap();
        assert_eq!(a.namespace, "a");
        assert_eq!(body["spec"]["resourceAttributes"]["namespace"], "a");
        let mut body = json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "b", "verb": "get"}}});
        let e = attributes("LocalSubjectAccessReview", Some("a"), &mut body, &alice()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "spec.resourceAttributes.namespace must match namespace: a"
            )
        );
    }

    #[test]
    fn statuses() {
        assert_eq!(decision_status(Decision::Allow), json!({"allowed": true}));
        assert_eq!(
            decision_status(Decision::NoOpinion(String::new())),
            json!({"allowed": false})
        );
        assert_eq!(
            decision_status(Decision::Deny("no".into())),
            json!({"allowed": false, "denied": true, "reason": "no"})
        );
        let s = rules_status(Rules {
            rules: vec![
                rule(&["get"], &[""], &["pods"]),
                url_rule(&["get"], &["/api"]),
            ],
            incomplete: false,
            errors: vec!["e1".into()],
        });
        assert_eq!(
            s,
            json!({
                "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api"]}],
                "incomplete": false,
                "evaluationError": "e1",
            })
        );
    }
}
