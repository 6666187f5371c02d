//! Whether one set of rules grants everything another does (upstream's `validation.Covers`):
//! escalation checks ask it of the requester's rules, reconciliation of the existing roles.
//! Each rule is broken into single-verb, single-group, single-resource, single-name pieces;
//! every piece must be allowed by some owner rule. Pure.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::rules::ALL;

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn has(values: &[String], v: &str) -> bool {
    values.iter().any(|x| x == ALL || x == v)
}

/// One piece of a rule: a verb on one group/resource/name, or on one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Resource {
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: Option<&'a str>,
    },
    Url {
        verb: &'a str,
        url: &'a str,
    },
}

fn pieces(rule: &PolicyRule) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    for verb in rule.verbs.iter().map(String::as_str) {
        for url in list(&rule.non_resource_urls).iter().map(String::as_str) {
            out.push(Piece::Url { verb, url });
        }
        for group in list(&rule.api_groups).iter().map(String::as_str) {
            for resource in list(&rule.resources).iter().map(String::as_str) {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(Piece::Resource {
                        verb,
                        group,
                        resource,
                        name: None,
                    });
                }
                for name in names.iter().map(String::as_str) {
                    out.push(Piece::Resource {
                        verb,
                        group,
                        resource,
                        name: Some(name),
                    });
                }
            }
        }
    }
    out
}

fn owner_covers(owner: &PolicyRule, piece: &Piece<'_>) -> bool {
    match *piece {
        Piece::Url { verb, url } => {
            has(&owner.verbs, verb)
                && list(&owner.non_resource_urls).iter().any(|o| {
                    o == ALL || o == url || o.strip_suffix('*').is_some_and(|p| url.starts_with(p))
                })
        }
        Piece::Resource {
            verb,
            group,
            resource,
            name,
        } => {
            let resources = list(&owner.resources);
            let resource_ok = has(resources, resource)
                || resource.split_once('/').is_some_and(|(_, sub)| {
                    resources
                        .iter()
                        .any(|r| r.strip_prefix("*/").is_some_and(|s| s == sub))
                });
            let names = list(&owner.resource_names);
            let name_ok = names.is_empty() || name.is_some_and(|n| names.iter().any(|o| o == n));
            has(&owner.verbs, verb) && has(list(&owner.api_groups), group) && resource_ok && name_ok
        }
    }
}

/// `rule` as single-verb, single-group, single-resource (single-name) or single-URL rules.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &str| Some(vec![s.to_string()]);
    pieces(rule)
        .into_iter()
        .map(|p| match p {
            Piece::Url { verb, url } => PolicyRule {
                verbs: vec![verb.to_string()],
                non_resource_urls: one(url),
                ..PolicyRule::default()
            },
            Piece::Resource {
                verb,
                group,
                resource,
                name,
            } => PolicyRule {
                verbs: vec![verb.to_string()],
                api_groups: one(group),
                resources: one(resource),
                resource_names: name.and_then(one),
                non_resource_urls: None,
            },
        })
        .collect()
}

/// Whether `owner` covers every rule of `servant`.
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> bool {
    uncovered(owner, servant).is_empty()
}

/// The rules of `servant` that `owner` does not fully cover, in order.
pub fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .filter(|r| {
            !pieces(r)
                .iter()
                .all(|p| owner.iter().any(|o| owner_covers(o, p)))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::rules::{rule, url_rule, with_names};

    #[test]
    fn exact_stars_and_subresources() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "pods/log"]),
            rule(&["update"], &["apps"], &["*/scale"]),
        ];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"])]));
        assert!(covers(
            &owner,
            &[rule(&["get", "list"], &[""], &["pods/log"])]
        ));
        assert!(!covers(
            &owner,
            &[rule(&["get", "delete"], &[""], &["pods"])]
        ));
        assert!(!covers(&owner, &[rule(&["get"], &["*"], &["pods"])]));
        assert!(!covers(&owner, &[rule(&["get"], &[""], &["*"])]));
        assert!(covers(
            &owner,
            &[rule(&["update"], &["apps"], &["deployments/scale"])]
        ));
        assert!(!covers(
            &owner,
            &[rule(&["update"], &["apps"], &["deployments"])]
        ));
        let admin = vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
        assert!(covers(&admin, &owner));
        assert!(covers(&admin, &[url_rule(&["get"], &["/healthz"])]));
    }

    #[test]
    fn resource_names_and_urls() {
        let owner = vec![
            with_names(rule(&["get"], &[""], &["configmaps"]), &["a", "b"]),
            url_rule(&["get"], &["/apis/*", "/healthz"]),
        ];
        assert!(covers(
            &owner,
            &[with_names(rule(&["get"], &[""], &["configmaps"]), &["a"])]
        ));
        assert!(!covers(&owner, &[rule(&["get"], &[""], &["configmaps"])]));
        assert!(!covers(
            &owner,
            &[with_names(rule(&["get"], &[""], &["configmaps"]), &["c"])]
        ));
        assert!(covers(
            &owner,
            &[url_rule(&["get"], &["/apis/apps", "/healthz"])]
        ));
        assert!(!covers(&owner, &[url_rule(&["get"], &["/api"])]));
        assert!(!covers(&owner, &[url_rule(&["post"], &["/healthz"])]));
        let servant = vec![
            rule(&["get"], &[""], &["configmaps"]),
            url_rule(&["get"], &["/healthz"]),
        ];
        assert_eq!(
            uncovered(&owner, &servant),
            vec![rule(&["get"], &[""], &["configmaps"])]
        );
    }
}
