//! Which updates of built-in objects bump `metadata.generation`, and what a status write may
//! change besides the status (kube's per-resource `PrepareForUpdate` of the main and the
//! status strategies).

use k3rs_apimachinery::catalog::Resource;
use serde_json::Value;

/// What a write of the status subresource takes from `body` besides the status (kube's
/// status strategies), into `new`: a Deployment's annotations, where the deployment controller
/// records the revision (`deploymentStatusStrategy` resets only the spec and the labels).
pub fn prepare_for_status_update(r: &Resource, body: &Value, new: &mut Value) {
    if (r.group, r.kind) == ("apps", "Deployment") {
        let annotations = body["metadata"].get("annotations").cloned();
        new["metadata"]["annotations"] = annotations.unwrap_or(Value::Null);
    }
}

/// Whether an update of a built-in object from `old` to `new` bumps `metadata.generation`
/// (kube's `PrepareForUpdate`): a change of the spec, compared as decoded objects, and for a
/// Deployment a change of its annotations too (they are copied to its ReplicaSets).
pub fn bumps_generation(r: &Resource, new: &Value, old: &Value) -> bool {
    let differs = |path: &[&str]| {
        let at = |v| path.iter().fold(v, |v: &Value, k| &v[*k]);
        !k3rs_apimachinery::semantic::equal(at(new), at(old))
    };
    let deployment = (r.group, r.kind) == ("apps", "Deployment");
    r.has_spec && differs(&["spec"]) || deployment && differs(&["metadata", "annotations"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::by_kind;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"metadata": {"name": "web", "annotations": {"a": "1"}},
               "spec": {"replicas": 1, "template": {"metadata": {"creationTimestamp": null}}}})
    }

    #[test]
    fn spec_changes_bump_null_fields_do_not() {
        let d = by_kind("apps", "Deployment").unwrap();
        let rs = by_kind("apps", "ReplicaSet").unwrap();
        let old = deployment();
        let mut typed = old.clone();
        typed["spec"]["template"]["metadata"] = json!({});
        assert!(
            !bumps_generation(d, &typed, &old),
            "a typed round trip is no change"
        );
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(2);
        assert!(bumps_generation(d, &scaled, &old));
        assert!(bumps_generation(rs, &scaled, &old));
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"]["b"] = json!("2");
        assert!(
            bumps_generation(d, &annotated, &old),
            "as deploymentStrategy"
        );
        assert!(
            !bumps_generation(rs, &annotated, &old),
            "as rsStrategy: spec only"
        );
        let mut labeled = old.clone();
        labeled["metadata"]["labels"] = json!({"x": "y"});
        assert!(!bumps_generation(d, &labeled, &old));
    }

    #[test]
    fn a_deployment_status_write_carries_annotations() {
        let d = by_kind("apps", "Deployment").unwrap();
        let rs = by_kind("apps", "ReplicaSet").unwrap();
        let body = json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "2"}}});
        let mut new = deployment();
        prepare_for_status_update(d, &body, &mut new);
        assert_eq!(
            new["metadata"]["annotations"],
            body["metadata"]["annotations"]
        );
        let mut new = deployment();
        prepare_for_status_update(rs, &body, &mut new);
        assert_eq!(new["metadata"]["annotations"], json!({"a": "1"}));
    }
}
