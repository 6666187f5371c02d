//! Deployment and ReplicaSet defaulting and the selector/template checks.

use serde_json::{json, Value};

use super::default_field;
use super::pod::{default_pod_spec, validate_spec};
use super::workload::string_map;
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

fn template_defaults(obj: &mut Value) {
    if let Some(spec) = obj
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("spec"))
    {
        default_pod_spec(spec);
    }
}

pub fn deployment_defaults(d: &mut Value) {
    if let Some(spec) = d.get_mut("spec").filter(|s| s.is_object()) {
        default_field(spec, "replicas", json!(1));
        default_field(spec, "revisionHistoryLimit", json!(10));
        default_field(spec, "progressDeadlineSeconds", json!(600));
        // Field by field, as upstream's SetDefaults_Deployment: `kubectl create deployment`
        // sends `strategy: {}`.
        default_field(spec, "strategy", json!({}));
        let strategy = &mut spec["strategy"];
        default_field(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            default_field(strategy, "rollingUpdate", json!({}));
            let rolling = &mut strategy["rollingUpdate"];
            default_field(rolling, "maxUnavailable", json!("25%"));
            default_field(rolling, "maxSurge", json!("25%"));
        }
    }
    template_defaults(d);
}

pub fn replicaset_defaults(rs: &mut Value) {
    if let Some(spec) = rs.get_mut("spec").filter(|s| s.is_object()) {
        default_field(spec, "replicas", json!(1));
    }
    template_defaults(rs);
}

/// A selector, template labels it matches, a valid pod template, non-negative replicas.
pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    let match_labels = string_map(&selector["matchLabels"]);
    let has_expressions = selector["matchExpressions"]
        .as_array()
        .is_some_and(|e| !e.is_empty());
    if match_labels.is_empty() && !has_expressions {
        causes.push(Cause::required("spec.selector", ""));
    }
    let template_labels = string_map(&spec["template"]["metadata"]["labels"]);
    let sel = LabelSelector::parse(
        &match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    if !match_labels.is_empty() && !sel.is_ok_and(|s| s.matches(&template_labels)) {
        causes.push(Cause::invalid_value(
            "spec.template.metadata.labels",
            super::workload::go_string_map(&template_labels),
            "`selector` does not match template `labels`",
        ));
    }
    if let Some(r) = spec["replicas"].as_i64() {
        if r < 0 {
            causes.push(Cause::invalid(
                "spec.replicas",
                &r.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    causes.extend(validate_spec(
        &spec["template"]["spec"],
        "spec.template.spec",
    ));
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(sel: Value, labels: Value) -> Value {
        json!({"spec": {"selector": {"matchLabels": sel}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    #[test]
    fn defaults_and_valid() {
        let mut d = deploy(json!({"app": "a"}), json!({"app": "a"}));
        deployment_defaults(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(validate(&d).is_empty(), "{:?}", validate(&d));
    }

    #[test]
    fn an_empty_or_partial_strategy_is_filled_in() {
        for (given, want) in [
            (
                json!({}),
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            ),
            (
                json!({"rollingUpdate": {"maxSurge": 2}}),
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}}),
            ),
            (json!({"type": "Recreate"}), json!({"type": "Recreate"})),
        ] {
            let mut d = deploy(json!({"app": "a"}), json!({"app": "a"}));
            d["spec"]["strategy"] = given;
            deployment_defaults(&mut d);
            assert_eq!(d["spec"]["strategy"], want);
        }
    }

    #[test]
    fn selector_must_match_template() {
        let d = deploy(json!({"app": "a"}), json!({"app": "b"}));
        assert_eq!(validate(&d)[0].field, "spec.template.metadata.labels");
        let d = deploy(json!({}), json!({"app": "b"}));
        assert_eq!(validate(&d)[0].field, "spec.selector");
    }
}
