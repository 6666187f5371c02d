//! Defaults and validation of ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! objects (kube's `SetDefaults_*` of admissionregistration/v1 and
//! `ValidateValidatingAdmissionPolicy[Binding]`).
//!
//! # Guarantees
//! - Defaults: policy `failurePolicy: Fail`; `matchPolicy: Equivalent`, empty
//!   `namespaceSelector`/`objectSelector` and rule `scope: "*"` in every MatchResources;
//!   binding `paramRef.parameterNotFoundAction: Deny`.
//! - Every expression must compile: a failure is a 422 cause at the expression's field
//!   (`spec.validations[0].expression`) with `compilation failed: <cel error>`.
//! - Bindings need a `policyName` and a non-empty set of known, distinct
//!   `validationActions` without both `Deny` and `Warn`.

use serde_json::{json, Value};

use super::model::compile;
use crate::resources::strategy::default_field;
use k3rs_apimachinery::selector::label::LabelSelector;
use k3rs_apimachinery::status::Cause;

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REASONS: &[&str] = &[
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
    "Unauthorized",
];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const NOT_FOUND_ACTIONS: &[&str] = &["Allow", "Deny"];

fn default_match_resources(m: &mut Value) {
    if !m.is_object() {
        return;
    }
    default_field(m, "matchPolicy", json!("Equivalent"));
    default_field(m, "namespaceSelector", json!({}));
    default_field(m, "objectSelector", json!({}));
    for list in ["resourceRules", "excludeResourceRules"] {
        for r in m[list].as_array_mut().into_iter().flatten() {
            default_field(r, "scope", json!("*"));
        }
    }
}

/// A policy's defaults.
pub fn policy_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "failurePolicy", json!("Fail"));
    if let Some(m) = spec.get_mut("matchConstraints") {
        default_match_resources(m);
    }
}

/// A binding's defaults.
pub fn binding_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if let Some(m) = spec.get_mut("matchResources") {
        default_match_resources(m);
    }
    if let Some(pr) = spec.get_mut("paramRef").filter(|p| p.is_object()) {
        default_field(pr, "parameterNotFoundAction", json!("Deny"));
    }
}

pub(crate) fn not_supported(v: &Value, field: String, supported: &[&str], out: &mut Vec<Cause>) {
    match v.as_str() {
        None if v.is_null() => out.push(Cause::required(field, "")),
        Some(s) if supported.contains(&s) => {}
        other => out.push(Cause::not_supported(field, other.unwrap_or(""), supported)),
    }
}

fn list(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| x.as_str().unwrap_or(""))
        .collect()
}

pub(crate) fn rule_causes(r: &Value, at: &str, out: &mut Vec<Cause>) {
    let ops = list(&r["operations"]);
    if ops.is_empty() {
        out.push(Cause::required(format!("{at}.operations"), ""));
    } else if ops.len() > 1 && ops.contains(&"*") {
        out.push(Cause::invalid_value(
            format!("{at}.operations"),
            format!("[{}]", ops.join(" ")),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            out.push(Cause::not_supported(
                format!("{at}.operations[{i}]"),
                op,
                OPERATIONS,
            ));
        }
    }
    for key in ["apiGroups", "apiVersions", "resources"] {
        let items = list(&r[key]);
        if items.is_empty() {
            out.push(Cause::required(format!("{at}.{key}"), ""));
        } else if items.len() > 1 && items.contains(&"*") {
            out.push(Cause::invalid_value(
                format!("{at}.{key}"),
                format!("[{}]", items.join(" ")),
                "if '*' is present, must not specify other API groups",
            ));
        }
    }
    if !r["scope"].is_null() {
        not_supported(&r["scope"], format!("{at}.scope"), SCOPES, out);
    }
}

pub(crate) fn selector_causes(v: &Value, at: String, out: &mut Vec<Cause>) {
    if v.is_null() {
        out.push(Cause::required(at, ""));
    } else if let Err(e) = LabelSelector::from_object(v) {
        out.push(Cause::invalid_value(at, v, &e.to_string()));
    }
}

fn match_resources_causes(m: &Value, at: &str, out: &mut Vec<Cause>) {
    not_supported(
        &m["matchPolicy"],
        format!("{at}.matchPolicy"),
        MATCH_POLICIES,
        out,
    );
    selector_causes(
        &m["namespaceSelector"],
        format!("{at}.namespaceSelector"),
        out,
    );
    selector_causes(&m["objectSelector"], format!("{at}.objectSelector"), out);
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in m[list].as_array().into_iter().flatten().enumerate() {
            rule_causes(r, &format!("{at}.{list}[{i}]"), out);
        }
    }
}

pub(crate) fn expression_causes(v: &Value, at: String, has_params: bool, out: &mut Vec<Cause>) {
    let src = v.as_str().unwrap_or("");
    if src.trim().is_empty() {
        out.push(Cause::required(at, "expression is not specified"));
    } else if let Err(e) = compile(src, has_params) {
        out.push(Cause::invalid(at, src, &format!("compilation failed: {e}")));
    }
}

fn is_cel_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A policy's validation causes.
pub fn validate_policy(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut out = Vec::new();
    let has_params = spec["paramKind"].is_object();
    if has_params {
        let pk = &spec["paramKind"];
        if pk["apiVersion"].as_str().unwrap_or("").is_empty() {
            out.push(Cause::required("spec.paramKind.apiVersion", ""));
        }
        if pk["kind"].as_str().unwrap_or("").is_empty() {
            out.push(Cause::required("spec.paramKind.kind", ""));
        }
    }
    not_supported(
        &spec["failurePolicy"],
        "spec.failurePolicy".into(),
        FAILURE_POLICIES,
        &mut out,
    );
    let mc = &spec["matchConstraints"];
    if !mc.is_object() {
        out.push(Cause::required("spec.matchConstraints", ""));
    } else {
        match_resources_causes(mc, "spec.matchConstraints", &mut out);
        if list(&mc["resourceRules"]).is_empty() {
            out.push(Cause::required("spec.matchConstraints.resourceRules", ""));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in spec["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.matchConditions[{i}]");
        expression_causes(
            &c["expression"],
            format!("{at}.expression"),
            has_params,
            &mut out,
        );
        let name = c["name"].as_str().unwrap_or("");
        if name.is_empty() {
            out.push(Cause::required(format!("{at}.name"), ""));
        } else if names.contains(&name) {
            out.push(Cause::duplicate(format!("{at}.name"), name));
        } else {
            out.extend(crate::resources::strategy::qualified_name(
                name,
                &format!("{at}.name"),
            ));
        }
        names.push(name);
    }
    for (i, v) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.variables[{i}]");
        let name = v["name"].as_str().unwrap_or("");
        if name.trim().is_empty() {
            out.push(Cause::required(
                format!("{at}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            out.push(Cause::invalid(
                format!("{at}.name"),
                name,
                "name is not a valid CEL identifier",
            ));
        }
        expression_causes(
            &v["expression"],
            format!("{at}.expression"),
            has_params,
            &mut out,
        );
    }
    let validations = spec["validations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let audits = spec["auditAnnotations"].as_array().map_or(0, Vec::len);
    if validations.is_empty() && audits == 0 {
        let why = "validations or auditAnnotations must contain at least one item";
        out.push(Cause::required("spec.validations", why));
        out.push(Cause::required("spec.auditAnnotations", why));
    }
    for (i, v) in validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        expression_causes(
            &v["expression"],
            format!("{at}.expression"),
            has_params,
            &mut out,
        );
        if let Some(me) = v["messageExpression"].as_str() {
            if me.trim().is_empty() {
                out.push(Cause::invalid(
                    format!("{at}.messageExpression"),
                    me,
                    "must be non-empty if specified",
                ));
            } else if let Err(e) = compile(me, has_params) {
                out.push(Cause::invalid(
                    format!("{at}.messageExpression"),
                    me,
                    &format!("compilation failed: {e}"),
                ));
            }
        }
        if let Some(m) = v["message"].as_str() {
            if !m.is_empty() && m.trim().is_empty() {
                out.push(Cause::invalid(
                    format!("{at}.message"),
                    m,
                    "message must be non-empty if specified",
                ));
            } else if m.trim().contains('\n') {
                out.push(Cause::invalid(
                    format!("{at}.message"),
                    m,
                    "message must not contain line breaks",
                ));
            }
        }
        if !v["reason"].is_null() {
            not_supported(&v["reason"], format!("{at}.reason"), REASONS, &mut out);
        }
    }
    let mut keys: Vec<&str> = Vec::new();
    for (i, v) in spec["auditAnnotations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.auditAnnotations[{i}]");
        let key = v["key"].as_str().unwrap_or("");
        if key.is_empty() {
            out.push(Cause::required(format!("{at}.key"), ""));
        } else if keys.contains(&key) {
            out.push(Cause::duplicate(format!("{at}.key"), key));
        } else {
            // The key becomes `<policy name>/<key>`: the whole must be a qualified name.
            let policy = obj["metadata"]["name"].as_str().unwrap_or("");
            let full = format!("{policy}/{key}");
            if !crate::resources::strategy::qualified_name(&full, "").is_empty() {
                out.push(Cause::invalid(
                    format!("{at}.key"),
                    key,
                    "must be a valid name part of a qualified annotation key with the policy name as prefix",
                ));
            }
        }
        keys.push(key);
        expression_causes(
            &v["valueExpression"],
            format!("{at}.valueExpression"),
            has_params,
            &mut out,
        );
    }
    out
}

/// A binding's validation causes.
pub fn validate_binding(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut out = Vec::new();
    if spec["policyName"].as_str().unwrap_or("").is_empty() {
        out.push(Cause::required("spec.policyName", ""));
    }
    let actions = list(&spec["validationActions"]);
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(a) {
            out.push(Cause::not_supported(at.clone(), a, ACTIONS));
        }
        if seen.contains(a) {
            out.push(Cause::duplicate(at, a));
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        out.push(Cause::invalid_value(
            "spec.validationActions",
            format!("[{}]", actions.join(" ")),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        out.push(Cause::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    let pr = &spec["paramRef"];
    if pr.is_object() {
        let has_name = !pr["name"].as_str().unwrap_or("").is_empty();
        if has_name && !pr["selector"].is_null() {
            out.push(Cause::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
        if !has_name && pr["selector"].is_null() {
            out.push(Cause::required(
                "spec.paramRef",
                "one of name or selector must be specified",
            ));
        }
        if !pr["selector"].is_null() {
            selector_causes(&pr["selector"], "spec.paramRef.selector".into(), &mut out);
        }
        not_supported(
            &pr["parameterNotFoundAction"],
            "spec.paramRef.parameterNotFoundAction".into(),
            NOT_FOUND_ACTIONS,
            &mut out,
        );
    }
    if spec["matchResources"].is_object() {
        match_resources_causes(&spec["matchResources"], "spec.matchResources", &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(validations: Value) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": validations}});
        policy_defaults(&mut p);
        p
    }

    #[test]
    fn policy_defaults_are_upstreams() {
        let p = policy(json!([{"expression": "true"}]));
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        let mc = &p["spec"]["matchConstraints"];
        assert_eq!(mc["matchPolicy"], "Equivalent");
        assert_eq!(mc["namespaceSelector"], json!({}));
        assert_eq!(mc["objectSelector"], json!({}));
        assert_eq!(mc["resourceRules"][0]["scope"], "*");
        assert!(validate_policy(&p).is_empty());
        let mut b = json!({"spec": {"policyName": "p", "validationActions": ["Deny"],
            "paramRef": {"name": "x"}, "matchResources": {}}});
        binding_defaults(&mut b);
        assert_eq!(b["spec"]["paramRef"]["parameterNotFoundAction"], "Deny");
        assert_eq!(b["spec"]["matchResources"]["matchPolicy"], "Equivalent");
        assert!(validate_binding(&b).is_empty());
    }

    #[test]
    fn expressions_must_compile() {
        let c = validate_policy(&policy(json!([{"expression": "object.spec.replicas <="}])));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.validations[0].expression");
        assert!(
            c[0].message.starts_with(
                "Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"
            ),
            "{}",
            c[0].message
        );
        let c = validate_policy(&policy(json!([{"expression": "params.max > 1"}])));
        assert_eq!(c[0].field, "spec.validations[0].expression");
        let c = validate_policy(&policy(
            json!([{"expression": "true", "messageExpression": "1 +", "reason": "Gone"}]),
        ));
        assert_eq!(
            crate::resources::strategy::fields(c),
            vec![
                "spec.validations[0].messageExpression",
                "spec.validations[0].reason"
            ]
        );
    }

    #[test]
    fn policy_structure() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {}});
        policy_defaults(&mut p);
        assert_eq!(
            crate::resources::strategy::fields(validate_policy(&p)),
            vec![
                "spec.matchConstraints",
                "spec.validations",
                "spec.auditAnnotations"
            ]
        );
        let mut p = policy(json!([{"expression": "true"}]));
        p["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = json!(["*", "CREATE"]);
        p["spec"]["failurePolicy"] = json!("Sometimes");
        p["spec"]["variables"] = json!([{"name": "1x", "expression": "1"}]);
        assert_eq!(
            crate::resources::strategy::fields(validate_policy(&p)),
            vec![
                "spec.failurePolicy",
                "spec.matchConstraints.resourceRules[0].operations",
                "spec.variables[0].name"
            ]
        );
    }

    #[test]
    fn binding_actions() {
        let b = |actions: Value| {
            validate_binding(&json!({"spec": {"policyName": "p", "validationActions": actions}}))
        };
        let c = b(json!(["Deny", "Warn"]));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.validationActions");
        assert_eq!(
            c[0].message,
            "Invalid value: [Deny Warn]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
        );
        let c = b(json!([]));
        assert_eq!(
            (c[0].field.as_str(), c[0].message.as_str()),
            (
                "spec.validationActions",
                "Required value: at least one validation action is required"
            )
        );
        let c = b(json!(["Audit", "Audit", "Block"]));
        assert_eq!(
            c.iter().map(|c| c.reason).collect::<Vec<_>>(),
            vec!["FieldValueDuplicate", "FieldValueNotSupported"]
        );
        let c = validate_binding(&json!({"spec": {"validationActions": ["Warn"],
            "paramRef": {"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"}}}));
        assert_eq!(
            crate::resources::strategy::fields(c),
            vec!["spec.policyName", "spec.paramRef.name"]
        );
    }
}
