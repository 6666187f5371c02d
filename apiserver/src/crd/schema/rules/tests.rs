use serde_json::{json, Value};

use super::*;

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.maxReplicas", "message": "must be <= maxReplicas", "fieldPath": ".replicas"},
                {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"}],
            "properties": {
                "replicas": {"type": "integer",
                    "x-kubernetes-validations": [{"rule": "self >= 0", "reason": "FieldValueForbidden", "messageExpression": "'got ' + string(self)"}]},
                "maxReplicas": {"type": "integer"},
                "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.lowerAscii() == self"}]},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                        "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}}}})
}

fn errors(obj: Value, old: Option<Value>) -> Vec<String> {
    validate(&schema(), &obj, old.as_ref())
        .into_iter()
        .map(|c| format!("{}|{}|{}", c.reason, c.field, c.message))
        .collect()
}

#[test]
fn failures_read_as_upstream() {
    let got = errors(
        json!({"spec": {"replicas": -1, "maxReplicas": -2, "name": "Ab"}}),
        None,
    );
    assert_eq!(
        got,
        [
            "FieldValueInvalid|spec.replicas|Invalid value: \"object\": must be <= maxReplicas",
            "FieldValueInvalid|spec.name|Invalid value: \"string\": failed rule: self.lowerAscii() == self",
            "FieldValueForbidden|spec.replicas|Forbidden: got -1",
        ]
    );
    assert!(errors(
        json!({"spec": {"replicas": 1, "maxReplicas": 2, "name": "a"}}),
        None
    )
    .is_empty());
}

#[test]
fn transition_rules_need_a_correlated_old_value() {
    let old =
        json!({"spec": {"replicas": 3, "maxReplicas": 5, "ports": [{"name": "a", "port": 1}]}});
    let new = json!({"spec": {"replicas": 2, "maxReplicas": 5,
        "ports": [{"name": "b", "port": 2}, {"name": "a", "port": 9}]}});
    assert_eq!(
        errors(new.clone(), Some(old)),
        [
            "FieldValueInvalid|spec|Invalid value: \"object\": replicas may not decrease",
            "FieldValueInvalid|spec.ports[1]|Invalid value: \"object\": port is immutable",
        ]
    );
    assert!(errors(new, None).is_empty());
}

#[test]
fn unchanged_values_ratchet_and_runtime_errors_are_reported() {
    let bad = json!({"spec": {"replicas": 1, "maxReplicas": 5, "name": "Ab"}});
    assert!(errors(bad.clone(), Some(bad)).is_empty());
    let got = errors(json!({"spec": {"replicas": 1}}), None);
    assert_eq!(
        got,
        ["FieldValueInvalid|spec|Invalid value: \"object\": no such key: maxReplicas evaluating rule: must be <= maxReplicas"]
    );
}

#[test]
fn schemas_without_rules_cost_nothing() {
    assert!(!has_rules(
        &json!({"type": "object", "properties": {"a": {"type": "string"}}})
    ));
    assert!(has_rules(&schema()));
}

fn tags_schema(rules: usize) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "maxItems": 600, "items": {"type": "string", "maxLength": 15},
            "x-kubernetes-validations": vec![json!({"rule": "self.all(x, self.exists(y, x == y))"}); rules]}}}}})
}

fn tags(n: usize) -> Value {
    let tags: Vec<String> = (0..n).map(|i| format!("tag-{i:011}")).collect();
    json!({"spec": {"tags": tags}})
}

fn messages(schema: &Value, obj: &Value) -> Vec<String> {
    validate(schema, obj, None)
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[test]
fn a_rule_too_dear_for_the_object_is_not_run() {
    assert!(messages(&tags_schema(1), &tags(20)).is_empty());
    assert_eq!(
        messages(&tags_schema(2), &tags(600)),
        ["spec.tags: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.exists(y, x == y))"]
    );
}

#[test]
fn the_rules_of_one_object_share_one_budget() {
    assert!(messages(&tags_schema(20), &tags(30)).is_empty());
    assert_eq!(
        messages(&tags_schema(20), &tags(250)),
        ["spec.tags: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"]
    );
}
