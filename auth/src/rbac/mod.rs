//! The RBAC authorizer (`--authorization-mode=RBAC`): a request is allowed when a rule of a
//! role bound to the requester allows it; otherwise RBAC has no opinion (the chain then
//! denies with kube-apiserver's forbidden message).
//!
//! # Guarantees
//! - Rules are matched as upstream's `RuleAllows`: verbs, apiGroups, resources (with
//!   `resource/subresource` and `*/subresource`), resourceNames, nonResourceURLs (`prefix*`).
//! - Bindings naming missing roles add `RBAC: <not found>` to the denial reason.
//! - Decisions read the in-memory [`cache::PolicyCache`], never the datastore.

pub mod bootstrap;
pub mod cache;
pub mod covers;
pub mod escalation;
pub mod reconcile;
pub mod resolver;
pub mod rules;

use std::sync::Arc;

use futures::future::BoxFuture;

use super::authz::{Authorizer, Decision, Rules};
use super::{Attributes, UserInfo};
use resolver::{visit_rules, PolicySource};

/// The RBAC authorizer over a policy source.
#[derive(Clone)]
pub struct Rbac {
    source: Arc<dyn PolicySource>,
}

impl std::fmt::Debug for Rbac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rbac")
    }
}

impl Rbac {
    /// The RBAC authorizer over the roles and bindings of `source`.
    pub fn new(source: Arc<dyn PolicySource>) -> Rbac {
        Rbac { source }
    }

    /// The decision, without I/O.
    pub fn decide(&self, a: &Attributes) -> Decision {
        decide(self.source.as_ref(), a)
    }
}

/// Allow if a bound rule allows `a`; otherwise no opinion, with `RBAC: <errors>` when some
/// binding's role was missing (upstream aggregates several as `[e1, e2]`).
pub fn decide(src: &dyn PolicySource, a: &Attributes) -> Decision {
    let mut allowed = false;
    let mut errors: Vec<String> = Vec::new();
    visit_rules(src, &a.user, &a.namespace, &mut |rule, err| {
        if let Some(e) = err {
            errors.push(e.to_string());
        }
        if rule.is_some_and(|r| rules::rule_allows(a, r)) {
            allowed = true;
            return false;
        }
        true
    });
    if allowed {
        return Decision::Allow;
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision::NoOpinion(reason)
}

impl Authorizer for Rbac {
    fn authorize<'a>(&'a self, a: &'a Attributes) -> BoxFuture<'a, Decision> {
        Box::pin(async move { self.decide(a) })
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let (rules, errors) = resolver::rules_for(self.source.as_ref(), user, namespace);
        Rules {
            rules,
            incomplete: false,
            errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resolver::fixtures::*;
    use super::resolver::StaticPolicy;
    use super::rules::rule;
    use super::*;
    use crate::UserInfo;

    fn at(user: &str, method: &str, path: &str) -> Attributes {
        Attributes::of_request(
            Arc::new(UserInfo::authenticated(user, vec![])),
            method,
            path,
            None,
        )
    }

    #[test]
    fn bound_rules_allow_and_the_rest_has_no_opinion() {
        let src = StaticPolicy {
            roles: vec![role(
                "a",
                "pods",
                vec![rule(&["get", "list"], &[""], &["pods"])],
            )],
            role_bindings: vec![
                rb("a", "p", "Role", "pods", vec![subject("User", "alice")]),
                rb(
                    "a",
                    "x",
                    "ClusterRole",
                    "nope",
                    vec![subject("User", "carol")],
                ),
                rb("a", "y", "Role", "nope", vec![subject("User", "carol")]),
            ],
            ..StaticPolicy::default()
        };
        assert_eq!(
            decide(&src, &at("alice", "GET", "/api/v1/namespaces/a/pods")),
            Decision::Allow
        );
        assert_eq!(
            decide(&src, &at("alice", "GET", "/api/v1/namespaces/b/pods")),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            decide(&src, &at("alice", "DELETE", "/api/v1/namespaces/a/pods/p")),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            decide(&src, &at("bob", "GET", "/api/v1/namespaces/a/pods")),
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            decide(&src, &at("carol", "GET", "/api/v1/namespaces/a/pods")),
            Decision::NoOpinion(
                r#"RBAC: [clusterrole.rbac.authorization.k8s.io "nope" not found, role.rbac.authorization.k8s.io "nope" not found]"#
                    .into()
            )
        );
    }
}
