//! The checks a CRD's `x-kubernetes-validations` get when the CRD is created or updated
//! (apiextensions' `ValidateCustomResourceDefinitionOpenAPISchema`): rules are given and
//! compile, `messageExpression`s compile, `reason`s are known, `fieldPath`s name fields.

use serde_json::{json, Value};

use super::rule::{field_path, Rule, REASONS};
use k3rs_apimachinery::status::Cause;

/// Every problem of the rules of the schema node `s`, found at field path `at`
/// (`spec.versions[0].schema.openAPIV3Schema.properties[spec]`).
pub fn check(s: &Value, at: &str, out: &mut Vec<Cause>) {
    for (i, r) in Rule::all_of(s).iter().enumerate() {
        let rat = format!("{at}.x-kubernetes-validations[{i}]");
        if r.rule.trim().is_empty() {
            out.push(Cause::required(
                format!("{rat}.rule"),
                "rule is not specified",
            ));
        } else if let Err(e) = k3rs_cel::compile(&r.rule, &["self", "oldSelf"]) {
            out.push(Cause::invalid_value(
                format!("{rat}.rule"),
                go_value(r),
                &format!("compilation failed: {e}"),
            ));
        }
        if !r.message_expression.is_empty() {
            if let Err(e) = k3rs_cel::compile(&r.message_expression, &["self", "oldSelf"]) {
                out.push(Cause::invalid_value(
                    format!("{rat}.messageExpression"),
                    go_value(r),
                    &format!("messageExpression compilation failed: {e}"),
                ));
            }
        }
        if let Some(reason) = &r.reason {
            if !REASONS.contains(&reason.as_str()) {
                out.push(Cause::not_supported(
                    format!("{rat}.reason"),
                    reason,
                    REASONS,
                ));
            }
        }
        if !r.field_path.is_empty() {
            if let Err(e) = field_path(s, "", &r.field_path) {
                out.push(Cause::invalid(
                    format!("{rat}.fieldPath"),
                    &r.field_path,
                    &e.to_string(),
                ));
            }
        }
    }
}

/// The rule the way kube-apiserver prints it in these errors (Go's `%#v` of the internal
/// `apiextensions.ValidationRule`; pointers it can only show as addresses show as set).
fn go_value(r: &Rule) -> String {
    let reason = match &r.reason {
        Some(_) => "(*apiextensions.FieldValueErrorReason)(0x1)",
        None => "(*apiextensions.FieldValueErrorReason)(nil)",
    };
    let optional = if r.optional_old_self {
        "(*bool)(0x1)"
    } else {
        "(*bool)(nil)"
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        json!(r.rule),
        json!(r.message),
        json!(r.message_expression),
        json!(r.field_path),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(s: Value) -> Vec<String> {
        let mut out = Vec::new();
        check(&s, "s", &mut out);
        out.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn good_rules_pass() {
        let s = json!({"type": "object", "properties": {"a": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.a > 0 && self.all(k, k != 'b')", "messageExpression": "'a is ' + string(self.a)",
                 "reason": "FieldValueForbidden", "fieldPath": ".a"},
                {"rule": "self.a >= oldSelf.a"}]});
        assert_eq!(problems(s), Vec::<String>::new());
    }

    #[test]
    fn bad_rules_are_reported_at_upstream_paths() {
        let s = json!({"type": "object", "properties": {"a": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.a >"},
                {"rule": ""},
                {"rule": "self.a > 0", "reason": "Bad", "fieldPath": ".b", "messageExpression": "'x' +"},
                {"rule": "other > 1"}]});
        let got = problems(s);
        assert_eq!(got.len(), 6, "{got:#?}");
        assert!(got[0].starts_with(
            "s.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.a >\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"
        ), "{}", got[0]);
        assert_eq!(
            got[1],
            "s.x-kubernetes-validations[1].rule: Required value: rule is not specified"
        );
        assert!(got[2].starts_with("s.x-kubernetes-validations[2].messageExpression: Invalid value: apiextensions.ValidationRule{"), "{}", got[2]);
        assert!(got[2].contains("messageExpression compilation failed: ERROR: <input>:1:"));
        assert_eq!(got[3], "s.x-kubernetes-validations[2].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"");
        assert_eq!(got[4], "s.x-kubernetes-validations[2].fieldPath: Invalid value: \".b\": does not refer to a valid field");
        assert!(got[5].ends_with("compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')"), "{}", got[5]);
    }
}
