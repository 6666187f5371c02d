//! HorizontalPodAutoscaler (autoscaling/v2): `SetDefaults_HorizontalPodAutoscaler` (min
//! replicas, the CPU metric, behavior rules) and `ValidateHorizontalPodAutoscaler`.

use serde_json::{json, Value};

use super::default_field;
use k3rs_apimachinery::status::Cause;

const METRIC_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
const TARGET_TYPES: &[&str] = &["AverageValue", "Utilization", "Value"];

/// Fills the unset parts of one behavior direction with the direction's defaults.
fn scaling_rules(rules: &mut Value, defaults: Value) {
    if !rules.is_object() {
        *rules = defaults;
        return;
    }
    for (k, v) in defaults.as_object().into_iter().flatten() {
        default_field(rules, k, v.clone());
    }
}

/// autoscaling/v1's `SetDefaults_HorizontalPodAutoscaler`: only the minimum.
pub fn hpa_v1_defaults(hpa: &mut Value) {
    if let Some(spec) = hpa.get_mut("spec").filter(|s| s.is_object()) {
        default_field(spec, "minReplicas", json!(1));
    }
}

pub fn hpa_defaults(hpa: &mut Value) {
    let Some(spec) = hpa.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "minReplicas", json!(1));
    if spec["metrics"].as_array().is_none_or(|m| m.is_empty()) {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    if let Some(b) = spec.get_mut("behavior").filter(|b| b.is_object()) {
        scaling_rules(
            &mut b["scaleUp"],
            json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        );
        scaling_rules(
            &mut b["scaleDown"],
            json!({"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        );
    }
}

fn metric_target(target: &Value, path: &str, causes: &mut Vec<Cause>) {
    match target["type"].as_str().unwrap_or("") {
        "" => causes.push(Cause::required(
            format!("{path}.type"),
            "must specify a metric target type",
        )),
        "Utilization" => match target["averageUtilization"].as_i64() {
            None => causes.push(Cause::required(
                format!("{path}.averageUtilization"),
                "must set either a target raw value or a target utilization",
            )),
            Some(n) if n <= 0 => causes.push(Cause::invalid_value(
                format!("{path}.averageUtilization"),
                json!(n),
                "must be greater than 0",
            )),
            Some(_) => {}
        },
        "Value" | "AverageValue" => {
            let key = if target["type"] == "Value" {
                "value"
            } else {
                "averageValue"
            };
            if target[key].is_null() {
                causes.push(Cause::required(
                    format!("{path}.{key}"),
                    "must set either a target raw value or a target utilization",
                ));
            }
        }
        other => causes.push(Cause::not_supported(
            format!("{path}.type"),
            other,
            TARGET_TYPES,
        )),
    }
}

pub fn validate_hpa(hpa: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &hpa["spec"];
    let min = spec["minReplicas"].as_i64();
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    if let Some(m) = min.filter(|m| *m < 1) {
        causes.push(Cause::invalid_value(
            "spec.minReplicas",
            json!(m),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        causes.push(Cause::invalid_value(
            "spec.maxReplicas",
            json!(max),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|m| max < m) {
        causes.push(Cause::invalid_value(
            "spec.maxReplicas",
            json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = &spec["scaleTargetRef"];
    for f in ["kind", "name"] {
        if target[f].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("spec.scaleTargetRef.{f}"), ""));
        }
    }
    for (i, m) in spec["metrics"].as_array().into_iter().flatten().enumerate() {
        let at = format!("spec.metrics[{i}]");
        let ty = m["type"].as_str().unwrap_or("");
        if ty.is_empty() {
            causes.push(Cause::required(
                format!("{at}.type"),
                "must specify a metric source type",
            ));
            continue;
        }
        if !METRIC_TYPES.contains(&ty) {
            causes.push(Cause::not_supported(format!("{at}.type"), ty, METRIC_TYPES));
            continue;
        }
        let source_key = match ty {
            "ContainerResource" => "containerResource",
            "External" => "external",
            "Object" => "object",
            "Pods" => "pods",
            _ => "resource",
        };
        let source = &m[source_key];
        if !source.is_object() {
            causes.push(Cause::required(
                format!("{at}.{source_key}"),
                "must populate information for the given metric source",
            ));
            continue;
        }
        if matches!(ty, "Resource" | "ContainerResource")
            && source["name"].as_str().is_none_or(str::is_empty)
        {
            causes.push(Cause::required(
                format!("{at}.{source_key}.name"),
                "must specify a resource name",
            ));
        }
        metric_target(
            &source["target"],
            &format!("{at}.{source_key}.target"),
            &mut causes,
        );
    }
    for dir in ["scaleUp", "scaleDown"] {
        let rules = &spec["behavior"][dir];
        if let Some(w) = rules["stabilizationWindowSeconds"].as_i64() {
            if !(0..=3600).contains(&w) {
                causes.push(Cause::invalid_value(
                    format!("spec.behavior.{dir}.stabilizationWindowSeconds"),
                    json!(w),
                    "must be less than or equal to 3600",
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa() -> Value {
        json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5}})
    }

    #[test]
    fn defaults_add_min_replicas_and_the_cpu_metric() {
        let mut h = hpa();
        hpa_defaults(&mut h);
        assert_eq!(h["spec"]["minReplicas"], 1);
        assert_eq!(
            h["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert!(h["spec"].get("behavior").is_none());
        assert!(validate_hpa(&h).is_empty(), "{:?}", validate_hpa(&h));
    }

    #[test]
    fn behavior_defaults_fill_each_direction() {
        let mut h = hpa();
        h["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}});
        hpa_defaults(&mut h);
        let b = &h["spec"]["behavior"];
        assert_eq!(b["scaleDown"]["stabilizationWindowSeconds"], 60);
        assert_eq!(b["scaleDown"]["selectPolicy"], "Max");
        assert_eq!(
            b["scaleDown"]["policies"],
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        );
        assert_eq!(b["scaleUp"]["stabilizationWindowSeconds"], 0);
        assert_eq!(
            b["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
    }

    #[test]
    fn validation_paths() {
        let mut h = json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "scaleTargetRef": {"kind": "Deployment"},
            "metrics": [{"type": "Resource"}]}});
        hpa_defaults(&mut h);
        let causes = validate_hpa(&h);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.maxReplicas",
                "spec.scaleTargetRef.name",
                "spec.metrics[0].resource"
            ]
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: 2: must be greater than or equal to `minReplicas`"
        );
    }
}
