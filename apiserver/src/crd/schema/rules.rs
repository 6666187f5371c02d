//! `x-kubernetes-validations` on a custom resource (apiextensions' `schema/cel` validator):
//! every rule of every schema node whose value is present and not null is evaluated with
//! `self` (and `oldSelf`, the correlated old value, on updates), after defaulting and
//! pruning. Transition rules (those using `oldSelf`) only run when an old value correlates
//! (same property, same map key, same list-map key), unless `optionalOldSelf`.

use serde_json::Value;

use super::rule::{self, Rule};
use super::{child, field_schema, index};
use k3rs_apimachinery::status::Cause;
use k3rs_cel::{self as k8scel, Var};

/// The message when a batch of rules ran out of time.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

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
/// evaluated within [`k3rs_cel::eval::BUDGET`].
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !has_rules(schema) {
        return Vec::new();
    }
    let (schema, obj, old) = (schema.clone(), obj.clone(), old.cloned());
    k8scel::bounded(move || validate_now(&schema, &obj, old.as_ref()))
        .unwrap_or_else(|| vec![rule::invalid(String::new(), "object", OUT_OF_BUDGET)])
}

/// [`validate`] on the calling thread, without the time bound.
pub fn validate_now(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(schema, obj, old, "", &mut out);
    out
}

fn walk(schema: &Value, v: &Value, old: Option<&Value>, at: &str, out: &mut Vec<Cause>) {
    if v.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    node(schema, v, old, at, out);
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
                walk(sub, x, old.and_then(|o| o.get(k)), &at, out);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                return;
            };
            let olds = old.and_then(Value::as_array);
            for (i, x) in items.iter().enumerate() {
                let o = olds.and_then(|olds| correlated(schema, x, olds));
                walk(item_schema, x, o, &index(at, i), out);
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

fn node(schema: &Value, v: &Value, old: Option<&Value>, at: &str, out: &mut Vec<Cause>) {
    let rules = Rule::all_of(schema);
    if rules.is_empty() {
        return;
    }
    let typ = schema["type"].as_str().unwrap_or("");
    let this = k8scel::value::to_cel(v, Some(schema));
    let previous = old.map(|o| k8scel::value::to_cel(o, Some(schema)));
    for r in &rules {
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
        match k8scel::evaluate(&compiled.program, &vars) {
            Ok(cel::Value::Bool(true)) => {}
            _ if unchanged => {}
            Ok(cel::Value::Bool(false)) => out.push(failure(schema, r, &vars, at, typ)),
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

fn failure(schema: &Value, r: &Rule, vars: &k8scel::Vars, at: &str, typ: &str) -> Cause {
    let field = if r.field_path.is_empty() {
        at.to_string()
    } else {
        rule::field_path(schema, at, &r.field_path).unwrap_or_else(|_| at.to_string())
    };
    let detail = message_expression(r, vars).unwrap_or_else(|| r.message_or_default());
    r.failure(field, typ, &detail)
}

/// The `messageExpression`'s string, trimmed; `None` (fall back to the message) when it
/// fails, is not a string, is empty or has line breaks.
fn message_expression(r: &Rule, vars: &k8scel::Vars) -> Option<String> {
    if r.message_expression.is_empty() {
        return None;
    }
    let compiled = k8scel::compile(&r.message_expression, &["self", "oldSelf"]).ok()?;
    match k8scel::evaluate(&compiled.program, vars) {
        Ok(cel::Value::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n')).then(|| s.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
