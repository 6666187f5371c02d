//! ReplicationController (`SetDefaults_ReplicationController`,
//! `ValidateReplicationControllerSpec`) and PodTemplate (`ValidatePodTemplate`).

use serde_json::{json, Value};

use super::default_field;
use super::pod::default_pod_spec;
use super::workload::{non_negative, pod_template, string_map};
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

/// The selector and the controller's labels default to the template's labels.
pub fn rc_defaults(rc: &mut Value) {
    let Some(spec) = rc.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "replicas", json!(1));
    if let Some(ps) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(ps);
    }
    let labels = rc["spec"]["template"]["metadata"]["labels"].clone();
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        if string_map(&rc["spec"]["selector"]).is_empty() {
            rc["spec"]["selector"] = labels.clone();
        }
        if string_map(&rc["metadata"]["labels"]).is_empty() {
            rc["metadata"]["labels"] = labels;
        }
    }
}

pub fn validate_rc(rc: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &rc["spec"];
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", &mut causes);
    let selector = string_map(&spec["selector"]);
    if selector.is_empty() {
        causes.push(Cause::required("spec.selector", ""));
    }
    non_negative(spec, "replicas", "spec.replicas", &mut causes);
    let sel = LabelSelector::from_object(&json!({ "matchLabels": selector }))
        .ok()
        .filter(|s| !s.is_empty());
    pod_template(
        &spec["template"],
        "spec.template",
        sel.as_ref(),
        &["Always"],
        &mut causes,
    );
    causes
}

pub fn podtemplate_defaults(pt: &mut Value) {
    if let Some(ps) = pt.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(ps);
    }
}

pub fn validate_podtemplate(pt: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    pod_template(
        &pt["template"],
        "template",
        None,
        &["Always", "OnFailure", "Never"],
        &mut causes,
    );
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_selector_and_labels_come_from_the_template() {
        let mut rc = json!({"metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        rc_defaults(&mut rc);
        assert_eq!(rc["spec"]["replicas"], 1);
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(rc["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(validate_rc(&rc).is_empty(), "{:?}", validate_rc(&rc));
    }

    #[test]
    fn rc_validation_paths() {
        let rc = json!({"spec": {"replicas": -1, "selector": {"app": "x"}, "template": {"metadata": {"labels": {"app": "a"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "nginx"}]}}}});
        let fields: Vec<String> = validate_rc(&rc).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "spec.replicas",
                "spec.template.metadata.labels",
                "spec.template.spec.restartPolicy"
            ]
        );
        assert_eq!(validate_rc(&json!({"spec": {}}))[0].field, "spec.selector");
    }

    #[test]
    fn pod_template_paths() {
        let mut pt = json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}});
        podtemplate_defaults(&mut pt);
        assert_eq!(pt["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(validate_podtemplate(&pt).is_empty());
        let bad = json!({"template": {"spec": {"containers": [{"name": "c"}]}}});
        assert_eq!(
            validate_podtemplate(&bad)[0].field,
            "template.spec.containers[0].image"
        );
    }
}
