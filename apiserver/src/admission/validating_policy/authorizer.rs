//! The `authorizer` variable of policy expressions, answered by the server's authorizer
//! chain (Node, RBAC, … as `--authorization-mode` orders them) for the requesting user or a
//! service account.
//!
//! # Guarantees
//! - A check is the authorization of an equivalent request: resource checks ask with API
//!   version `*`, path checks are non-resource requests; a service account is asked about
//!   as `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and
//!   `system:serviceaccounts:<ns>` (upstream's `serviceaccount.UserInfo`).
//! - Checks run on the evaluation's own thread and wait for the chain there, so an
//!   authorizer that calls out (the Webhook mode) is bounded by the evaluation budget.

use std::sync::Arc;

use crate::admission::Attributes;
use k3rs_auth::authz::{Chain, Decision};
use k3rs_auth::serviceaccount::claims;
use k3rs_auth::UserInfo;
use k3rs_cel::authz::{Answer, Query, Variable};

/// The variable for request `a` (none for the server's own writes, which have no user).
pub fn variable(chain: &Chain, a: &Attributes) -> Option<Variable> {
    let user = a.user.clone()?;
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let chain = chain.clone();
    let request = Query {
        group: a.resource.group.to_string(),
        resource: a.resource.plural.to_string(),
        subresource: a.subresource.clone().unwrap_or_default(),
        namespace: a.namespace.clone(),
        name: a.name.clone(),
        ..Query::default()
    };
    let checker = Arc::new(move |q: &Query| {
        let attrs = attributes(&user, q);
        answer(handle.block_on(chain.authorize(&attrs)))
    });
    Some(Variable {
        checker,
        request: Some(request),
    })
}

/// The authorization attributes a query stands for (pure).
pub fn attributes(requester: &Arc<UserInfo>, q: &Query) -> k3rs_auth::attributes::Attributes {
    let user = match &q.service_account {
        Some((ns, name)) => Arc::new(UserInfo {
            username: claims::username(ns, name),
            uid: String::new(),
            groups: vec![
                claims::ALL_SERVICE_ACCOUNTS.to_string(),
                format!("{}:{ns}", claims::ALL_SERVICE_ACCOUNTS),
            ],
            extra: Default::default(),
        }),
        None => requester.clone(),
    };
    k3rs_auth::attributes::Attributes {
        user,
        verb: q.verb.clone(),
        resource_request: q.path.is_none(),
        path: q.path.clone().unwrap_or_default(),
        namespace: q.namespace.clone(),
        api_group: q.group.clone(),
        api_version: if q.path.is_none() {
            "*".into()
        } else {
            String::new()
        },
        resource: q.resource.clone(),
        subresource: q.subresource.clone(),
        name: q.name.clone(),
    }
}

/// The chain's decision as a CEL decision. The chain folds an authorizer's failure into its
/// reason, so `errored()` is always false here.
fn answer(d: Decision) -> Answer {
    match d {
        Decision::Allow => Answer {
            allowed: true,
            ..Answer::default()
        },
        Decision::Deny(reason) | Decision::NoOpinion(reason) => Answer {
            allowed: false,
            reason,
            error: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_request_attributes() {
        let me = Arc::new(UserInfo::authenticated("alice", vec!["devs".into()]));
        let q = Query {
            verb: "scale".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "ns".into(),
            name: "web".into(),
            ..Query::default()
        };
        let a = attributes(&me, &q);
        assert_eq!(a.user.username, "alice");
        assert!(a.resource_request);
        assert_eq!(
            (
                a.verb.as_str(),
                a.api_group.as_str(),
                a.api_version.as_str()
            ),
            ("scale", "apps", "*")
        );
        assert_eq!(
            (
                a.resource.as_str(),
                a.subresource.as_str(),
                a.namespace.as_str(),
                a.name.as_str()
            ),
            ("deployments", "scale", "ns", "web")
        );

        let q = Query {
            service_account: Some(("kube-system".into(), "builder".into())),
            verb: "get".into(),
            path: Some("/healthz".into()),
            ..Query::default()
        };
        let a = attributes(&me, &q);
        assert_eq!(a.user.username, "system:serviceaccount:kube-system:builder");
        assert_eq!(
            a.user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system"
            ]
        );
        assert!(!a.resource_request);
        assert_eq!(a.path, "/healthz");
    }
}
