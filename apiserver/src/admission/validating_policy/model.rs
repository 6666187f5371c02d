//! ValidatingAdmissionPolicies and their bindings as the plugin uses them: parsed from the
//! stored JSON once per object generation, every CEL expression compiled once.
//!
//! # Guarantees
//! - [`Policy::parse`] never fails: an expression that no longer compiles (or a malformed
//!   selector) becomes the policy's [`Policy::config_error`], which the plugin turns into a
//!   denial or nothing according to `failurePolicy` (upstream's `ConfigurationError`).
//! - Expressions see upstream's variables: `object`, `oldObject`, `request`,
//!   `namespaceObject`, `variables`, `authorizer`, and `params` only when the policy has a
//!   `paramKind`.

use std::sync::Arc;

use cel::Program;
use serde_json::Value;

use k3rs_apimachinery::selector::label::LabelSelector;

/// The variables every policy expression may use.
const BASE_VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// Compiles a policy expression; `has_params` declares `params`.
pub fn compile(source: &str, has_params: bool) -> Result<Arc<Program>, k3rs_cel::CompileError> {
    let mut vars = BASE_VARIABLES.to_vec();
    if has_params {
        vars.push("params");
    }
    k3rs_cel::compile(source, &vars).map(|c| Arc::new(c.program))
}

/// A compiled expression with the text it came from.
#[derive(Debug, Clone)]
pub struct Expr {
    /// The matchCondition's or variable's name ("" for validations).
    pub name: String,
    pub source: String,
    pub program: Arc<Program>,
}

/// One `spec.validations` item.
#[derive(Debug, Clone)]
pub struct Validation {
    pub expr: Expr,
    pub message: String,
    pub message_expression: Option<Expr>,
    /// `Forbidden`, `Invalid`, `Unauthorized`, `RequestEntityTooLarge`; `None` = `Invalid`.
    pub reason: Option<String>,
}

/// One rule of `resourceRules` / `excludeResourceRules` (`NamedRuleWithOperations`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub operations: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub scope: String,
}

/// `MatchResources` of a policy (matchConstraints) or of a binding.
#[derive(Debug, Clone, Default)]
pub struct MatchResources {
    pub namespace_selector: LabelSelector,
    pub object_selector: LabelSelector,
    pub resource_rules: Vec<Rule>,
    pub exclude_resource_rules: Vec<Rule>,
    /// `matchPolicy: Equivalent` (the default) rather than `Exact`.
    pub equivalent: bool,
}

/// `spec.paramKind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamKind {
    pub api_version: String,
    pub kind: String,
}

/// A parsed, compiled ValidatingAdmissionPolicy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    /// `failurePolicy: Ignore` (errors admit) rather than `Fail`.
    pub ignore_failures: bool,
    pub param_kind: Option<ParamKind>,
    pub constraints: MatchResources,
    pub match_conditions: Vec<Expr>,
    pub variables: Vec<Expr>,
    pub validations: Vec<Validation>,
    /// `spec.auditAnnotations`: the key and its value expression.
    pub audit_annotations: Vec<(String, Expr)>,
    /// Why the policy cannot be evaluated.
    pub config_error: Option<String>,
}

/// What a binding does with a failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Deny,
    Warn,
    Audit,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }
}

/// `spec.paramRef` of a binding.
#[derive(Debug, Clone, Default)]
pub struct ParamRef {
    pub name: String,
    pub namespace: String,
    pub selector: Option<LabelSelector>,
    /// `parameterNotFoundAction: Deny` (the default) rather than `Allow`.
    pub deny_when_missing: bool,
}

/// A parsed ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone)]
pub struct Binding {
    pub name: String,
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    /// `None`: the binding matches everything its policy matches.
    pub match_resources: Option<MatchResources>,
    pub actions: Vec<Action>,
    /// Why the binding cannot be used (a malformed selector).
    pub config_error: Option<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn rules(v: &Value) -> Vec<Rule> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|r| Rule {
            api_groups: strings(&r["apiGroups"]),
            api_versions: strings(&r["apiVersions"]),
            operations: strings(&r["operations"]),
            resources: strings(&r["resources"]),
            resource_names: strings(&r["resourceNames"]),
            scope: r["scope"].as_str().unwrap_or("*").to_string(),
        })
        .collect()
}

/// An invalid selector of a `MatchResources` or `paramRef` (`<field>: <why>`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {source}")]
pub struct SelectorFieldError {
    /// The selector's field.
    pub field: &'static str,
    /// Why it is invalid.
    #[source]
    pub source: k3rs_apimachinery::selector::label::SelectorError,
}

fn selector(v: &Value, field: &'static str) -> Result<LabelSelector, SelectorFieldError> {
    if v.is_null() {
        return Ok(LabelSelector::default());
    }
    LabelSelector::from_object(v).map_err(|source| SelectorFieldError { field, source })
}

impl MatchResources {
    /// Parses a `MatchResources` object.
    pub fn parse(v: &Value) -> Result<MatchResources, SelectorFieldError> {
        Ok(MatchResources {
            namespace_selector: selector(&v["namespaceSelector"], "namespaceSelector")?,
            object_selector: selector(&v["objectSelector"], "objectSelector")?,
            resource_rules: rules(&v["resourceRules"]),
            exclude_resource_rules: rules(&v["excludeResourceRules"]),
            equivalent: v["matchPolicy"].as_str() != Some("Exact"),
        })
    }
}

impl Policy {
    /// Parses and compiles a stored policy.
    pub fn parse(obj: &Value) -> Policy {
        let spec = &obj["spec"];
        let param_kind = spec["paramKind"].as_object().map(|_| ParamKind {
            api_version: str_of(&spec["paramKind"]["apiVersion"]),
            kind: str_of(&spec["paramKind"]["kind"]),
        });
        let has_params = param_kind.is_some();
        let mut errors: Vec<String> = Vec::new();
        let mut expr = |name: String, source: &str, field: String| -> Option<Expr> {
            match compile(source, has_params) {
                Ok(program) => Some(Expr {
                    name,
                    source: source.to_string(),
                    program,
                }),
                Err(e) => {
                    errors.push(format!("{field}: compilation failed: {e}"));
                    None
                }
            }
        };
        let named =
            |list: &Value,
             what: &str,
             expr: &mut dyn FnMut(String, &str, String) -> Option<Expr>| {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        expr(
                            str_of(&c["name"]),
                            c["expression"].as_str().unwrap_or(""),
                            format!("spec.{what}[{i}].expression"),
                        )
                    })
                    .collect::<Vec<_>>()
            };
        let match_conditions = named(&spec["matchConditions"], "matchConditions", &mut expr);
        let variables = named(&spec["variables"], "variables", &mut expr);
        let mut validations = Vec::new();
        for (i, v) in spec["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(e) = expr(
                String::new(),
                v["expression"].as_str().unwrap_or(""),
                format!("spec.validations[{i}].expression"),
            ) else {
                continue;
            };
            let message_expression = match v["messageExpression"].as_str().map(str::trim) {
                Some(m) if !m.is_empty() => expr(
                    String::new(),
                    m,
                    format!("spec.validations[{i}].messageExpression"),
                ),
                _ => None,
            };
            validations.push(Validation {
                expr: e,
                message: str_of(&v["message"]),
                message_expression,
                reason: v["reason"].as_str().map(str::to_string),
            });
        }
        let mut audit_annotations = Vec::new();
        for (i, v) in spec["auditAnnotations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let key = str_of(&v["key"]);
            if let Some(e) = expr(
                key.clone(),
                v["valueExpression"].as_str().unwrap_or(""),
                format!("spec.auditAnnotations[{i}].valueExpression"),
            ) {
                audit_annotations.push((key, e));
            }
        }
        let constraints = MatchResources::parse(&spec["matchConstraints"]).unwrap_or_else(|e| {
            errors.push(format!("spec.matchConstraints.{e}"));
            MatchResources::default()
        });
        Policy {
            name: str_of(&obj["metadata"]["name"]),
            ignore_failures: spec["failurePolicy"].as_str() == Some("Ignore"),
            param_kind,
            constraints,
            match_conditions,
            variables,
            validations,
            audit_annotations,
            config_error: (!errors.is_empty()).then(|| errors.join("; ")),
        }
    }
}

impl Binding {
    /// Parses a stored binding.
    pub fn parse(obj: &Value) -> Binding {
        let spec = &obj["spec"];
        let mut config_error = None;
        let param_ref = spec["paramRef"].as_object().map(|_| {
            let pr = &spec["paramRef"];
            ParamRef {
                name: str_of(&pr["name"]),
                namespace: str_of(&pr["namespace"]),
                selector: (!pr["selector"].is_null()).then(|| {
                    selector(&pr["selector"], "paramRef.selector").unwrap_or_else(|e| {
                        config_error = Some(e.to_string());
                        LabelSelector::default()
                    })
                }),
                deny_when_missing: pr["parameterNotFoundAction"].as_str() != Some("Allow"),
            }
        });
        let match_resources = spec["matchResources"].as_object().map(|_| {
            MatchResources::parse(&spec["matchResources"]).unwrap_or_else(|e| {
                config_error = Some(format!("matchResources.{e}"));
                MatchResources::default()
            })
        });
        let actions = strings(&spec["validationActions"])
            .iter()
            .filter_map(|a| match a.as_str() {
                "Deny" => Some(Action::Deny),
                "Warn" => Some(Action::Warn),
                "Audit" => Some(Action::Audit),
                _ => None,
            })
            .collect();
        Binding {
            name: str_of(&obj["metadata"]["name"]),
            policy_name: str_of(&spec["policyName"]),
            param_ref,
            match_resources,
            actions,
            config_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_compiles_a_policy() {
        let p = Policy::parse(&json!({"metadata": {"name": "p"}, "spec": {
            "failurePolicy": "Ignore",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"matchPolicy": "Exact", "resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["deployments"]}]},
            "matchConditions": [{"name": "c", "expression": "true"}],
            "variables": [{"name": "r", "expression": "object.spec.replicas"}],
            "validations": [{"expression": "variables.r <= int(params.data.max)",
                "messageExpression": "'too many: ' + string(variables.r)", "reason": "Forbidden"}]}}));
        assert_eq!(p.config_error, None);
        assert!(p.ignore_failures);
        assert!(!p.constraints.equivalent);
        assert_eq!(p.constraints.resource_rules[0].scope, "*");
        assert_eq!(p.match_conditions[0].name, "c");
        assert_eq!(p.variables[0].name, "r");
        assert_eq!(p.validations[0].reason.as_deref(), Some("Forbidden"));
        assert!(p.validations[0].message_expression.is_some());
    }

    #[test]
    fn params_are_declared_only_with_a_param_kind() {
        let p = Policy::parse(&json!({"metadata": {"name": "p"}, "spec": {
            "validations": [{"expression": "params.x == 1"}]}}));
        let e = p.config_error.unwrap();
        assert!(
            e.starts_with("spec.validations[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'"),
            "{e}"
        );
    }

    #[test]
    fn parses_a_binding() {
        let b = Binding::parse(&json!({"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "validationActions": ["Warn", "Audit"],
            "paramRef": {"name": "limits", "parameterNotFoundAction": "Allow"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}}));
        assert_eq!(b.policy_name, "p");
        assert_eq!(b.actions, vec![Action::Warn, Action::Audit]);
        let pr = b.param_ref.unwrap();
        assert_eq!(pr.name, "limits");
        assert!(!pr.deny_when_missing);
        assert!(!b.match_resources.unwrap().namespace_selector.is_empty());
        assert!(b.config_error.is_none());
    }
}
