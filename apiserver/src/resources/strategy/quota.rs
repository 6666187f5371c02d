//! ResourceQuota and LimitRange: `SetDefaults_LimitRangeItem` and the quantity checks of
//! `ValidateResourceQuota` / `ValidateLimitRange`.

use serde_json::{Map, Value};

use k3rs_apimachinery::quantity::{self, Quantity};
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::label_key_error;

const QUOTA_SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

fn quantity_text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// Every entry of a `ResourceList` at `path`: a qualified resource name and a non-negative
/// quantity. Returns the parsed values by name.
fn resource_list(
    list: &Value,
    path: &str,
    causes: &mut Vec<Cause>,
) -> Vec<(String, Quantity, String)> {
    let mut out = Vec::new();
    for (k, v) in list.as_object().into_iter().flatten() {
        let at = format!("{path}[{k}]");
        if let Some(e) = label_key_error(k) {
            causes.push(Cause::invalid(&at, k, &e));
        }
        let text = quantity_text(v);
        match Quantity::parse(&text) {
            None => causes.push(Cause::invalid(&at, &text, quantity::FORMAT_ERROR)),
            Some(n) if n.is_negative() => causes.push(Cause::invalid(
                &at,
                &text,
                "must be greater than or equal to 0",
            )),
            Some(n) => out.push((k.clone(), n, text)),
        }
    }
    out
}

pub fn validate_quota(rq: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    resource_list(&rq["spec"]["hard"], "spec.hard", &mut causes);
    for (i, s) in rq["spec"]["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let s = s.as_str().unwrap_or("");
        if !QUOTA_SCOPES.contains(&s) {
            causes.push(Cause::not_supported(
                format!("spec.scopes[{i}]"),
                s,
                QUOTA_SCOPES,
            ));
        }
    }
    resource_list(&rq["status"]["hard"], "status.hard", &mut causes);
    resource_list(&rq["status"]["used"], "status.used", &mut causes);
    causes
}

/// Container items: a missing default limit is the max; a missing default request is the
/// default limit, else the min.
pub fn limitrange_defaults(lr: &mut Value) {
    let Some(items) = lr["spec"]["limits"].as_array_mut() else {
        return;
    };
    for item in items {
        if item["type"] != "Container" {
            continue;
        }
        let mut default: Map<String, Value> =
            item["default"].as_object().cloned().unwrap_or_default();
        let mut request: Map<String, Value> = item["defaultRequest"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (k, v) in item["max"].as_object().into_iter().flatten() {
            default.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &default {
            request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in item["min"].as_object().into_iter().flatten() {
            request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if !default.is_empty() {
            item["default"] = Value::Object(default);
        }
        if !request.is_empty() {
            item["defaultRequest"] = Value::Object(request);
        }
    }
}

fn find<'a>(
    list: &'a [(String, Quantity, String)],
    k: &str,
) -> Option<&'a (String, Quantity, String)> {
    list.iter().find(|(name, _, _)| name == k)
}

pub fn validate_limitrange(lr: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen_types: Vec<String> = Vec::new();
    for (i, item) in lr["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.limits[{i}]");
        let ty = item["type"].as_str().unwrap_or("");
        if let Some(e) = label_key_error(ty) {
            causes.push(Cause::invalid(format!("{at}.type"), ty, &e));
        } else if seen_types.iter().any(|t| t == ty) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.type"),
                message: format!("Duplicate value: {}", serde_json::json!(ty)),
            });
        }
        seen_types.push(ty.to_string());
        let max = resource_list(&item["max"], &format!("{at}.max"), &mut causes);
        let min = resource_list(&item["min"], &format!("{at}.min"), &mut causes);
        let default = resource_list(&item["default"], &format!("{at}.default"), &mut causes);
        let request = resource_list(
            &item["defaultRequest"],
            &format!("{at}.defaultRequest"),
            &mut causes,
        );
        if ty == "Pod" {
            if !default.is_empty() {
                causes.push(Cause::forbidden(
                    format!("{at}.default"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
            if !request.is_empty() {
                causes.push(Cause::forbidden(
                    format!("{at}.defaultRequest"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
        let mut keys: Vec<&String> = max
            .iter()
            .chain(&min)
            .chain(&default)
            .chain(&request)
            .map(|(k, _, _)| k)
            .collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (mx, mn) = (find(&max, k), find(&min, k));
            let (df, rq) = (find(&default, k), find(&request, k));
            // (smaller, larger, field, show the larger?, message) as upstream orders them.
            let rules = [
                (
                    mn,
                    mx,
                    "min",
                    false,
                    "min value {a} is greater than max value {b}",
                ),
                (
                    mn,
                    rq,
                    "defaultRequest",
                    true,
                    "min value {a} is greater than default request value {b}",
                ),
                (
                    rq,
                    mx,
                    "defaultRequest",
                    false,
                    "default request value {a} is greater than max value {b}",
                ),
                (
                    rq,
                    df,
                    "defaultRequest",
                    false,
                    "default request value {a} is greater than default limit value {b}",
                ),
                (
                    mn,
                    df,
                    "default",
                    false,
                    "min value {a} is greater than default value {b}",
                ),
                (
                    df,
                    mx,
                    "default",
                    true,
                    "default value {a} is greater than max value {b}",
                ),
            ];
            for (a, b, field, show_b, msg) in rules {
                if let (Some(a), Some(b)) = (a, b) {
                    if a.1 > b.1 {
                        let shown = if show_b { &b.2 } else { &a.2 };
                        causes.push(Cause::invalid(
                            format!("{at}.{field}[{k}]"),
                            shown,
                            &msg.replace("{a}", &a.2).replace("{b}", &b.2),
                        ));
                    }
                }
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_limit_defaults() {
        let mut lr = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
            {"type": "Pod", "max": {"cpu": "4"}}]}});
        limitrange_defaults(&mut lr);
        let c = &lr["spec"]["limits"][0];
        assert_eq!(c["default"], json!({"cpu": "2"}));
        assert_eq!(c["defaultRequest"], json!({"cpu": "2", "memory": "64Mi"}));
        assert!(lr["spec"]["limits"][1].get("default").is_none());
        assert!(
            validate_limitrange(&lr).is_empty(),
            "{:?}",
            validate_limitrange(&lr)
        );
    }

    #[test]
    fn limit_order_is_checked() {
        let lr = json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}});
        let causes = validate_limitrange(&lr);
        assert_eq!(causes[0].field, "spec.limits[0].min[cpu]");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"2\": min value 2 is greater than max value 1"
        );
        let pod = json!({"spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}});
        assert_eq!(validate_limitrange(&pod)[0].field, "spec.limits[0].default");
    }

    #[test]
    fn quota_quantities() {
        assert!(
            validate_quota(&json!({"spec": {"hard": {"pods": "10", "requests.cpu": "1"}}}))
                .is_empty()
        );
        let causes = validate_quota(
            &json!({"spec": {"hard": {"pods": "-1", "cpu": "lots"}, "scopes": ["Old"]}}),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.hard[cpu]", "spec.hard[pods]", "spec.scopes[0]"]
        );
        assert_eq!(
            causes[1].message,
            "Invalid value: \"-1\": must be greater than or equal to 0"
        );
    }
}
