//! `x-kubernetes-validations` on a custom resource (apiextensions' `schema/cel` validator):
//! every rule of every schema node whose value is present and not null is evaluated with
//! `self` (and `oldSelf`, the correlated old value, on updates), after defaulting and
//! pruning. Transition rules (those using `oldSelf`) only run when an old value correlates
//! (same property, same map key, same list-map key), unless `optionalOldSelf`.
//!
//! # Cost
//! Before a rule (or its `messageExpression`) runs, its cost is estimated from the sizes
//! of the very values it will see ([`k3rs_cel::cost`]); one over the per-call limit, or
//! over what is left of the object's budget, is not run and ends the validation with
//! upstream's errors. The whole validation runs on the CEL pool ([`k3rs_cel::Pool`]).

use serde_json::Value;

use super::rule::{self, Rule};
use super::{child, field_schema, index};
use k3rs_apimachinery::status::Cause;
use k3rs_cel::cost::{Budget, Refusal, OUT_OF_BUDGET};
use k3rs_cel::{self as k8scel, Shape, Var};

/// Whether any node of `schema` has rules.
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
                || m.iter()
                    .filter(|(k, _)| {
                        matches!(k.as_str(), "properties" | "items" | "additionalProperties")
                    })
                    .any(|(k, v)| match (k.as_str(), v) {
                        ("properties", Value::Object(p)) => p.values().any(has_rules),
                        (_, v) => has_rules(v),
                    })
        }
        _ => false,
    }
}

/// Every rule failure of `obj` (a whole custom resource; `old` on updates) under `schema`,
/// evaluated on the CEL pool within the runtime cost budget. The calling thread waits;
/// inside a multi-threaded tokio runtime it hands its other tasks off first.
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !has_rules(schema) {
        return Vec::new();
    }
    let (schema, obj, old) = (schema.clone(), obj.clone(), old.cloned());
    let job = move || validate_now(&schema, &obj, old.as_ref());
    let result = match k8scel::Pool::global().submit(job) {
        Ok(pending) => wait(pending),
        Err(e) => Err(e),
    };
    result.unwrap_or_else(|e| {
        vec![rule::invalid(
            String::new(),
            "object",
            &format!("validation rules were not evaluated: {e}"),
        )]
    })
}

fn wait<T>(pending: k8scel::pool::Pending<T>) -> Result<T, k8scel::PoolError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| pending.wait()),
        _ => pending.wait(),
    }
}

/// [`validate`] on the calling thread (still within the cost budget).
pub fn validate_now(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut budget = Some(Budget::runtime());
    walk(schema, obj, old, "", &mut budget, &mut out);
    out
}

/// `budget` is `None` once validation stopped (over a limit).
fn walk(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    budget: &mut Option<Budget>,
    out: &mut Vec<Cause>,
) {
    if v.is_null() || budget.is_none() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    node(schema, v, old, at, budget, out);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let Some(sub) = field_schema(schema, k) else {
                    continue;
                };
                let at = if schema["properties"].get(k).is_some() {
                    child(at, k)
                } else {
                    format!("{at}[{k}]")
                };
                walk(sub, x, old.and_then(|o| o.get(k)), &at, budget, out);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                return;
            };
            let olds = old.and_then(Value::as_array);
            for (i, x) in items.iter().enumerate() {
                let o = olds.and_then(|olds| correlated(schema, x, olds));
                walk(item_schema, x, o, &index(at, i), budget, out);
            }
        }
        _ => {}
    }
}

/// The old item an item of a list correlates with: same keys in a `map` list, an equal item
/// in a `set`; none in an atomic list.
fn correlated<'a>(schema: &Value, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    match schema["x-kubernetes-list-type"].as_str() {
        Some("map") => {
            let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            olds.iter()
                .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
        }
        Some("set") => olds.iter().find(|o| *o == item),
        _ => None,
    }
}

fn node(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    budget: &mut Option<Budget>,
    out: &mut Vec<Cause>,
) {
    let rules = Rule::all_of(schema);
    if rules.is_empty() {
        return;
    }
    let typ = schema["type"].as_str().unwrap_or("");
    let this = k8scel::value::to_cel(v, Some(schema));
    let previous = old.map(|o| k8scel::value::to_cel(o, Some(schema)));
    let this_shape = Shape::of_json(v);
    let shapes = [
        ("self", this_shape.clone()),
        ("oldSelf", old.map_or(this_shape, Shape::of_json)),
    ];
    for r in &rules {
        let Some(b) = budget.as_mut() else {
            return;
        };
        let compiled = match k8scel::compile(&r.rule, &["self", "oldSelf"]) {
            Ok(c) => c,
            Err(e) => {
                out.push(rule::invalid(
                    at.into(),
                    typ,
                    &format!("rule compile error: {e}"),
                ));
                continue;
            }
        };
        if compiled.uses_old_self && previous.is_none() && !r.optional_old_self {
            continue;
        }
        let mut vars = vec![("self", Var::Plain(this.clone()))];
        if r.optional_old_self {
            vars.push(("oldSelf", Var::Optional(previous.clone())));
        } else if let Some(p) = &previous {
            vars.push(("oldSelf", Var::Plain(p.clone())));
        }
        // Ratcheting (CRDValidationRatcheting, on since 1.30): a value the update left as it
        // was may keep failing the rules that do not compare it with its old self.
        let unchanged = old == Some(v) && !compiled.uses_old_self;
        if let Err(refused) = b.charge(k8scel::cost_of(&compiled.program, &shapes)) {
            let why = match refused {
                Refusal::OutOfBudget => OUT_OF_BUDGET.to_string(),
                Refusal::CallLimit => format!(
                    "'{refused}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    r.error_string()
                ),
            };
            out.push(rule::invalid(at.into(), typ, &why));
            *budget = None;
            return;
        }
        match k8scel::evaluate(&compiled.program, &vars) {
            Ok(cel::Value::Bool(true)) => {}
            _ if unchanged => {}
            Ok(cel::Value::Bool(false)) => match message_expression(r, &vars, &shapes, b) {
                Ok(detail) => out.push(failure(schema, r, detail, at, typ)),
                Err(why) => {
                    out.push(rule::invalid(at.into(), typ, &why.to_string()));
                    *budget = None;
                    return;
                }
            },
            Ok(_) => out.push(rule::invalid(
                at.into(),
                typ,
                &format!("no such overload evaluating rule: {}", r.error_string()),
            )),
            Err(e) => out.push(rule::invalid(
                at.into(),
                typ,
                &format!("{e} evaluating rule: {}", r.error_string()),
            )),
        }
    }
}

/// The failure of rule `r`; `detail` from its `messageExpression`, if that gave one.
fn failure(schema: &Value, r: &Rule, detail: Option<String>, at: &str, typ: &str) -> Cause {
    let field = if r.field_path.is_empty() {
        at.to_string()
    } else {
        rule::field_path(schema, at, &r.field_path).unwrap_or_else(|_| at.to_string())
    };
    let detail = detail.unwrap_or_else(|| r.message_or_default());
    r.failure(field, typ, &detail)
}

/// The budget ran out on a `messageExpression` (upstream's message; validation stops).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum MessageCostError {
    /// The per-object budget.
    #[error("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run")]
    OutOfBudget,
    /// The per-call limit (the expression, JSON-quoted).
    #[error("no further validation rules will be run due to call cost exceeds limit for messageExpression: {0}")]
    CallLimit(Value),
}

/// The `messageExpression`'s string, trimmed; `Ok(None)` (fall back to the message) when
/// it fails, is not a string, is empty or has line breaks; `Err` with upstream's error
/// when its cost may not be paid (validation stops).
fn message_expression(
    r: &Rule,
    vars: &k8scel::Vars,
    shapes: &[(&str, Shape)],
    budget: &mut Budget,
) -> Result<Option<String>, MessageCostError> {
    if r.message_expression.is_empty() {
        return Ok(None);
    }
    let Ok(compiled) = k8scel::compile(&r.message_expression, &["self", "oldSelf"]) else {
        return Ok(None);
    };
    match budget.charge(k8scel::cost_of(&compiled.program, shapes)) {
        Err(Refusal::OutOfBudget) => return Err(MessageCostError::OutOfBudget),
        Err(Refusal::CallLimit) => {
            return Err(MessageCostError::CallLimit(serde_json::json!(
                r.message_expression
            )))
        }
        Ok(()) => {}
    }
    Ok(match k8scel::evaluate(&compiled.program, vars) {
        Ok(cel::Value::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n')).then(|| s.to_string())
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests;
