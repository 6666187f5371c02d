//! `rbac.authorization.k8s.io/v1`, stored and validated (enforcement comes with authorization):
//! policy rules of Roles and ClusterRoles, roleRef and subjects of bindings, the defaults of
//! `SetDefaults_Subject`/`SetDefaults_*Binding`, and the immutable roleRef.

use serde_json::{json, Value};

use k3rs_apimachinery::catalog::NameRule;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::{is_dns1123_subdomain, validate_name};

/// The RBAC API group, the only one a roleRef may name.
pub const GROUP: &str = "rbac.authorization.k8s.io";

fn strs(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

/// One `PolicyRule` at `path`; namespaced rules cannot name non-resource URLs.
fn validate_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if strs(&rule["verbs"]) == 0 {
        causes.push(Cause::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if strs(&rule["nonResourceURLs"]) > 0 {
        let urls = rule["nonResourceURLs"].to_string();
        if namespaced {
            causes.push(Cause::invalid(
                format!("{path}.nonResourceURLs"),
                &urls,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if strs(&rule["apiGroups"]) + strs(&rule["resources"]) + strs(&rule["resourceNames"]) > 0 {
            causes.push(Cause::invalid(
                format!("{path}.nonResourceURLs"),
                &urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return causes;
    }
    if strs(&rule["apiGroups"]) == 0 {
        causes.push(Cause::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if strs(&rule["resources"]) == 0 {
        causes.push(Cause::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    causes
}

fn validate_rules(role: &Value, namespaced: bool) -> Vec<Cause> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, r)| validate_rule(r, namespaced, &format!("rules[{i}]")))
        .collect()
}

pub fn role_validate(role: &Value) -> Vec<Cause> {
    validate_rules(role, true)
}

/// Rules, and an aggregationRule (stored as given) with at least one selector.
pub fn clusterrole_validate(role: &Value) -> Vec<Cause> {
    let mut causes = validate_rules(role, false);
    let agg = &role["aggregationRule"];
    if agg.is_object() && strs(&agg["clusterRoleSelectors"]) == 0 {
        causes.push(Cause::required(
            "aggregationRule.clusterRoleSelectors",
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    causes
}

/// `roleRef.apiGroup` and User/Group subjects' `apiGroup` default to the RBAC group.
pub fn binding_defaults(b: &mut Value) {
    if b["roleRef"].is_object() && b["roleRef"]["apiGroup"].as_str().is_none_or(str::is_empty) {
        b["roleRef"]["apiGroup"] = json!(GROUP);
    }
    for s in b["subjects"].as_array_mut().into_iter().flatten() {
        let kind = s["kind"].as_str().unwrap_or("");
        let empty = s["apiGroup"].as_str().is_none_or(str::is_empty);
        if empty && (kind == "User" || kind == "Group") {
            s["apiGroup"] = json!(GROUP);
        }
    }
}

fn validate_subject(s: &Value, namespaced: bool, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = s["name"].as_str().unwrap_or("");
    if name.is_empty() {
        causes.push(Cause::required(format!("{path}.name"), ""));
    }
    let api_group = s["apiGroup"].as_str().unwrap_or("");
    match s["kind"].as_str().unwrap_or("") {
        "ServiceAccount" => {
            if !name.is_empty() && !is_dns1123_subdomain(name) {
                causes.extend(validate_name(
                    name,
                    NameRule::Subdomain,
                    &format!("{path}.name"),
                ));
            }
            if !api_group.is_empty() {
                causes.push(Cause::not_supported(
                    format!("{path}.apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && s["namespace"].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != GROUP {
                causes.push(Cause::not_supported(
                    format!("{path}.apiGroup"),
                    api_group,
                    &[GROUP],
                ));
            }
        }
        other => causes.push(Cause::not_supported(
            format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    causes
}

/// A RoleBinding (`namespaced`, may reference a Role or a ClusterRole) or a ClusterRoleBinding
/// (ClusterRoles only).
pub fn binding_validate(b: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let rr = &b["roleRef"];
    let group = rr["apiGroup"].as_str().unwrap_or("");
    if group != GROUP {
        causes.push(Cause::not_supported("roleRef.apiGroup", group, &[GROUP]));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = rr["kind"].as_str().unwrap_or("");
    if !kinds.contains(&kind) {
        causes.push(Cause::not_supported("roleRef.kind", kind, kinds));
    }
    match rr["name"].as_str().unwrap_or("") {
        "" => causes.push(Cause::required("roleRef.name", "")),
        n => causes.extend(validate_name(n, NameRule::PathSegment, "roleRef.name")),
    }
    for (i, s) in b["subjects"].as_array().into_iter().flatten().enumerate() {
        causes.extend(validate_subject(s, namespaced, &format!("subjects[{i}]")));
    }
    causes
}

/// A binding's roleRef cannot change.
pub fn binding_validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    if new["roleRef"] != old["roleRef"] {
        return vec![Cause::invalid(
            "roleRef",
            &new["roleRef"].to_string(),
            "cannot change roleRef",
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::super::fields;
    use super::*;

    #[test]
    fn rules() {
        let ok = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        assert!(role_validate(&ok).is_empty());
        let bad = json!({"rules": [{"apiGroups": [], "resources": []},
            {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        assert_eq!(
            fields(role_validate(&bad)),
            [
                "rules[0].verbs",
                "rules[0].apiGroups",
                "rules[0].resources",
                "rules[1].nonResourceURLs"
            ]
        );
        // Cluster roles may name URLs.
        assert!(clusterrole_validate(&json!({"rules": [bad["rules"][1].clone()]})).is_empty());
        let agg = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            fields(clusterrole_validate(&agg)),
            ["aggregationRule.clusterRoleSelectors"]
        );
    }

    #[test]
    fn binding_defaults_and_validation() {
        let mut b = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa"}]});
        binding_defaults(&mut b);
        assert_eq!(b["roleRef"]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        assert!(b["subjects"][1].get("apiGroup").is_none());
        assert!(binding_validate(&b, true).is_empty());
        // A ClusterRoleBinding's ServiceAccount needs a namespace; Roles are not bindable.
        b["roleRef"]["kind"] = json!("Role");
        assert_eq!(
            fields(binding_validate(&b, false)),
            ["roleRef.kind", "subjects[1].namespace"]
        );
        let bad = json!({"roleRef": {"apiGroup": "x", "kind": "Role"},
            "subjects": [{"kind": "Robot", "name": "r"}]});
        assert_eq!(
            fields(binding_validate(&bad, true)),
            ["roleRef.apiGroup", "roleRef.name", "subjects[0].kind"]
        );
        let mut new = b.clone();
        new["roleRef"]["name"] = json!("edit");
        assert_eq!(
            binding_validate_update(&new, &b)[0].message,
            format!(
                "Invalid value: {}: cannot change roleRef",
                json!(new["roleRef"].to_string())
            )
        );
    }
}
