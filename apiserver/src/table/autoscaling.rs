//! HorizontalPodAutoscalers as `kubectl get hpa` shows them (kube's
//! `printHorizontalPodAutoscaler` and `formatHPAMetrics`).

use serde_json::{json, Value};

use crate::resources::hpa_convert;

use super::printers::{age, int_of, name, str_of, Column, AGE, NAME};

pub const HPA_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Reference",
        "string",
        "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
    ),
    Column::new(
        "Targets",
        "string",
        "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
    ),
    Column::new(
        "MinPods",
        "string",
        "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
    ),
    Column::new(
        "MaxPods",
        "string",
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
    ),
    Column::new(
        "Replicas",
        "string",
        "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
    ),
    AGE,
];

/// A quantity or `<unknown>`.
fn known(v: &Value) -> String {
    match v {
        Value::Null => "<unknown>".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `current/target` of one metric (with the resource name for resource metrics).
fn one_metric(spec: &Value, status: &Value) -> String {
    let value_or_avg = |src: &str| {
        let target = &spec[src]["target"];
        let current = &status[src]["current"];
        if target["averageValue"].is_null() {
            format!("{}/{}", known(&current["value"]), known(&target["value"]))
        } else {
            format!(
                "{}/{} (avg)",
                known(&current["averageValue"]),
                known(&target["averageValue"])
            )
        }
    };
    let resource = |src: &str| {
        let target = &spec[src]["target"];
        let current = &status[src]["current"];
        let res = str_of(&spec[src]["name"]);
        if !target["averageValue"].is_null() {
            return format!(
                "{res}: {}/{}",
                known(&current["averageValue"]),
                known(&target["averageValue"])
            );
        }
        let pct = |v: &Value| v.as_i64().map(|n| format!("{n}%"));
        let cur = pct(&current["averageUtilization"]).unwrap_or_else(|| "<unknown>".into());
        let tgt = pct(&target["averageUtilization"]).unwrap_or_else(|| "<auto>".into());
        format!("{res}: {cur}/{tgt}")
    };
    match str_of(&spec["type"]) {
        "External" => value_or_avg("external"),
        "Object" => value_or_avg("object"),
        "Pods" => format!(
            "{}/{}",
            known(&status["pods"]["current"]["averageValue"]),
            known(&spec["pods"]["target"]["averageValue"])
        ),
        "Resource" => resource("resource"),
        "ContainerResource" => resource("containerResource"),
        _ => "<unknown type>".to_string(),
    }
}

/// At most two metrics, then `+ N more...`; `<none>` without metrics.
pub fn format_metrics(specs: &Value, statuses: &Value) -> String {
    let specs = specs.as_array().cloned().unwrap_or_default();
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| one_metric(s, &statuses[i]))
        .collect();
    if list.len() > 2 {
        format!("{} + {} more...", list[..2].join(", "), list.len() - 2)
    } else {
        list.join(", ")
    }
}

pub fn hpa_cells(hpa: &Value, now: i64) -> Vec<Value> {
    if hpa["apiVersion"] == "autoscaling/v1" {
        return hpa_cells(&hpa_convert::to_v2(hpa), now);
    }
    let spec = &hpa["spec"];
    let reference = format!(
        "{}/{}",
        str_of(&spec["scaleTargetRef"]["kind"]),
        str_of(&spec["scaleTargetRef"]["name"])
    );
    let min = match spec["minReplicas"].as_i64() {
        Some(n) => n.to_string(),
        None => "<unset>".to_string(),
    };
    vec![
        name(hpa),
        json!(reference),
        json!(format_metrics(
            &spec["metrics"],
            &hpa["status"]["currentMetrics"]
        )),
        json!(min),
        json!(int_of(&spec["maxReplicas"])),
        json!(int_of(&hpa["status"]["currentReplicas"])),
        age(hpa, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_target_before_and_after_measurement() {
        let hpa = json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]}});
        let cells = hpa_cells(&hpa, 0);
        assert_eq!(cells[1], "Deployment/web");
        assert_eq!(cells[2], "cpu: <unknown>/80%");
        assert_eq!(cells[3], "1");
        assert_eq!(cells[4], 5);
        assert_eq!(cells[5], 0);
        let status = json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]);
        assert_eq!(
            format_metrics(&hpa["spec"]["metrics"], &status),
            "cpu: 12%/80%"
        );
    }

    #[test]
    fn many_metrics_are_summarised() {
        let m = json!({"type": "Pods", "pods": {"target": {"averageValue": "1k"}}});
        assert_eq!(
            format_metrics(&json!([m, m, m]), &Value::Null),
            "<unknown>/1k, <unknown>/1k + 1 more..."
        );
        assert_eq!(format_metrics(&json!([]), &Value::Null), "<none>");
    }
}
