//! PodDisruptionBudget (policy/v1): `ValidatePodDisruptionBudgetSpec` and the initial status.

use serde_json::{json, Value};

use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

/// What a new PDB's status is before the disruption controller looks at it.
pub fn initial_status() -> Value {
    json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0})
}

/// An int-or-percent budget: a non-negative integer or `N%` with N ≤ 100.
fn int_or_percent(v: &Value, path: &str, causes: &mut Vec<Cause>) {
    match v {
        Value::Null => {}
        Value::Number(n) => {
            if n.as_i64().is_some_and(|n| n < 0) {
                causes.push(Cause::invalid_value(path, v, "must be greater than or equal to 0"));
            }
        }
        Value::String(s) => match s.strip_suffix('%').map(str::parse::<u32>) {
            Some(Ok(p)) if p > 100 => {
                causes.push(Cause::invalid(path, s, "must not be greater than 100%"))
            }
            Some(Ok(_)) => {}
            _ => causes.push(Cause::invalid(
                path,
                s,
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            )),
        },
        other => causes.push(Cause::invalid_value(path, other, "must be an integer or percentage")),
    }
}

pub fn validate_pdb(pdb: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &pdb["spec"];
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        causes.push(Cause::invalid_value(
            "spec.minAvailable",
            &spec["minAvailable"],
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    int_or_percent(&spec["minAvailable"], "spec.minAvailable", &mut causes);
    int_or_percent(&spec["maxUnavailable"], "spec.maxUnavailable", &mut causes);
    if spec["selector"].is_object() {
        if let Err(e) = LabelSelector::from_object(&spec["selector"]) {
            causes.push(Cause::invalid_value(
                "spec.selector",
                &spec["selector"],
                &e.to_string(),
            ));
        }
    }
    if let Some(p) = spec["unhealthyPodEvictionPolicy"].as_str() {
        const POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];
        if !POLICIES.contains(&p) {
            causes.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                p,
                POLICIES,
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        let ok =
            json!({"spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "a"}}}});
        assert!(validate_pdb(&ok).is_empty());
        let both = json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}});
        assert_eq!(validate_pdb(&both)[0].field, "spec.minAvailable");
        assert_eq!(
            validate_pdb(&both)[0].message,
            "Invalid value: 1: minAvailable and maxUnavailable cannot be both set"
        );
        let bad =
            json!({"spec": {"maxUnavailable": "150%", "unhealthyPodEvictionPolicy": "Never"}});
        let fields: Vec<String> = validate_pdb(&bad).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            ["spec.maxUnavailable", "spec.unhealthyPodEvictionPolicy"]
        );
        let neg = json!({"spec": {"minAvailable": -1}});
        assert_eq!(
            validate_pdb(&neg)[0].message,
            "Invalid value: -1: must be greater than or equal to 0"
        );
    }
}
