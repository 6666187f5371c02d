//! One `x-kubernetes-validations` entry (apiextensions v1 `ValidationRule`) and how its
//! failure reads: the message (or `failed rule: <rule>`), the field error type its `reason`
//! picks, and the field path its `fieldPath` adds.

use serde_json::{json, Value};

use k3rs_apimachinery::status::Cause;

/// The reasons a rule may give.
pub const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A validation rule as written in the schema.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub rule: String,
    pub message: String,
    pub message_expression: String,
    pub reason: Option<String>,
    pub field_path: String,
    pub optional_old_self: bool,
}

impl Rule {
    pub fn from_json(v: &Value) -> Rule {
        let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
        Rule {
            rule: s("rule"),
            message: s("message"),
            message_expression: s("messageExpression"),
            reason: v["reason"].as_str().map(str::to_string),
            field_path: s("fieldPath"),
            optional_old_self: v["optionalOldSelf"] == true,
        }
    }

    /// The rules of a schema node.
    pub fn all_of(schema: &Value) -> Vec<Rule> {
        schema["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Rule::from_json)
            .collect()
    }

    /// How errors name the rule: its message, else its expression.
    pub fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }

    /// The detail when no `messageExpression` gives one.
    pub fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }

    /// The error of a rule that evaluated to false at `field`, a value of schema type `typ`.
    pub fn failure(&self, field: String, typ: &str, detail: &str) -> Cause {
        match self.reason.as_deref() {
            Some("FieldValueForbidden") => Cause::forbidden(field, detail),
            Some("FieldValueRequired") => Cause::required(field, detail),
            Some("FieldValueDuplicate") => Cause::duplicate(field, typ),
            _ => invalid(field, typ, detail),
        }
    }
}

/// `field: Invalid value: "<type>": detail`.
pub fn invalid(field: String, typ: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {}: {detail}", json!(typ)),
    }
}

/// Why a rule's `fieldPath` is refused (upstream's reasons).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    /// A `['` without its `']`, or a `.` with no name after it.
    #[error("unexpected end of JSON path")]
    UnexpectedEnd,
    /// A step that starts with neither `[` nor `.` (the token found).
    #[error("expected [ or . but got: {0}")]
    Unexpected(String),
    /// A name the schema has no field for.
    #[error("does not refer to a valid field")]
    NoSuchField,
}

/// A rule's `fieldPath` (`.spec.x`, `.m['key']`) appended to `at`, field by field as the
/// schema names them (properties as `.x`, map keys as `[x]`); `Err` with upstream's reason
/// when the path is malformed or names no field of `schema`.
pub fn field_path(schema: &Value, at: &str, path: &str) -> Result<String, FieldPathError> {
    let mut out = at.to_string();
    let mut s = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let name = if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']").ok_or(FieldPathError::UnexpectedEnd)?;
            rest = &r[end + 2..];
            r[..end].to_string()
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(FieldPathError::UnexpectedEnd);
            }
            rest = &r[end..];
            r[..end].to_string()
        } else {
            let tok: String = rest
                .chars()
                .take_while(|c| !matches!(c, '.' | '['))
                .collect();
            return Err(FieldPathError::Unexpected(tok));
        };
        if let Some(p) = s["properties"].get(&name) {
            out = super::child(&out, &name);
            s = p;
        } else if s.get("properties").is_none() {
            match s.get("additionalProperties").filter(|a| a.is_object()) {
                Some(a) => {
                    out = format!("{out}[{name}]");
                    s = a;
                }
                None => return Err(FieldPathError::NoSuchField),
            }
        } else {
            return Err(FieldPathError::NoSuchField);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn messages_and_reasons_read_as_upstream() {
        let r = rule(json!({"rule": " self > 1 "}));
        assert_eq!(r.message_or_default(), "failed rule: self > 1");
        let c = r.failure("spec.x".into(), "integer", &r.message_or_default());
        assert_eq!(
            (c.reason, c.field.as_str(), c.message.as_str()),
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: \"integer\": failed rule: self > 1"
            )
        );
        let r = rule(json!({"rule": "x", "message": "no ", "reason": "FieldValueForbidden"}));
        assert_eq!(
            r.failure("a".into(), "object", "no").message,
            "Forbidden: no"
        );
        let r = rule(json!({"rule": "x", "reason": "FieldValueRequired"}));
        assert_eq!(
            r.failure("a".into(), "object", "m").message,
            "Required value: m"
        );
        let r = rule(json!({"rule": "x", "reason": "FieldValueDuplicate"}));
        assert_eq!(
            r.failure("a".into(), "string", "m").message,
            "Duplicate value: \"string\""
        );
    }

    #[test]
    fn field_paths_follow_the_schema() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"c": {"type": "string"}}}}}});
        assert_eq!(field_path(&s, "spec", ".a.b"), Ok("spec.a.b".into()));
        assert_eq!(
            field_path(&s, "spec", ".m['k.1'].c"),
            Ok("spec.m[k.1].c".into())
        );
        assert_eq!(field_path(&s, "", "['a']"), Ok("a".into()));
        assert_eq!(
            field_path(&s, "spec", ".x").map_err(|e| e.to_string()),
            Err("does not refer to a valid field".into())
        );
        assert_eq!(
            field_path(&s, "spec", "a").map_err(|e| e.to_string()),
            Err("expected [ or . but got: a".into())
        );
    }
}
