//! Checks shared by the controllers of pods (ReplicaSet, Deployment, StatefulSet, DaemonSet,
//! ReplicationController, Job, CronJob): the label selector, the pod template it must select,
//! and non-negative counts. Field paths are passed in, as upstream's `fldPath`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::pod::validate_spec;
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

/// A `map[string]string` field (non-strings read as "").
pub fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A `map[string]string` as Go's `%#v` prints it in kube's field errors.
pub fn go_string_map(m: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}:{}", json!(k), json!(v)))
        .collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

/// `<path>` holding a `metav1.LabelSelector`: required, not empty (`empty selector is invalid
/// for <what>`), parseable. The parsed selector when it is usable.
pub fn label_selector(
    sel: &Value,
    path: &str,
    what: &str,
    causes: &mut Vec<Cause>,
) -> Option<LabelSelector> {
    if !sel.is_object() {
        causes.push(Cause::required(path, ""));
        return None;
    }
    let parsed = match LabelSelector::from_object(sel) {
        Ok(s) => s,
        Err(e) => {
            causes.push(Cause::invalid_value(path, sel, &e.to_string()));
            return None;
        }
    };
    if parsed.is_empty() {
        causes.push(Cause::invalid_value(
            path,
            sel,
            &format!("empty selector is invalid for {what}"),
        ));
        return None;
    }
    Some(parsed)
}

/// A pod template at `path` (`spec.template`): its labels must be selected by `selector`, its
/// pod spec must be valid and use one of the `restart` policies.
pub fn pod_template(
    template: &Value,
    path: &str,
    selector: Option<&LabelSelector>,
    restart: &[&str],
    causes: &mut Vec<Cause>,
) {
    if !template.is_object() {
        causes.push(Cause::required(path, ""));
        return;
    }
    let labels = string_map(&template["metadata"]["labels"]);
    if selector.is_some_and(|s| !s.matches(&labels)) {
        causes.push(Cause::invalid_value(
            format!("{path}.metadata.labels"),
            go_string_map(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    let spec = &template["spec"];
    causes.extend(validate_spec(spec, &format!("{path}.spec")));
    let policy = spec["restartPolicy"].as_str().unwrap_or("");
    if !restart.contains(&policy) {
        if policy.is_empty() {
            causes.push(Cause::required(
                format!("{path}.spec.restartPolicy"),
                &format!(
                    "valid values: {}",
                    restart
                        .iter()
                        .map(|r| json!(r).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        } else {
            causes.push(Cause::not_supported(
                format!("{path}.spec.restartPolicy"),
                policy,
                restart,
            ));
        }
    }
}

/// `field` of `obj`, when set, must be `>= 0` (`ValidateNonnegativeField`).
pub fn non_negative(obj: &Value, key: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = obj[key].as_i64().filter(|n| *n < 0) {
        causes.push(Cause::invalid_value(
            path,
            json!(n),
            "must be greater than or equal to 0",
        ));
    }
}

/// Where a kind keeps the object metadata of its templates, as `(JSON pointer, field path)`:
/// upstream's `ValidatePodTemplateSpec` checks their labels and annotations like an object's
/// (a Job named past 63 characters is refused because its pods' `job-name` label would be).
fn template_metadata(group: &str, kind: &str) -> &'static [(&'static str, &'static str)] {
    match (group, kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("", "ReplicationController")
        | ("batch", "Job") => &[("/spec/template/metadata", "spec.template.metadata")],
        ("", "PodTemplate") => &[("/template/metadata", "template.metadata")],
        ("batch", "CronJob") => &[
            ("/spec/jobTemplate/metadata", "spec.jobTemplate.metadata"),
            (
                "/spec/jobTemplate/spec/template/metadata",
                "spec.jobTemplate.spec.template.metadata",
            ),
        ],
        _ => &[],
    }
}

/// Labels and annotations of the templates of `obj`, a `group`/`kind` object.
pub fn validate_template_metadata(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    template_metadata(group, kind)
        .iter()
        .filter_map(|(pointer, at)| Some((obj.pointer(pointer)?, at)))
        .flat_map(|(meta, at)| {
            k3rs_apimachinery::validation::validate_meta_labels_and_annotations(meta, at)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(labels: Value, restart: &str) -> Value {
        json!({"metadata": {"labels": labels},
               "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn selector_must_select_the_template() {
        let mut causes = Vec::new();
        let sel = label_selector(
            &json!({"matchLabels": {"app": "a"}}),
            "spec.selector",
            "x",
            &mut causes,
        );
        pod_template(
            &template(json!({"app": "b"}), "Always"),
            "spec.template",
            sel.as_ref(),
            &["Always"],
            &mut causes,
        );
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        assert_eq!(
            causes[0].message,
            "Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
        );
    }

    #[test]
    fn empty_missing_and_bad_selectors() {
        let mut causes = Vec::new();
        assert!(label_selector(&Value::Null, "spec.selector", "x", &mut causes).is_none());
        assert!(label_selector(&json!({}), "spec.selector", "statefulset", &mut causes).is_none());
        assert_eq!(causes[0].reason, "FieldValueRequired");
        assert_eq!(
            causes[1].message,
            "Invalid value: {}: empty selector is invalid for statefulset"
        );
    }

    #[test]
    fn restart_policy_and_counts() {
        let mut causes = Vec::new();
        pod_template(
            &template(json!({}), "Always"),
            "spec.template",
            None,
            &["OnFailure", "Never"],
            &mut causes,
        );
        assert_eq!(causes[0].field, "spec.template.spec.restartPolicy");
        assert_eq!(
            causes[0].message,
            "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
        let mut causes = Vec::new();
        non_negative(
            &json!({"replicas": -1}),
            "replicas",
            "spec.replicas",
            &mut causes,
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn template_labels_are_validated_like_an_objects() {
        let job =
            json!({"spec": {"template": {"metadata": {"labels": {"job-name": "j".repeat(64)}}}}});
        let causes = validate_template_metadata("batch", "Job", &job);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        let cj = json!({"spec": {"jobTemplate": {"metadata": {"annotations": {"bad key": "v"}},
            "spec": {"template": {"metadata": {"labels": {"ok": "-bad"}}}}}}});
        let fields: Vec<String> = validate_template_metadata("batch", "CronJob", &cj)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.jobTemplate.metadata.annotations",
                "spec.jobTemplate.spec.template.metadata.labels"
            ]
        );
        assert!(validate_template_metadata("", "ConfigMap", &job).is_empty());
    }
}
