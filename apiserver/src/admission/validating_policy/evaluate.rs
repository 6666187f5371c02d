//! One policy evaluated against one request and one parameter object (upstream's
//! `validator.Validate`): matchConditions, then variables, validations with their messages,
//! and audit annotations, with the policy's `failurePolicy` applied to every error.
//!
//! # Guarantees
//! - Pure and synchronous; [`evaluate_on_pool`] runs it on the CEL pool.
//! - Every expression's cost is estimated from the sizes of the values it will see before
//!   it runs ([`k3rs_cel::cost`]): one over the per-call limit fails with
//!   `operation cancelled: actual cost limit exceeded`; once one evaluation's expressions
//!   would exceed the runtime budget, the evaluation is one error decision
//!   ([`OUT_OF_BUDGET`]). Both follow `failurePolicy`.
//! - A false matchCondition skips the policy (no decisions); an erroring one — when none is
//!   false — is one error decision.
//! - A validation that is not `true` denies with `messageExpression`'s string (trimmed,
//!   one line, at most [`MAX_MESSAGE_LEN`] bytes), else `message`, else
//!   `failed expression: <expression>`; its `reason` defaults to `Invalid`.
//! - An expression error denies (`failurePolicy: Fail`) or admits (`Ignore`), with
//!   `expression '<expression>' resulted in error: <error>`.

use std::collections::HashMap;

use serde_json::Value;

use super::model::{Expr, Policy};
use k3rs_cel::cost::{Budget, Refusal};
use k3rs_cel::{self as k8scel, value::to_cel, Shape, Var, Vars};

/// The longest message a `messageExpression` may produce (upstream's
/// `MaxEvaluatedMessageExpressionSizeBytes`).
pub const MAX_MESSAGE_LEN: usize = 5 * 1024;

pub use k3rs_cel::cost::OUT_OF_BUDGET;

/// The values expressions see (JSON `null` where absent).
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub object: Value,
    pub old_object: Value,
    pub request: Value,
    pub namespace_object: Value,
    pub params: Value,
    /// `authorizer` (unbound when `None`).
    pub authorizer: Option<k8scel::authz::Variable>,
}

/// A decision's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Admit,
    Deny,
}

/// The outcome of one validation (or of an error that stands for all of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The validation's index (0 for errors not tied to one).
    pub index: usize,
    pub action: Action,
    pub message: String,
    /// `Forbidden`, `Invalid`, … (`Invalid` when the validation names none, and for errors).
    pub reason: &'static str,
}

/// An expression that failed: its per-call cost, or its evaluation (upstream's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expression '{expression}' resulted in error: {reason}")]
pub struct ExpressionError {
    /// The expression's source, trimmed.
    pub expression: String,
    /// Why it failed.
    pub reason: String,
}

/// Everything one evaluation decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluation {
    pub decisions: Vec<Decision>,
    /// Values to publish as `<policy>/<key>`.
    pub annotations: Vec<(String, String)>,
}

/// A failure under the policy's failure policy.
fn failure(policy: &Policy, index: usize, message: String) -> Decision {
    Decision {
        index,
        action: if policy.ignore_failures {
            Action::Admit
        } else {
            Action::Deny
        },
        message,
        reason: "Invalid",
    }
}

fn static_reason(reason: Option<&str>) -> &'static str {
    match reason {
        Some("Forbidden") => "Forbidden",
        Some("Unauthorized") => "Unauthorized",
        Some("RequestEntityTooLarge") => "RequestEntityTooLarge",
        _ => "Invalid",
    }
}

/// The evaluation's budget ran out: it stops with one error.
struct OutOfBudget;

struct Scope {
    vars: Vars,
    variables: HashMap<String, cel::Value>,
    /// Sizes of the variables, `variables` included, for cost estimates.
    shapes: Vec<(&'static str, Shape)>,
    variable_shapes: std::collections::BTreeMap<String, Shape>,
    budget: Budget,
}

impl Scope {
    fn new(input: &Input) -> Scope {
        let plain = |v: &Value| Var::Plain(to_cel(v, None));
        let mut vars = vec![
            ("object", plain(&input.object)),
            ("oldObject", plain(&input.old_object)),
            ("request", plain(&input.request)),
            ("namespaceObject", plain(&input.namespace_object)),
            ("params", plain(&input.params)),
        ];
        let shapes = vec![
            ("object", Shape::of_json(&input.object)),
            ("oldObject", Shape::of_json(&input.old_object)),
            ("request", Shape::of_json(&input.request)),
            ("namespaceObject", Shape::of_json(&input.namespace_object)),
            ("params", Shape::of_json(&input.params)),
            ("authorizer", Shape::Scalar),
        ];
        if let Some(a) = &input.authorizer {
            vars.push(("authorizer", Var::Authorizer(Box::new(a.clone()))));
        }
        Scope {
            vars,
            variables: HashMap::new(),
            shapes,
            variable_shapes: Default::default(),
            budget: Budget::runtime(),
        }
    }

    /// Binds variable `name` to `value`.
    fn define(&mut self, name: &str, value: cel::Value) {
        let shape = k8scel::value::to_json(&value)
            .map_or(Shape::Any(k8scel::cost::MAX_REQUEST_BYTES), |j| {
                Shape::of_json(&j)
            });
        self.variable_shapes.insert(name.to_string(), shape);
        self.variables.insert(name.to_string(), value);
    }

    fn run(&mut self, e: &Expr) -> Result<Result<cel::Value, ExpressionError>, OutOfBudget> {
        let mut shapes = self.shapes.clone();
        let variables = Shape::object(self.variable_shapes.clone());
        shapes.push(("variables", variables));
        let failed = |err: &dyn std::fmt::Display| ExpressionError {
            expression: e.source.trim().to_string(),
            reason: err.to_string(),
        };
        match self.budget.charge(k8scel::cost_of(&e.program, &shapes)) {
            Ok(()) => {}
            Err(Refusal::OutOfBudget) => return Err(OutOfBudget),
            Err(call @ Refusal::CallLimit) => return Ok(Err(failed(&call))),
        }
        let mut vars = self.vars.clone();
        vars.push((
            "variables",
            Var::Plain(cel::Value::from(self.variables.clone())),
        ));
        Ok(k8scel::evaluate(&e.program, &vars).map_err(|err| failed(&err)))
    }
}

/// The message of a failed validation.
fn message(scope: &mut Scope, v: &super::model::Validation) -> Result<String, OutOfBudget> {
    let from_expression = match &v.message_expression {
        Some(m) => match scope.run(m)? {
            Ok(cel::Value::String(s)) => Some(s.trim().to_string()),
            _ => None,
        },
        None => None,
    }
    .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_LEN && !m.contains('\n'));
    Ok(from_expression
        .or_else(|| Some(v.message.trim().to_string()).filter(|m| !m.is_empty()))
        .unwrap_or_else(|| format!("failed expression: {}", v.expr.source.trim())))
}

/// Evaluates `policy` against `input`.
pub fn evaluate(policy: &Policy, input: &Input) -> Evaluation {
    evaluate_within_budget(policy, input).unwrap_or_else(|OutOfBudget| Evaluation {
        decisions: vec![failure(policy, 0, OUT_OF_BUDGET.to_string())],
        annotations: Vec::new(),
    })
}

fn evaluate_within_budget(policy: &Policy, input: &Input) -> Result<Evaluation, OutOfBudget> {
    let mut scope = Scope::new(input);
    let mut condition_error = None;
    for c in &policy.match_conditions {
        match scope.run(c)? {
            Ok(cel::Value::Bool(false)) => return Ok(Evaluation::default()),
            Ok(cel::Value::Bool(true)) => {}
            Ok(_) => {
                condition_error.get_or_insert(format!(
                    "matchCondition '{}' did not evaluate to a bool",
                    c.name
                ));
            }
            Err(e) => {
                condition_error.get_or_insert(format!("matchCondition '{}': {e}", c.name));
            }
        }
    }
    if let Some(e) = condition_error {
        return Ok(Evaluation {
            decisions: vec![failure(policy, 0, e)],
            annotations: Vec::new(),
        });
    }
    // Variables in order, each seeing the earlier ones; a failing one stays undefined, so
    // only expressions that use it fail.
    for v in &policy.variables {
        if let Ok(value) = scope.run(v)? {
            scope.define(&v.name, value);
        }
    }
    let mut out = Evaluation::default();
    for (i, v) in policy.validations.iter().enumerate() {
        out.decisions.push(match scope.run(&v.expr)? {
            Err(e) => failure(policy, i, e.to_string()),
            Ok(cel::Value::Bool(true)) => Decision {
                index: i,
                action: Action::Admit,
                message: String::new(),
                reason: "Invalid",
            },
            Ok(_) => Decision {
                index: i,
                action: Action::Deny,
                message: message(&mut scope, v)?,
                reason: static_reason(v.reason.as_deref()),
            },
        });
    }
    for (key, e) in &policy.audit_annotations {
        match scope.run(e)? {
            Ok(cel::Value::String(s)) if !s.trim().is_empty() => {
                out.annotations.push((key.clone(), s.trim().to_string()))
            }
            Ok(cel::Value::String(_)) | Ok(cel::Value::Null) => {}
            Ok(_) => out.decisions.push(failure(
                policy,
                0,
                format!(
                    "valueExpression '{}' resulted in unsupported return type. Return type must be either string or null.",
                    e.source.trim()
                ),
            )),
            Err(err) => out.decisions.push(failure(policy, 0, err.to_string())),
        }
    }
    Ok(out)
}

/// [`evaluate`] on the CEL pool; a full pool (or a job past the backstop) is a failure
/// under the policy's `failurePolicy`.
pub async fn evaluate_on_pool(policy: std::sync::Arc<Policy>, input: Input) -> Evaluation {
    let p = policy.clone();
    let result = crate::admission::cel_pool::run(move || evaluate(&p, &input)).await;
    result.unwrap_or_else(|e| Evaluation {
        decisions: vec![failure(&policy, 0, e.to_string())],
        annotations: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(spec: Value) -> Policy {
        let p = Policy::parse(&json!({"metadata": {"name": "p"}, "spec": spec}));
        assert_eq!(p.config_error, None);
        p
    }

    fn input(replicas: i64) -> Input {
        Input {
            object: json!({"metadata": {"name": "d", "labels": {"tier": "web"}},
                "spec": {"replicas": replicas}}),
            request: json!({"operation": "CREATE", "userInfo": {"username": "alice"}}),
            params: json!({"data": {"max": "5"}}),
            ..Default::default()
        }
    }

    fn actions(e: &Evaluation) -> Vec<(Action, &str)> {
        e.decisions
            .iter()
            .map(|d| (d.action, d.message.as_str()))
            .collect()
    }

    #[test]
    fn validations_admit_or_deny_with_their_messages() {
        let p = policy(json!({"validations": [
            {"expression": "object.spec.replicas <= 5"},
            {"expression": "object.spec.replicas < 3", "message": " at most two "},
            {"expression": "object.spec.replicas < 2", "message": "m",
                "messageExpression": "'got ' + string(object.spec.replicas)", "reason": "Forbidden"},
            {"expression": "object.spec.replicas < 1",
                "messageExpression": "'two\\nlines'"}]}));
        let e = evaluate(&p, &input(2));
        assert_eq!(
            actions(&e),
            vec![
                (Action::Admit, ""),
                (Action::Admit, ""),
                (Action::Deny, "got 2"),
                (Action::Deny, "failed expression: object.spec.replicas < 1"),
            ]
        );
        assert_eq!(e.decisions[2].reason, "Forbidden");
        assert_eq!(e.decisions[3].reason, "Invalid");
        let e = evaluate(&p, &input(4));
        assert_eq!(e.decisions[1].message, "at most two");
    }

    #[test]
    fn match_conditions_skip_or_fail() {
        let p = policy(json!({"matchConditions": [
                {"name": "web", "expression": "object.metadata.labels.tier == 'web'"}],
            "validations": [{"expression": "false"}]}));
        assert_eq!(evaluate(&p, &input(1)).decisions.len(), 1);
        let mut other = input(1);
        other.object["metadata"]["labels"]["tier"] = json!("db");
        assert!(evaluate(&p, &other).decisions.is_empty());
        let p = policy(json!({"matchConditions": [
                {"name": "broken", "expression": "object.missing == 1"},
                {"name": "no", "expression": "false"}],
            "validations": [{"expression": "false"}]}));
        assert!(
            evaluate(&p, &input(1)).decisions.is_empty(),
            "a false condition wins over an erroring one"
        );
        let p = policy(json!({"matchConditions": [
                {"name": "broken", "expression": "object.missing == 1"}],
            "validations": [{"expression": "false"}]}));
        let e = evaluate(&p, &input(1));
        assert_eq!(e.decisions.len(), 1);
        assert_eq!(e.decisions[0].action, Action::Deny);
        assert!(e.decisions[0].message.starts_with("matchCondition 'broken': expression 'object.missing == 1' resulted in error: no such key: missing"), "{}", e.decisions[0].message);
    }

    #[test]
    fn errors_follow_the_failure_policy() {
        let spec = json!({"validations": [{"expression": "object.spec.size > 1"}]});
        let e = evaluate(&policy(spec.clone()), &input(1));
        assert_eq!(
            actions(&e),
            vec![(
                Action::Deny,
                "expression 'object.spec.size > 1' resulted in error: no such key: size"
            )]
        );
        let mut ignore = spec;
        ignore["failurePolicy"] = json!("Ignore");
        let e = evaluate(&policy(ignore), &input(1));
        assert_eq!(e.decisions[0].action, Action::Admit);
    }

    #[test]
    fn variables_params_request_and_audit_annotations() {
        let p = policy(
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "variables": [
                {"name": "max", "expression": "int(params.data.max)"},
                {"name": "over", "expression": "object.spec.replicas > variables.max"},
                {"name": "broken", "expression": "object.nope"}],
            "validations": [
                {"expression": "!variables.over", "messageExpression": "request.userInfo.username + ' asked too much'"},
                {"expression": "variables.broken == 1"}],
            "auditAnnotations": [
                {"key": "replicas", "valueExpression": "string(object.spec.replicas)"},
                {"key": "skipped", "valueExpression": "null"}]}),
        );
        let e = evaluate(&p, &input(7));
        assert_eq!(e.decisions[0].action, Action::Deny);
        assert_eq!(e.decisions[0].message, "alice asked too much");
        assert_eq!(e.decisions[1].action, Action::Deny);
        assert!(e.decisions[1].message.contains("resulted in error"));
        assert_eq!(
            e.annotations,
            vec![("replicas".to_string(), "7".to_string())]
        );
        let e = evaluate(&p, &input(5));
        assert_eq!(e.decisions[0].action, Action::Admit);
    }

    #[tokio::test]
    async fn pooled_evaluation_returns_the_result() {
        let p = policy(json!({"validations": [{"expression":
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, string(a*b).size() > 0)) && object.spec.replicas > 0"}]}));
        let e = evaluate_on_pool(std::sync::Arc::new(p), input(1)).await;
        assert_eq!(e.decisions[0].action, Action::Admit);
    }

    fn with_items(n: usize) -> Input {
        let mut i = input(1);
        i.object["spec"]["items"] = Value::Array(vec![json!("abcdefgh"); n]);
        i
    }

    #[test]
    fn an_expression_too_dear_for_the_object_is_not_run() {
        let pairwise = "object.spec.items.all(a, object.spec.items.exists(b, a == b))";
        let p = policy(json!({"validations": [{"expression": pairwise}]}));
        assert_eq!(
            evaluate(&p, &with_items(10)).decisions[0].action,
            Action::Admit
        );
        let e = evaluate(&p, &with_items(5_000));
        assert_eq!(
            actions(&e),
            vec![(Action::Deny, "expression 'object.spec.items.all(a, object.spec.items.exists(b, a == b))' resulted in error: operation cancelled: actual cost limit exceeded")]
        );
        let mut ignore = p.clone();
        ignore.ignore_failures = true;
        assert_eq!(
            evaluate(&ignore, &with_items(5_000)).decisions[0].action,
            Action::Admit
        );
    }

    #[test]
    fn expressions_share_one_budget() {
        // Each within the per-call limit; twenty of them are not.
        let dear = json!({"expression": "object.spec.items.all(a, a.size() < 100 && a.contains('x') == false)"});
        let p = policy(json!({"validations": vec![dear; 20]}));
        assert!(evaluate(&p, &with_items(20))
            .decisions
            .iter()
            .all(|d| d.action == Action::Admit));
        let e = evaluate(&p, &with_items(60_000));
        assert_eq!(actions(&e), vec![(Action::Deny, OUT_OF_BUDGET)]);
    }
}
