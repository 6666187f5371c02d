//! `autoscaling/v1` HorizontalPodAutoscalers are the stored `autoscaling/v2` objects seen
//! through the older schema, as kube-apiserver converts them
//! (`pkg/apis/autoscaling/v1/conversion.go`): the CPU utilization target is
//! `targetCPUUtilizationPercentage`, and what v1 cannot express travels in annotations so
//! that a read-modify-write through v1 loses nothing.
//!
//! # Guarantees
//! - To v1: a `Resource` `cpu` metric with an `averageUtilization` target becomes
//!   `spec.targetCPUUtilizationPercentage` (the first one); every other metric goes, in v1's
//!   metric shape (`targetAverageUtilization`, `metricName`, …), into the
//!   `autoscaling.alpha.kubernetes.io/metrics` annotation; `status.currentMetrics` (all of
//!   them) into `…/current-metrics` with the CPU utilization also in
//!   `status.currentCPUUtilizationPercentage`; `status.conditions` into `…/conditions`;
//!   `spec.behavior` into `…/behavior` (with upstream's Go field names, `ScaleUp`, …).
//! - To v2: the reverse; the annotations are removed (and an annotation map left empty goes
//!   away); metrics are the annotation's, then the CPU target; with no metric at all the
//!   CPU target defaults to 80 % (v1's implicit default). A malformed annotation is ignored.
//! - `to_v2(to_v1(h)) == h` for a v2 object whose metrics list the CPU utilization metric
//!   last (the order v1 gives back).

use serde_json::{json, Map, Value};

use k3rs_apimachinery::catalog::Resource;

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// v1's implicit CPU utilization target.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Whether `r` is the autoscaling/v1 view of HorizontalPodAutoscalers.
pub fn is_v1(r: &Resource) -> bool {
    r.group == "autoscaling" && r.kind == "HorizontalPodAutoscaler" && r.version == "v1"
}

fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"]["target"]["averageUtilization"].is_i64()
}

/// Copies the fields of `from` named in `keys` (as (from, to) pairs) that are set.
fn copy(from: &Value, to: &mut Map<String, Value>, keys: &[(&str, &str)]) {
    for (src, dst) in keys {
        if let Some(v) = from.get(*src).filter(|v| !v.is_null()) {
            to.insert((*dst).to_string(), v.clone());
        }
    }
}

/// The source's key in a metric (both versions) for a metric type.
fn source_key(ty: &str) -> Option<&'static str> {
    Some(match ty {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return None,
    })
}

/// (dotted path in the v2 source, v1 field) of a metric's spec (`target`) or status
/// (`current`) fields, by source key.
fn fields(key: &str, spec: bool) -> &'static [(&'static str, &'static str)] {
    match (key, spec) {
        ("resource" | "containerResource", true) => &[
            ("name", "name"),
            ("container", "container"),
            ("target.averageUtilization", "targetAverageUtilization"),
            ("target.averageValue", "targetAverageValue"),
        ],
        ("resource" | "containerResource", false) => &[
            ("name", "name"),
            ("container", "container"),
            ("current.averageUtilization", "currentAverageUtilization"),
            ("current.averageValue", "currentAverageValue"),
        ],
        ("pods", true) => &[
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("target.averageValue", "targetAverageValue"),
        ],
        ("pods", false) => &[
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("current.averageValue", "currentAverageValue"),
        ],
        ("object", true) => &[
            ("describedObject", "target"),
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("target.value", "targetValue"),
            ("target.averageValue", "averageValue"),
        ],
        ("object", false) => &[
            ("describedObject", "target"),
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("current.value", "currentValue"),
            ("current.averageValue", "averageValue"),
        ],
        (_, true) => &[
            ("metric.name", "metricName"),
            ("metric.selector", "metricSelector"),
            ("target.value", "targetValue"),
            ("target.averageValue", "targetAverageValue"),
        ],
        (_, false) => &[
            ("metric.name", "metricName"),
            ("metric.selector", "metricSelector"),
            ("current.value", "currentValue"),
            ("current.averageValue", "currentAverageValue"),
        ],
    }
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// A v2 `MetricSpec`/`MetricStatus` (`spec` says which) → v1's (`v2beta1`-shaped) form.
fn metric_to_v1(m: &Value, spec: bool) -> Value {
    let ty = m["type"].as_str().unwrap_or("");
    let Some(key) = source_key(ty) else {
        return json!({ "type": ty });
    };
    let src = &m[key];
    let mut out = Map::new();
    for (path, name) in fields(key, spec) {
        let v = at(src, path);
        if !v.is_null() {
            out.insert((*name).to_string(), v.clone());
        }
    }
    json!({ "type": ty, key: out })
}

/// A v1 `MetricSpec`/`MetricStatus` → v2's; a spec's target gets the type its set fields
/// imply (utilization, else an average value, else a value; pods are always averages).
fn metric_to_v2(m: &Value, spec: bool) -> Value {
    let ty = m["type"].as_str().unwrap_or("");
    let Some(key) = source_key(ty) else {
        return json!({ "type": ty });
    };
    let src = &m[key];
    let mut out = json!({});
    if matches!(key, "pods" | "object" | "external") {
        out["metric"] = json!({});
    }
    out[if spec { "target" } else { "current" }] = json!({});
    for (path, name) in fields(key, spec) {
        if let Some(v) = src.get(*name).filter(|v| !v.is_null()) {
            let (parent, leaf) = path.rsplit_once('.').unwrap_or(("", path));
            let slot = if parent.is_empty() {
                &mut out
            } else {
                &mut out[parent]
            };
            slot[leaf] = v.clone();
        }
    }
    if spec {
        let target = &out["target"];
        let ty = if target["averageUtilization"].is_i64() {
            "Utilization"
        } else if !target["averageValue"].is_null()
            || matches!(key, "pods" | "resource" | "containerResource")
        {
            "AverageValue"
        } else {
            "Value"
        };
        out["target"]["type"] = json!(ty);
    }
    json!({ "type": ty, key: out })
}

/// (JSON name, upstream's internal Go field name) of the behavior annotation's fields.
const BEHAVIOR_NAMES: &[(&str, &str)] = &[
    ("scaleUp", "ScaleUp"),
    ("scaleDown", "ScaleDown"),
    ("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
    ("selectPolicy", "SelectPolicy"),
    ("policies", "Policies"),
    ("type", "Type"),
    ("value", "Value"),
    ("periodSeconds", "PeriodSeconds"),
];

/// Renames object keys through `BEHAVIOR_NAMES` (either way; matching case-insensitively
/// like Go's decoder); unknown keys are dropped.
fn rename_behavior(v: &Value, to_go: bool) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter_map(|(k, v)| {
                    BEHAVIOR_NAMES
                        .iter()
                        .find(|(json, _)| json.eq_ignore_ascii_case(k))
                        .map(|(json, go)| {
                            let name = if to_go { go } else { json };
                            (name.to_string(), rename_behavior(v, to_go))
                        })
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| rename_behavior(v, to_go)).collect()),
        other => other.clone(),
    }
}

fn set_annotation(meta: &mut Map<String, Value>, key: &str, value: &Value) {
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(key.into(), Value::from(value.to_string()));
    }
}

/// Status fields both versions have under the same name (besides the replica counts).
const SHARED_STATUS: [&str; 2] = ["observedGeneration", "lastScaleTime"];

/// The spec fields both versions share.
fn common_spec(spec: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let shared = ["scaleTargetRef", "minReplicas", "maxReplicas"];
    copy(spec, &mut out, &shared.map(|k| (k, k)));
    out
}

/// A stored autoscaling/v2 HorizontalPodAutoscaler as autoscaling/v1 serves it.
pub fn to_v1(v2: &Value) -> Value {
    let mut meta = v2["metadata"].as_object().cloned().unwrap_or_default();
    let spec = &v2["spec"];
    let mut out_spec = common_spec(spec);
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization(m)) {
        out_spec.insert(
            "targetCPUUtilizationPercentage".into(),
            cpu["resource"]["target"]["averageUtilization"].clone(),
        );
    }
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(|m| metric_to_v1(m, true))
        .collect();
    if !others.is_empty() {
        set_annotation(&mut meta, METRICS, &Value::Array(others));
    }
    if let Some(b) = spec.get("behavior").filter(|b| b.is_object()) {
        let mut go = rename_behavior(b, true);
        for dir in ["ScaleUp", "ScaleDown"] {
            go.as_object_mut()
                .map(|o| o.entry(dir).or_insert(Value::Null));
        }
        set_annotation(&mut meta, BEHAVIOR, &go);
    }
    let mut out = json!({
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
    });
    if let Some(status) = v2.get("status").filter(|s| s.is_object()) {
        let mut s = Map::new();
        copy(status, &mut s, &SHARED_STATUS.map(|k| (k, k)));
        for f in ["currentReplicas", "desiredReplicas"] {
            s.insert(f.into(), status.get(f).cloned().unwrap_or(json!(0)));
        }
        let current = status["currentMetrics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for m in &current {
            let u = &m["resource"]["current"]["averageUtilization"];
            if m["type"] == "Resource" && m["resource"]["name"] == "cpu" && u.is_i64() {
                s.insert("currentCPUUtilizationPercentage".into(), u.clone());
            }
        }
        if !current.is_empty() {
            let v1: Vec<Value> = current.iter().map(|m| metric_to_v1(m, false)).collect();
            set_annotation(&mut meta, CURRENT_METRICS, &Value::Array(v1));
        }
        if let Some(c) = status["conditions"].as_array().filter(|c| !c.is_empty()) {
            set_annotation(&mut meta, CONDITIONS, &Value::Array(c.clone()));
        }
        out["status"] = Value::Object(s);
    }
    out["metadata"] = Value::Object(meta);
    if spec.is_object() {
        out["spec"] = Value::Object(out_spec);
    }
    out
}

/// Removes the annotation `key` and parses it (`None` when absent or malformed).
fn take_annotation(meta: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let raw = meta.get_mut("annotations")?.as_object_mut()?.remove(key)?;
    serde_json::from_str(raw.as_str()?).ok()
}

/// An autoscaling/v1 HorizontalPodAutoscaler in its stored autoscaling/v2 form.
pub fn to_v2(v1: &Value) -> Value {
    let mut meta = v1["metadata"].as_object().cloned().unwrap_or_default();
    let others = take_annotation(&mut meta, METRICS);
    let current = take_annotation(&mut meta, CURRENT_METRICS);
    let conditions = take_annotation(&mut meta, CONDITIONS);
    let behavior = take_annotation(&mut meta, BEHAVIOR);
    if meta
        .get("annotations")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        meta.remove("annotations");
    }
    let spec = &v1["spec"];
    let mut out_spec = common_spec(spec);
    let mut metrics: Vec<Value> = others
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| metric_to_v2(m, true))
        .collect();
    let cpu = spec["targetCPUUtilizationPercentage"].as_i64();
    if cpu.is_some() || metrics.is_empty() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization",
                "averageUtilization": cpu.unwrap_or(DEFAULT_CPU_UTILIZATION)}}}));
    }
    out_spec.insert("metrics".into(), Value::Array(metrics));
    if let Some(b) = behavior.filter(Value::is_object) {
        let mut b = rename_behavior(&b, false);
        if let Some(o) = b.as_object_mut() {
            o.retain(|_, v| !v.is_null());
        }
        out_spec.insert("behavior".into(), b);
    }
    let mut out = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta,
    });
    if spec.is_object() {
        out["spec"] = Value::Object(out_spec);
    }
    if let Some(status) = v1.get("status").filter(|s| s.is_object()) {
        let mut s = Map::new();
        let shared = [SHARED_STATUS[0], SHARED_STATUS[1], "desiredReplicas"];
        copy(status, &mut s, &shared.map(|k| (k, k)));
        // v2's currentReplicas is omitted when zero.
        if let Some(n) = status["currentReplicas"].as_i64().filter(|n| *n != 0) {
            s.insert("currentReplicas".into(), json!(n));
        }
        let current = match current.as_ref().and_then(Value::as_array) {
            Some(c) => c.iter().map(|m| metric_to_v2(m, false)).collect(),
            None => match status["currentCPUUtilizationPercentage"].as_i64() {
                Some(u) => vec![json!({"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": u}}})],
                None => Vec::new(),
            },
        };
        if !current.is_empty() {
            s.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(c) = conditions.filter(Value::is_array) {
            s.insert("conditions".into(), c);
        }
        out["status"] = Value::Object(s);
    }
    out
}

#[cfg(test)]
mod tests;
