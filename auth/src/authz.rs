//! Authorization: an ordered chain of authorizers (`--authorization-mode`); the first
//! `Allow` or `Deny` decides, `NoOpinion` asks the next, and a chain that ends without an
//! opinion denies.

use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;

pub use super::access_review::Rules;
use super::attributes::Attributes;
use super::UserInfo;
use k3rs_apimachinery::status::{ApiError, Subject};

/// One authorizer's verdict; the string is the reason shown after the forbidden message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The request is allowed; later authorizers are not asked.
    Allow,
    /// The request is forbidden; later authorizers are not asked.
    Deny(String),
    /// This authorizer neither allows nor denies; the next one is asked.
    NoOpinion(String),
}

/// One authorization mode (Node, RBAC, ABAC, Webhook, AlwaysAllow, AlwaysDeny).
pub trait Authorizer: Send + Sync + Debug {
    /// This authorizer's verdict on `attrs`.
    fn authorize<'a>(&'a self, attrs: &'a Attributes) -> BoxFuture<'a, Decision>;

    /// The rules this authorizer grants `user` in `namespace`, as far as it can tell
    /// (upstream's `RuleResolver`; nothing by default).
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules::default()
    }
}

/// The ordered chain.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    authorizers: Vec<Arc<dyn Authorizer>>,
}

impl Chain {
    /// A chain consulting `authorizers` in order.
    pub fn new(authorizers: Vec<Arc<dyn Authorizer>>) -> Chain {
        Chain { authorizers }
    }

    /// Appends `a` (consulted after those already in the chain).
    pub fn push(&mut self, a: Arc<dyn Authorizer>) {
        self.authorizers.push(a);
    }

    /// `Allow`, or the `Deny` with the reasons gathered (kube-apiserver joins the
    /// no-opinion reasons with ", ").
    pub async fn authorize(&self, attrs: &Attributes) -> Decision {
        match self.evaluate(attrs).await {
            Decision::NoOpinion(r) => Decision::Deny(r),
            d => d,
        }
    }

    /// The union of the authorizers' rules for `user` in `namespace`.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut out = Rules::default();
        for a in &self.authorizers {
            let r = a.rules_for(user, namespace);
            out.rules.extend(r.rules);
            out.incomplete |= r.incomplete;
            out.errors.extend(r.errors);
        }
        out
    }

    /// As [`Chain::authorize`], but a chain without any opinion answers `NoOpinion` (what
    /// a SubjectAccessReview reports as neither allowed nor denied).
    pub async fn evaluate(&self, attrs: &Attributes) -> Decision {
        let mut reasons = Vec::new();
        for a in &self.authorizers {
            match a.authorize(attrs).await {
                Decision::Allow => return Decision::Allow,
                Decision::Deny(r) => {
                    if !r.is_empty() {
                        reasons.push(r);
                    }
                    return Decision::Deny(reasons.join(", "));
                }
                Decision::NoOpinion(r) => {
                    if !r.is_empty() {
                        reasons.push(r);
                    }
                }
            }
        }
        Decision::NoOpinion(reasons.join(", "))
    }
}

/// `AlwaysAllow`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize<'a>(&'a self, _: &'a Attributes) -> BoxFuture<'a, Decision> {
        Box::pin(async { Decision::Allow })
    }

    fn rules_for(&self, _: &UserInfo, _: &str) -> Rules {
        Rules {
            rules: vec![
                super::rbac::rules::rule(&["*"], &["*"], &["*"]),
                super::rbac::rules::url_rule(&["*"], &["*"]),
            ],
            ..Rules::default()
        }
    }
}

/// `AlwaysDeny`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDeny;

impl Authorizer for AlwaysDeny {
    fn authorize<'a>(&'a self, _: &'a Attributes) -> BoxFuture<'a, Decision> {
        // No opinion, as upstream's: a later mode may still allow.
        Box::pin(async { Decision::NoOpinion("Everything is forbidden.".into()) })
    }
}

/// Members of `system:masters` may do anything (kube-apiserver's privileged-group
/// authorizer, consulted before the configured modes).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemMasters;

impl Authorizer for SystemMasters {
    fn authorize<'a>(&'a self, a: &'a Attributes) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if a.user.in_group(super::user::SYSTEM_MASTERS) {
                Decision::Allow
            } else {
                Decision::NoOpinion(String::new())
            }
        })
    }
}

/// An authorization denial as the API answers it: 403 with [`forbidden_message`], and for
/// resource requests `details` naming the object.
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let e = ApiError::new(403, "Forbidden", forbidden_message(a, reason));
    if !a.resource_request {
        return e;
    }
    e.about(Subject {
        group: &a.api_group,
        kind: &a.resource,
        name: &a.name,
    })
}

/// kube-apiserver's forbidden message: `pods "x" is forbidden: User "u" cannot get
/// resource "pods" in API group "" in the namespace "d"` (plus `: <reason>`).
pub fn forbidden_message(a: &Attributes, reason: &str) -> String {
    let user = &a.user.username;
    let mut msg = if a.resource_request {
        let what = a.resource_with_subresource();
        let qualified = if a.api_group.is_empty() {
            a.resource.clone()
        } else {
            format!("{}.{}", a.resource, a.api_group)
        };
        let head = if a.name.is_empty() {
            format!("{qualified} is forbidden")
        } else {
            format!("{qualified} {:?} is forbidden", a.name)
        };
        let scope = if a.namespace.is_empty() {
            " at the cluster scope".to_string()
        } else {
            format!(" in the namespace {:?}", a.namespace)
        };
        format!(
            "{head}: User {user:?} cannot {} resource {what:?} in API group {:?}{scope}",
            a.verb, a.api_group
        )
    } else {
        format!(
            "forbidden: User {user:?} cannot {} path {:?}",
            a.verb, a.path
        )
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserInfo;

    #[derive(Debug)]
    struct Fixed(Decision);
    impl Authorizer for Fixed {
        fn authorize<'a>(&'a self, _: &'a Attributes) -> BoxFuture<'a, Decision> {
            let d = self.0.clone();
            Box::pin(async move { d })
        }
    }

    fn attrs(user: &str, groups: &[&str], method: &str, path: &str) -> Attributes {
        let u = UserInfo::authenticated(user, groups.iter().map(|g| g.to_string()).collect());
        Attributes::of_request(Arc::new(u), method, path, None)
    }

    fn decide(chain: &Chain, a: &Attributes) -> Decision {
        futures::executor::block_on(chain.authorize(a))
    }

    #[test]
    fn first_opinion_decides_and_no_opinion_denies() {
        let a = attrs("bob", &[], "GET", "/api/v1/pods");
        let noop = Arc::new(Fixed(Decision::NoOpinion("no rbac".into())));
        assert_eq!(
            decide(&Chain::new(vec![noop.clone()]), &a),
            Decision::Deny("no rbac".into())
        );
        let chain = Chain::new(vec![
            noop.clone(),
            Arc::new(AlwaysAllow),
            Arc::new(AlwaysDeny),
        ]);
        assert_eq!(decide(&chain, &a), Decision::Allow);
        let chain = Chain::new(vec![noop.clone(), Arc::new(AlwaysDeny)]);
        assert_eq!(
            decide(&chain, &a),
            Decision::Deny("no rbac, Everything is forbidden.".into())
        );
        let chain = Chain::new(vec![noop, Arc::new(AlwaysDeny), Arc::new(AlwaysAllow)]);
        assert_eq!(decide(&chain, &a), Decision::Allow);
    }

    #[test]
    fn system_masters_allowed() {
        let chain = Chain::new(vec![Arc::new(SystemMasters)]);
        let admin = attrs("admin", &["system:masters"], "DELETE", "/api/v1/nodes/x");
        assert_eq!(decide(&chain, &admin), Decision::Allow);
        let bob = attrs("bob", &[], "DELETE", "/api/v1/nodes/x");
        assert!(matches!(decide(&chain, &bob), Decision::Deny(_)));
    }

    #[test]
    fn forbidden_messages_match_kube_apiserver() {
        let a = attrs("bob", &[], "GET", "/api/v1/namespaces/default/pods");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default""#
        );
        let a = attrs(
            "bob",
            &[],
            "DELETE",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
        );
        assert_eq!(
            forbidden_message(&a, "no RBAC policy matched"),
            r#"clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "bob" cannot delete resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope: no RBAC policy matched"#
        );
        let a = attrs("bob", &[], "GET", "/metrics");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"forbidden: User "bob" cannot get path "/metrics""#
        );
        let a = attrs("bob", &[], "GET", "/api/v1/namespaces/d/pods/p/log");
        assert_eq!(
            forbidden_message(&a, ""),
            r#"pods "p" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the namespace "d""#
        );
    }
}
