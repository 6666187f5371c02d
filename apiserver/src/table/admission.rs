//! Table rows of the admissionregistration kinds (`printValidatingAdmissionPolicy`,
//! `printValidatingAdmissionPolicyBinding`).

use serde_json::{json, Value};

use super::printers::{age as age_cell, name, str_of, Column, AGE, NAME};
use super::workloads::selector_string;

pub const VAP_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Validations",
        "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    Column::new(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

pub fn vap_cells(p: &Value, now: i64) -> Vec<Value> {
    let spec = &p["spec"];
    let param_kind = match spec["paramKind"].as_object() {
        Some(_) => format!(
            "{}/{}",
            str_of(&spec["paramKind"]["apiVersion"]),
            str_of(&spec["paramKind"]["kind"])
        ),
        None => "<unset>".into(),
    };
    let validations = spec["validations"].as_array().map_or(0, Vec::len);
    vec![
        name(p),
        json!(validations),
        json!(param_kind),
        age_cell(p, now),
    ]
}

pub const VAP_BINDING_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "PolicyName",
        "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    Column::new(
        "ParamRef",
        "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

/// The binding's parameter: `ns/name`, `*/name` when the namespace is left to the request,
/// the selector, or `<unset>`.
fn param_ref(pr: &Value) -> String {
    if !pr.is_object() {
        return "<unset>".into();
    }
    match (str_of(&pr["name"]), str_of(&pr["namespace"])) {
        ("", _) if pr["selector"].is_object() => selector_string(&pr["selector"]),
        ("", _) => "<unset>".into(),
        (n, "") => format!("*/{n}"),
        (n, ns) => format!("{ns}/{n}"),
    }
}

pub fn vap_binding_cells(b: &Value, now: i64) -> Vec<Value> {
    vec![
        name(b),
        json!(str_of(&b["spec"]["policyName"])),
        json!(param_ref(&b["spec"]["paramRef"])),
        age_cell(b, now),
    ]
}

pub const WEBHOOK_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];

pub fn webhook_cells(c: &Value, now: i64) -> Vec<Value> {
    let n = c["webhooks"].as_array().map_or(0, Vec::len);
    vec![name(c), json!(n), age_cell(c, now)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_rows() {
        let p = json!({"metadata": {"name": "p"}, "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "true"}, {"expression": "false"}]}});
        let c = vap_cells(&p, 0);
        assert_eq!((&c[1], &c[2]), (&json!(2), &json!("v1/ConfigMap")));
        let c = vap_cells(&json!({"metadata": {"name": "q"}, "spec": {}}), 0);
        assert_eq!((&c[1], &c[2]), (&json!(0), &json!("<unset>")));
    }

    #[test]
    fn binding_param_refs() {
        let cell = |pr: Value| {
            vap_binding_cells(&json!({"spec": {"policyName": "p", "paramRef": pr}}), 0)[2].clone()
        };
        assert_eq!(cell(Value::Null), json!("<unset>"));
        assert_eq!(cell(json!({"name": "limits"})), json!("*/limits"));
        assert_eq!(
            cell(json!({"name": "limits", "namespace": "ns"})),
            json!("ns/limits")
        );
        assert_eq!(
            cell(json!({"selector": {"matchLabels": {"app": "x"}}})),
            json!("app=x")
        );
    }
}
