//! Whether one `PolicyRule` allows a request, and whether one binding subject names a user
//! (upstream's `RuleAllows` and `appliesTo`). Pure functions, no I/O.

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

use crate::{Attributes, UserInfo};

/// Matches every verb, group, resource or URL.
pub const ALL: &str = "*";

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

/// `verbs` holds `verb` or `*`.
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

/// `apiGroups` holds `group` or `*`.
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups)
        .iter()
        .any(|g| g == ALL || g == group)
}

/// `resources` holds `*`, the combined `resource/subresource`, or `*/subresource` (only when
/// the request names a subresource: `*/scale` covers `deployments/scale`, not `deployments`).
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        r == ALL
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/").is_some_and(|s| s == subresource))
    })
}

/// An empty `resourceNames` covers every name; otherwise it must hold `name` (so a rule with
/// names never covers `list` or `create`, which carry no name).
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

/// `nonResourceURLs` holds `*`, `path`, or a `prefix*` that `path` starts with.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| {
        u == ALL
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Whether `rule` allows the request `a` (resource rules for resource requests,
/// non-resource URLs otherwise).
pub fn rule_allows(a: &Attributes, rule: &PolicyRule) -> bool {
    if a.resource_request {
        verb_matches(rule, &a.verb)
            && api_group_matches(rule, &a.api_group)
            && resource_matches(rule, &a.resource_with_subresource(), &a.subresource)
            && resource_name_matches(rule, &a.name)
    } else {
        verb_matches(rule, &a.verb) && non_resource_url_matches(rule, &a.path)
    }
}

/// The user name of service account `name` in `namespace`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Whether `subject` of a binding in `binding_namespace` ("" for ClusterRoleBindings) names
/// `user`: a User by name, a Group by membership, a ServiceAccount by its user name (its
/// namespace defaults to the binding's).
pub fn subject_applies(subject: &Subject, user: &UserInfo, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.username == subject.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            // `service_account_username(ns, name) == username`, without building the name
            // (once per ServiceAccount subject of every binding, on every request).
            !ns.is_empty()
                && user
                    .username
                    .strip_prefix("system:serviceaccount:")
                    .and_then(|rest| rest.strip_prefix(ns))
                    .and_then(|rest| rest.strip_prefix(':'))
                    == Some(subject.name.as_str())
        }
        _ => false,
    }
}

/// A `PolicyRule` from string slices (empty slices are `None`, as upstream's builders).
pub fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    let opt = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        api_groups: opt(groups),
        resources: opt(resources),
        resource_names: None,
        non_resource_urls: None,
    }
}

/// A non-resource `PolicyRule`.
pub fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        non_resource_urls: Some(urls.iter().map(|s| s.to_string()).collect()),
        ..PolicyRule::default()
    }
}

/// `r` restricted to `names`.
pub fn with_names(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
    r.resource_names = Some(names.iter().map(|s| s.to_string()).collect());
    r
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn req(method: &str, path: &str) -> Attributes {
        Attributes::of_request(
            Arc::new(UserInfo::authenticated("bob", vec![])),
            method,
            path,
            None,
        )
    }

    #[test]
    fn verbs_groups_resources() {
        let r = rule(&["get", "list"], &[""], &["pods"]);
        assert!(rule_allows(&req("GET", "/api/v1/namespaces/d/pods"), &r));
        assert!(rule_allows(&req("GET", "/api/v1/namespaces/d/pods/p"), &r));
        assert!(!rule_allows(
            &req("DELETE", "/api/v1/namespaces/d/pods/p"),
            &r
        ));
        assert!(!rule_allows(
            &req("GET", "/api/v1/namespaces/d/services"),
            &r
        ));
        assert!(!rule_allows(
            &req("GET", "/apis/apps/v1/namespaces/d/pods"),
            &r
        ));
        let all = rule(&["*"], &["*"], &["*"]);
        assert!(rule_allows(
            &req("DELETE", "/apis/apps/v1/namespaces/d/deployments/x"),
            &all
        ));
        assert!(rule_allows(
            &req("GET", "/api/v1/namespaces/d/pods/p/log"),
            &all
        ));
        assert!(
            !rule_allows(&req("GET", "/healthz"), &all),
            "resource rules only"
        );
    }

    #[test]
    fn subresources() {
        let pods = rule(&["get"], &[""], &["pods"]);
        assert!(!rule_allows(
            &req("GET", "/api/v1/namespaces/d/pods/p/log"),
            &pods
        ));
        let log = rule(&["get"], &[""], &["pods/log"]);
        assert!(rule_allows(
            &req("GET", "/api/v1/namespaces/d/pods/p/log"),
            &log
        ));
        assert!(!rule_allows(
            &req("GET", "/api/v1/namespaces/d/pods/p"),
            &log
        ));
        let scale = rule(&["get", "update"], &["apps"], &["*/scale"]);
        assert!(rule_allows(
            &req("PUT", "/apis/apps/v1/namespaces/d/deployments/x/scale"),
            &scale
        ));
        assert!(!rule_allows(
            &req("PUT", "/apis/apps/v1/namespaces/d/deployments/x"),
            &scale
        ));
    }

    #[test]
    fn resource_names() {
        let r = with_names(rule(&["get", "list"], &[""], &["configmaps"]), &["a"]);
        assert!(rule_allows(
            &req("GET", "/api/v1/namespaces/d/configmaps/a"),
            &r
        ));
        assert!(!rule_allows(
            &req("GET", "/api/v1/namespaces/d/configmaps/b"),
            &r
        ));
        assert!(!rule_allows(
            &req("GET", "/api/v1/namespaces/d/configmaps"),
            &r
        ));
        assert!(!rule_allows(
            &req("POST", "/api/v1/namespaces/d/configmaps"),
            &r
        ));
    }

    #[test]
    fn non_resource_urls() {
        let r = url_rule(&["get"], &["/healthz", "/apis/*"]);
        assert!(rule_allows(&req("GET", "/healthz"), &r));
        assert!(!rule_allows(&req("GET", "/healthz/etcd"), &r));
        assert!(rule_allows(&req("GET", "/apis/apps"), &r));
        assert!(!rule_allows(&req("GET", "/api"), &r));
        assert!(!rule_allows(&req("POST", "/healthz"), &r));
        assert!(!rule_allows(&req("GET", "/api/v1/namespaces/d/pods"), &r));
        let any = url_rule(&["*"], &["*"]);
        assert!(rule_allows(&req("POST", "/anything"), &any));
    }

    #[test]
    fn subjects() {
        let user = UserInfo::authenticated("alice", vec!["dev".into()]);
        let s = |kind: &str, name: &str, ns: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(str::to_string),
            api_group: None,
        };
        assert!(subject_applies(&s("User", "alice", None), &user, ""));
        assert!(!subject_applies(&s("User", "bob", None), &user, ""));
        assert!(subject_applies(&s("Group", "dev", None), &user, ""));
        assert!(subject_applies(
            &s("Group", "system:authenticated", None),
            &user,
            ""
        ));
        assert!(!subject_applies(&s("Group", "ops", None), &user, ""));
        let sa = UserInfo::authenticated("system:serviceaccount:ns1:builder", vec![]);
        assert!(subject_applies(
            &s("ServiceAccount", "builder", Some("ns1")),
            &sa,
            ""
        ));
        assert!(subject_applies(
            &s("ServiceAccount", "builder", None),
            &sa,
            "ns1"
        ));
        assert!(!subject_applies(
            &s("ServiceAccount", "builder", None),
            &sa,
            "ns2"
        ));
        assert!(!subject_applies(
            &s("ServiceAccount", "builder", None),
            &sa,
            ""
        ));
        assert!(!subject_applies(&s("Unknown", "builder", None), &sa, "ns1"));
        for (ns, name) in [("ns", "1:builder"), ("ns1:builder", ""), ("ns1", "build")] {
            assert!(
                !subject_applies(&s("ServiceAccount", name, Some(ns)), &sa, ""),
                "{ns}/{name}"
            );
        }
    }

    proptest::proptest! {
        /// A ServiceAccount subject names exactly the user whose name is the account's.
        #[test]
        fn a_service_account_matches_its_user_name_only(
            ns in "[a:s]{0,4}",
            name in "[a:s]{0,4}",
            other in "(system:serviceaccount:)?[a:s]{0,9}",
            exact in proptest::bool::ANY,
        ) {
            let username = if exact { service_account_username(&ns, &name) } else { other };
            let subject = Subject {
                kind: "ServiceAccount".into(),
                name: name.clone(),
                namespace: Some(ns.clone()),
                api_group: None,
            };
            let user = UserInfo::authenticated(&username, vec![]);
            proptest::prop_assert_eq!(
                subject_applies(&subject, &user, ""),
                !ns.is_empty() && username == service_account_username(&ns, &name)
            );
        }
    }
}
