//! StatefulSet and DaemonSet (`SetDefaults_StatefulSet`, `SetDefaults_DaemonSet`, their spec
//! validation and StatefulSet's update rule) and ControllerRevision.

use serde_json::{json, Value};

use super::default_field;
use super::pod::default_pod_spec;
use super::volume::claim_defaults;
use super::workload::{label_selector, non_negative, pod_template};
use k3rs_apimachinery::status::Cause;

fn template_defaults(obj: &mut Value) {
    if let Some(ps) = obj["spec"]
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
    {
        default_pod_spec(ps);
    }
}

pub fn statefulset_defaults(sts: &mut Value) {
    let Some(spec) = sts.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "podManagementPolicy", json!("OrderedReady"));
    default_field(spec, "updateStrategy", json!({}));
    default_field(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        default_field(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
        default_field(
            &mut spec["updateStrategy"]["rollingUpdate"],
            "partition",
            json!(0),
        );
    }
    default_field(spec, "persistentVolumeClaimRetentionPolicy", json!({}));
    let policy = &mut spec["persistentVolumeClaimRetentionPolicy"];
    default_field(policy, "whenDeleted", json!("Retain"));
    default_field(policy, "whenScaled", json!("Retain"));
    default_field(spec, "replicas", json!(1));
    default_field(spec, "revisionHistoryLimit", json!(10));
    if let Some(claims) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for c in claims {
            claim_defaults(c);
        }
    }
    template_defaults(sts);
}

/// The checks every workload with a pod template (`spec.template`) that must run forever makes.
fn always_running_template(spec: &Value, what: &str, causes: &mut Vec<Cause>) {
    let sel = label_selector(&spec["selector"], "spec.selector", what, causes);
    pod_template(
        &spec["template"],
        "spec.template",
        sel.as_ref(),
        &["Always"],
        causes,
    );
    if spec["template"]["spec"]["activeDeadlineSeconds"].is_number() {
        causes.push(Cause::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {what} is not Supported"),
        ));
    }
}

pub fn validate_statefulset(sts: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &sts["spec"];
    match spec["podManagementPolicy"].as_str().unwrap_or("") {
        "OrderedReady" | "Parallel" => {}
        "" => causes.push(Cause::required("spec.podManagementPolicy", "")),
        other => causes.push(Cause::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = &spec["updateStrategy"];
    match strategy["type"].as_str().unwrap_or("") {
        "RollingUpdate" => non_negative(
            &strategy["rollingUpdate"],
            "partition",
            "spec.updateStrategy.rollingUpdate.partition",
            &mut causes,
        ),
        "OnDelete" => {
            if !strategy["rollingUpdate"].is_null() {
                causes.push(Cause::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    "",
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "" => causes.push(Cause::required("spec.updateStrategy", "")),
        other => causes.push(Cause::invalid(
            "spec.updateStrategy",
            other,
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    for (k, v) in spec["persistentVolumeClaimRetentionPolicy"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let v = v.as_str().unwrap_or("");
        if !["Retain", "Delete"].contains(&v) {
            causes.push(Cause::not_supported(
                format!("spec.persistentVolumeClaimRetentionPolicy.{k}"),
                v,
                &["Retain", "Delete"],
            ));
        }
    }
    non_negative(spec, "replicas", "spec.replicas", &mut causes);
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", &mut causes);
    always_running_template(spec, "statefulset", &mut causes);
    for (i, c) in spec["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        causes.extend(super::volume::validate_claim_spec(
            &c["spec"],
            &format!("spec.volumeClaimTemplates[{i}].spec"),
        ));
    }
    causes
}

/// Only `replicas`, `ordinals`, `template`, `updateStrategy`,
/// `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` may change.
pub fn validate_statefulset_update(old: &Value, new: &Value) -> Vec<Cause> {
    let strip = |v: &Value| {
        let mut s = v["spec"].clone();
        if let Some(o) = s.as_object_mut() {
            for k in [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ] {
                o.remove(k);
            }
        }
        s
    };
    if strip(old) == strip(new) {
        return Vec::new();
    }
    vec![Cause::forbidden(
        "spec",
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    )]
}

pub fn daemonset_defaults(ds: &mut Value) {
    let Some(spec) = ds.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "updateStrategy", json!({}));
    default_field(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
    if spec["updateStrategy"]["type"] == "RollingUpdate" {
        default_field(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
        let ru = &mut spec["updateStrategy"]["rollingUpdate"];
        default_field(ru, "maxUnavailable", json!(1));
        default_field(ru, "maxSurge", json!(0));
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    template_defaults(ds);
}

fn is_zero(v: &Value) -> bool {
    v == &json!(0) || v == &json!("0%") || v == &json!("0")
}

pub fn validate_daemonset(ds: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &ds["spec"];
    always_running_template(spec, "daemonset", &mut causes);
    let strategy = &spec["updateStrategy"];
    match strategy["type"].as_str().unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let ru = &strategy["rollingUpdate"];
            if is_zero(&ru["maxUnavailable"]) && is_zero(&ru["maxSurge"]) {
                causes.push(Cause::invalid_value(
                    "spec.updateStrategy.rollingUpdate.maxUnavailable",
                    &ru["maxUnavailable"],
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        other => causes.push(Cause::not_supported(
            "spec.updateStrategy",
            other,
            &["RollingUpdate", "OnDelete"],
        )),
    }
    non_negative(spec, "minReadySeconds", "spec.minReadySeconds", &mut causes);
    non_negative(
        spec,
        "revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        &mut causes,
    );
    causes
}

/// `revision` non-negative; `data` is mandatory.
pub fn validate_controllerrevision(cr: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if cr["data"].is_null() {
        causes.push(Cause::required("data", "data is mandatory"));
    }
    non_negative(cr, "revision", "revision", &mut causes);
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(labels: Value) -> Value {
        json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    }

    #[test]
    fn statefulset_defaults_are_upstreams() {
        let mut sts = workload(json!({"app": "a"}));
        sts["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
        statefulset_defaults(&mut sts);
        let s = &sts["spec"];
        assert_eq!(s["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            s["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            s["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(s["replicas"], 1);
        assert_eq!(s["revisionHistoryLimit"], 10);
        assert_eq!(
            s["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(s["volumeClaimTemplates"][0]["status"]["phase"], "Pending");
        assert!(
            validate_statefulset(&sts).is_empty(),
            "{:?}",
            validate_statefulset(&sts)
        );
    }

    #[test]
    fn statefulset_validation() {
        let mut sts = workload(json!({"app": "b"}));
        statefulset_defaults(&mut sts);
        sts["spec"]["podManagementPolicy"] = json!("Random");
        let fields: Vec<String> = validate_statefulset(&sts)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["spec.podManagementPolicy", "spec.template.metadata.labels"]
        );
        let mut changed = sts.clone();
        changed["spec"]["serviceName"] = json!("other");
        assert_eq!(validate_statefulset_update(&sts, &changed)[0].field, "spec");
        changed = sts.clone();
        changed["spec"]["replicas"] = json!(5);
        assert!(validate_statefulset_update(&sts, &changed).is_empty());
    }

    #[test]
    fn daemonset_defaults_and_validation() {
        let mut ds = workload(json!({"app": "a"}));
        daemonset_defaults(&mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert!(validate_daemonset(&ds).is_empty());
        ds["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(0);
        let fields: Vec<String> = validate_daemonset(&ds)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.template.spec.restartPolicy",
                "spec.updateStrategy.rollingUpdate.maxUnavailable"
            ]
        );
    }

    #[test]
    fn daemonset_selector_is_immutable() {
        let r = k3rs_apimachinery::catalog::lookup("apps", "v1", "daemonsets").unwrap();
        let old = workload(json!({"app": "a"}));
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(super::super::validate_update(r, &new, &old).is_empty());
        new["spec"]["selector"] = json!({"matchLabels": {"app": "b"}});
        let causes = super::super::validate_update(r, &new, &old);
        assert_eq!(causes[0].field, "spec.selector");
        assert!(
            causes[0].message.ends_with("field is immutable"),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn controller_revision_needs_data() {
        let causes = validate_controllerrevision(&json!({"revision": -1}));
        assert_eq!(causes[0].field, "data");
        assert_eq!(causes[1].field, "revision");
        assert!(validate_controllerrevision(&json!({"revision": 1, "data": {}})).is_empty());
    }
}
