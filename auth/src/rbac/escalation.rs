//! Privilege-escalation prevention for RBAC writes (upstream's `ConfirmNoEscalation`): a user
//! may only grant, through a role's rules or a binding, what they already hold — unless they
//! may `escalate` (roles) or `bind` (bindings), which the caller asks the authorizer. Pure.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::covers::{breakdown, covers};
use super::resolver::{rules_for, PolicySource};
use crate::UserInfo;

fn quoted(v: &[String]) -> String {
    let parts: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", parts.join(" "))
}

/// Upstream's `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
pub fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    let mut field = |name: &str, v: &Option<Vec<String>>| {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            parts.push(format!("{name}:{}", quoted(v)));
        }
    };
    field("APIGroups", &r.api_groups);
    field("Resources", &r.resources);
    field("NonResourceURLs", &r.non_resource_urls);
    field("ResourceNames", &r.resource_names);
    field("Verbs", &Some(r.verbs.clone()));
    format!("{{{}}}", parts.join(", "))
}

/// Single-piece rules merged back per group and resource (without names), verbs in order.
fn compact(pieces: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for p in pieces {
        let simple = p.resource_names.is_none() && p.non_resource_urls.is_none();
        let same = out.iter_mut().find(|o| {
            simple
                && o.resource_names.is_none()
                && o.non_resource_urls.is_none()
                && o.api_groups == p.api_groups
                && o.resources == p.resources
        });
        match same {
            Some(o) => {
                for v in p.verbs {
                    if !o.verbs.contains(&v) {
                        o.verbs.push(v);
                    }
                }
            }
            None => out.push(p),
        }
    }
    out
}

/// A grant of rules the user does not hold (upstream's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("user {user:?} (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{}{}", .missing.join("\n"), resolution(.errors))]
pub struct Escalation {
    /// The user's name.
    pub user: String,
    /// The user's groups, quoted as upstream prints them.
    pub groups: String,
    /// The missing rules, compacted, sorted, one per line.
    pub missing: Vec<String>,
    /// Bindings whose role could not be resolved.
    pub errors: Vec<String>,
}

fn resolution(errors: &[String]) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!("; resolution errors: [{}]", errors.join(" "))
    }
}

/// `Ok` when `user`'s rules in `namespace` ("" for cluster scope) cover `rules`; otherwise
/// upstream's message, listing what is missing (sorted, one per line).
pub fn confirm_no_escalation(
    src: &dyn PolicySource,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), Escalation> {
    let (owner, errors) = rules_for(src, user, namespace);
    let missing: Vec<PolicyRule> = rules
        .iter()
        .flat_map(breakdown)
        .filter(|p| !covers(&owner, std::slice::from_ref(p)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    Err(Escalation {
        user: user.username.clone(),
        groups: quoted(&user.groups),
        missing: lines,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::resolver::fixtures::*;
    use crate::rbac::resolver::StaticPolicy;
    use crate::rbac::rules::{rule, url_rule, with_names};

    #[test]
    fn compact_strings_as_upstream() {
        assert_eq!(
            compact_string(&rule(&["get", "list"], &[""], &["pods"])),
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#
        );
        assert_eq!(
            compact_string(&url_rule(&["get"], &["/healthz"])),
            r#"{NonResourceURLs:["/healthz"], Verbs:["get"]}"#
        );
        assert_eq!(
            compact_string(&with_names(rule(&["get"], &[""], &["secrets"]), &["s"])),
            r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["s"], Verbs:["get"]}"#
        );
    }

    #[test]
    fn only_held_rules_may_be_granted() {
        let src = StaticPolicy {
            cluster_roles: vec![cluster_role(
                "edit",
                vec![rule(
                    &["get", "list", "create"],
                    &[""],
                    &["configmaps", "pods"],
                )],
            )],
            role_bindings: vec![rb(
                "a",
                "e",
                "ClusterRole",
                "edit",
                vec![subject("User", "u")],
            )],
            ..StaticPolicy::default()
        };
        let u = UserInfo::authenticated("u", vec![]);
        assert_eq!(
            confirm_no_escalation(&src, &u, "a", &[rule(&["get"], &[""], &["pods"])]),
            Ok(())
        );
        assert_eq!(
            confirm_no_escalation(
                &src,
                &u,
                "a",
                &[
                    rule(&["get", "delete", "deletecollection"], &[""], &["pods", "secrets"]),
                    url_rule(&["get"], &["/metrics"]),
                ]
            ).map_err(|e| e.to_string()),
            Err("user \"u\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
                 {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"deletecollection\"]}\n\
                 {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"deletecollection\"]}\n\
                 {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
                .into())
        );
        // Held in namespace a only.
        assert!(confirm_no_escalation(&src, &u, "b", &[rule(&["get"], &[""], &["pods"])]).is_err());
    }
}
